package samplehost

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
)

var update = flag.Bool("update", false, "rewrite kpro6.tar.gz from its description")

// The embedded archive must be what the description in kpro6_test.go builds, so that the
// description stays the readable source of the sample host.
func TestArchiveIsCurrent(t *testing.T) {
	tree, err := kpro6().Build()
	if err != nil {
		t.Fatal(err)
	}
	want, err := tree.Archive()
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.OpenArchive(Name, bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	wantPack, err := host.Pack(h)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("kpro6.tar.gz", want, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("kpro6.pack", wantPack, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	// Compare the tar streams: gzip's bytes may differ between Go releases.
	if !bytes.Equal(untar(t, want), untar(t, archive)) {
		t.Fatal("kpro6.tar.gz is out of date with its description; run: go generate ./internal/samplehost")
	}
	if string(wantPack) != pack {
		t.Fatal("kpro6.pack is out of date with its description; run: go generate ./internal/samplehost")
	}
}

func untar(t *testing.T, gz []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// Check it is a tar archive, not just any gzip stream.
	if _, err := tar.NewReader(bytes.NewReader(b)).Next(); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpen(t *testing.T) {
	h, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.ReadString("/sys/bus/pci/devices/0000:e1:00.0/numa_node")
	if err != nil || got != "1" {
		t.Fatalf("numa_node of e1:00.0 = %q, %v; want 1", got, err)
	}
}
