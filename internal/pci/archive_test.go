package pci_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// tarDir packs the tree at root as tar czf does from its parent (`tar czf host1.tar.gz
// host1`): every member under folder/, links kept as links.
func tarDir(t *testing.T, root, folder string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(filepath.Join(folder, rel))
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: name, Mode: 0o644}
		var body []byte
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case info.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, name+"/", 0o755
		default:
			if body, err = os.ReadFile(p); err != nil {
				return err
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(body)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A capture packed under its folder scans as the directory it was packed from, with a
// note first saying which folder was read as the root.
func TestScanArchiveUnderOneFolder(t *testing.T) {
	tests := []struct {
		name, folder string
		root         func(t *testing.T) string
		devices      int
	}{
		{"the server", "host1", func(t *testing.T) string { return writeMachine(t, server()) }, len(serverAddrs)},
		{
			// hwloc packs its captures so; with the uevent of TestScanPOWER9Capture.
			"hwloc's POWER9 capture", "nvidiagpunumanodes",
			func(t *testing.T) string {
				return writePOWER9(t, func(addr string) map[string]string {
					return map[string]string{"uevent": "PCI_CLASS=30000\nPCI_ID=10DE:1DB1\nPCI_SLOT_NAME=" + addr + "\n"}
				})
			},
			len(power9GPUs),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.root(t)
			const snap = "capture.tar.gz"
			h, err := host.OpenArchive(snap, bytes.NewReader(tarDir(t, dir, tt.folder)))
			if err != nil {
				t.Fatal(err)
			}
			tree, err := pci.Scan(h, nil)
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			if len(tree.Devices) != tt.devices {
				t.Errorf("%d devices, want %d", len(tree.Devices), tt.devices)
			}
			note := "capture.tar.gz: every member is under " + tt.folder + "/, so " + tt.folder + "/ is read as the root"
			if len(tree.Warnings) == 0 || tree.Warnings[0] != note {
				t.Fatalf("warnings:\n%s\nwant first:\n%s", strings.Join(tree.Warnings, "\n"), note)
			}
			fromDir := scanDir(t, dir)
			rest := pci.NewTree(tree.Devices, tree.Warnings[1:])
			if a, d := render(rest, snap), render(fromDir, dir); a != d {
				t.Errorf("the archive and the directory scan differently:\narchive:\n%s\ndirectory:\n%s", a, d)
			}
		})
	}

	// Packed as it should be, there is nothing to say.
	t.Run("members relative to the root", func(t *testing.T) {
		dir := writeMachine(t, server())
		h, err := host.OpenArchive("capture.tar.gz", bytes.NewReader(tarDir(t, dir, ".")))
		if err != nil {
			t.Fatal(err)
		}
		tree, err := pci.Scan(h, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(tree.Devices) != len(serverAddrs) || len(tree.Warnings) != 0 {
			t.Errorf("%d devices, warnings %q", len(tree.Devices), tree.Warnings)
		}
	})
}
