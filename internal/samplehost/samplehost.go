// Package samplehost holds the sample host behind --demo: a snapshot archive of kpro6, a
// Proxmox VE node with 8 × RTX PRO 6000 Blackwell on two NUMA nodes, embedded in the
// binary so that every command can be tried from any directory.
package samplehost

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gpusplit/gpusplit/internal/host"
)

// Name is how the sample host is named in messages and output.
const Name = "demo:kpro6"

//go:generate go test -run TestArchiveIsCurrent -update .

//go:embed kpro6.tar.gz
var archive []byte

// pack is the archive as host.Pack writes it, made from kpro6.tar.gz by go generate:
// what Open reads, with no gzip or tar to decode (TestArchiveIsCurrent keeps the two the
// same).
//
//go:embed kpro6.pack
var pack string

// Archive returns the snapshot archive of the sample host, for the tests that read it as
// an archive (topo, snapshot, pve, inventory, cli).
func Archive() []byte { return bytes.Clone(archive) }

// Open returns the sample host.
func Open() (*host.Host, error) {
	return host.OpenPacked(Name, pack)
}

// Unpack lays the sample host out in dir, links kept as links, so that a test can change
// its files and open it with host.Open. Only tests use it.
func Unpack(dir string) error {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(hdr.Name))
		if !filepath.IsLocal(name) {
			return fmt.Errorf("member %q leads outside the archive", hdr.Name)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, p)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		}
		if err != nil {
			return err
		}
	}
}
