// Package samplehost holds the sample host behind --demo: a snapshot archive of kpro6, a
// Proxmox VE node with 8 × RTX PRO 6000 Blackwell on two NUMA nodes, embedded in the
// binary so that every command can be tried from any directory.
package samplehost

import (
	"bytes"
	_ "embed"

	"github.com/gpusplit/gpusplit/internal/host"
)

// Name is how the sample host is named in messages and output.
const Name = "demo:kpro6"

//go:generate go test -run TestArchiveIsCurrent -update .

//go:embed kpro6.tar.gz
var archive []byte

// Archive returns the snapshot archive of the sample host.
func Archive() []byte { return bytes.Clone(archive) }

// Open returns the sample host.
func Open() (*host.Host, error) {
	return host.OpenArchive(Name, bytes.NewReader(archive))
}
