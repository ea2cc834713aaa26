package host

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// An archive whose members all sit under one folder holding a sysfs is read as that
// folder's root; any other shape is read as it always was.
func TestArchiveUnderOneFolder(t *testing.T) {
	// The shape of hwloc's test captures (open-mpi/hwloc, tests/hwloc/linux/
	// nvidiagpunumanodes.tar.bz2): the folder first, then proc and sys below it, a PCI
	// device a plain directory of its attributes.
	hwloc := []treeEntry{
		{path: "nvidiagpunumanodes", dir: true},
		{path: "nvidiagpunumanodes/proc/driver/nvidia/gpus/0004:05:00.0/numa_status", body: "Node:      255\nStatus:    online\n"},
		{path: "nvidiagpunumanodes/sys/bus/pci/devices/0004:05:00.0/class", body: "0x030000\n"},
		{path: "nvidiagpunumanodes/sys/devices/system/node/node0/cpulist", body: "0-87\n"},
	}
	tests := []struct {
		name    string
		entries []treeEntry
		top     string            // ArchiveTop
		files   map[string]string // path → contents, read from the Host
		root    []string          // ReadDir("/")
	}{
		{
			name:    "hwloc's capture",
			entries: hwloc,
			top:     "nvidiagpunumanodes",
			files: map[string]string{
				"/sys/bus/pci/devices/0004:05:00.0/class":           "0x030000",
				"/proc/driver/nvidia/gpus/0004:05:00.0/numa_status": "Node:      255\nStatus:    online",
			},
			root: []string{"proc", "sys"},
		},
		{
			name:    "the folder implied by its members only",
			entries: hwloc[1:],
			top:     "nvidiagpunumanodes",
			files:   map[string]string{"/sys/devices/system/node/node0/cpulist": "0-87"},
			root:    []string{"proc", "sys"},
		},
		{
			name: "a sys with devices/ only",
			entries: []treeEntry{
				{path: "host1/sys/devices/pci0000:00/0000:00:01.1/vendor", body: "0x1022\n"},
			},
			top:   "host1",
			files: map[string]string{"/sys/devices/pci0000:00/0000:00:01.1/vendor": "0x1022"},
			root:  []string{"sys"},
		},
		{
			name:    "members relative to the root",
			entries: []treeEntry{{path: "sys/bus/pci/devices/x", body: "1\n"}, {path: "proc/cmdline", body: "quiet\n"}},
			files:   map[string]string{"/sys/bus/pci/devices/x": "1", "/proc/cmdline": "quiet"},
			root:    []string{"proc", "sys"},
		},
		{
			// The one folder is the root's own sys.
			name:    "only sys",
			entries: []treeEntry{{path: "sys/sys/bus/x", body: "1\n"}, {path: "sys/bus/pci/devices/y", body: "2\n"}},
			files:   map[string]string{"/sys/sys/bus/x": "1", "/sys/bus/pci/devices/y": "2"},
			root:    []string{"sys"},
		},
		{
			// procfs has a sys/ of its own, with no bus/ or devices/.
			name:    "only proc",
			entries: []treeEntry{{path: "proc/sys/kernel/hostname", body: "kpro6\n"}, {path: "proc/cmdline", body: "quiet\n"}},
			files:   map[string]string{"/proc/cmdline": "quiet"},
			root:    []string{"proc"},
		},
		{
			name:    "two folders",
			entries: []treeEntry{{path: "host1/sys/bus/x", body: "1\n"}, {path: "host2/sys/bus/x", body: "2\n"}},
			files:   map[string]string{"/host1/sys/bus/x": "1", "/host2/sys/bus/x": "2"},
			root:    []string{"host1", "host2"},
		},
		{
			name:    "a file beside the folder",
			entries: []treeEntry{{path: "host1/sys/bus/x", body: "1\n"}, {path: "README", body: "captured\n"}},
			files:   map[string]string{"/host1/sys/bus/x": "1", "/README": "captured"},
			root:    []string{"README", "host1"},
		},
		{
			name:    "a folder without sys",
			entries: []treeEntry{{path: "host1/proc/cmdline", body: "quiet\n"}},
			files:   map[string]string{"/host1/proc/cmdline": "quiet"},
			root:    []string{"host1"},
		},
		{
			name:    "a folder whose sys is a file",
			entries: []treeEntry{{path: "host1/sys", body: "not a directory\n"}},
			root:    []string{"host1"},
		},
		{
			name:    "the one top entry a link",
			entries: []treeEntry{{path: "host1", target: "/sys"}},
			root:    []string{"host1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := OpenArchive("capture.tar.gz", bytes.NewReader(archiveTree(t, tt.entries, "", true)))
			if err != nil {
				t.Fatal(err)
			}
			if got := h.ArchiveTop(); got != tt.top {
				t.Errorf("ArchiveTop() = %q, want %q", got, tt.top)
			}
			for p, want := range tt.files {
				if got, err := h.ReadString(p); err != nil || got != want {
					t.Errorf("ReadString(%s) = %q, %v; want %q", p, got, err, want)
				}
			}
			if got, err := h.ReadDir("/"); err != nil || !reflect.DeepEqual(got, tt.root) {
				t.Errorf("ReadDir(/) = %v, %v; want %v", got, err, tt.root)
			}
		})
	}
}

// Links, hard links and every directory's listing come through the new root whole.
func TestArchiveUnderOneFolderLinks(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("0x10de\n")
	for _, hdr := range []*tar.Header{
		{Name: "host1/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "host1/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/vendor", Typeflag: tar.TypeReg, Size: int64(len(body)), Mode: 0o644},
		{Name: "host1/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/vendor.copy", Typeflag: tar.TypeLink,
			Linkname: "host1/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/vendor"},
		{Name: "host1/sys/bus/pci/devices/0000:01:00.0", Typeflag: tar.TypeSymlink,
			Linkname: "../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0"},
		{Name: "host1/sys/bus/pci/devices/0000:00:01.1", Typeflag: tar.TypeSymlink, Linkname: "/sys/devices/pci0000:00/0000:00:01.1"},
		{Name: "host1/sys/escape", Typeflag: tar.TypeSymlink, Linkname: "../../README"},
		{Name: "host1/README", Typeflag: tar.TypeReg, Mode: 0o644},
	} {
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	tw.Close()
	h, err := OpenArchive("capture.tar", &buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"/sys/bus/pci/devices/0000:01:00.0/vendor",
		"/sys/bus/pci/devices/0000:01:00.0/vendor.copy",
		"/sys/bus/pci/devices/0000:00:01.1/0000:01:00.0/vendor",
	} {
		if got, err := h.ReadString(p); err != nil || got != "0x10de" {
			t.Errorf("ReadString(%s) = %q, %v", p, got, err)
		}
	}
	if got, err := h.Realpath("/sys/bus/pci/devices/0000:01:00.0"); err != nil || got != "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0" {
		t.Errorf("Realpath = %q, %v", got, err)
	}
	if got, err := h.ReadDir("/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0"); err != nil || !reflect.DeepEqual(got, []string{"vendor", "vendor.copy"}) {
		t.Errorf("ReadDir = %v, %v", got, err)
	}
	// The folder above the root is no longer inside it.
	if _, err := h.ReadString("/sys/escape"); !errors.Is(err, ErrEscapesRoot) {
		t.Errorf("a link above the new root: %v, want %v", err, ErrEscapesRoot)
	}
}

// A directory is taken as the root it is named, whatever it holds.
func TestDirectoryUnderOneFolderNotRerooted(t *testing.T) {
	root := writeDirTree(t, []treeEntry{{path: "host1/sys/bus/pci/devices/x", body: "1\n"}})
	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if h.ArchiveTop() != "" || !h.Exists("/host1/sys/bus/pci/devices/x") {
		t.Errorf("directory root read under its folder: ArchiveTop %q", h.ArchiveTop())
	}
	// And an archive of it, from a file, through Open, is.
	f := filepath.Join(t.TempDir(), "host1.tar.gz")
	if err := os.WriteFile(f, archiveTree(t, []treeEntry{{path: "host1/sys/bus/pci/devices/x", body: "1\n"}}, "", true), 0o644); err != nil {
		t.Fatal(err)
	}
	if h, err = Open(f); err != nil {
		t.Fatal(err)
	}
	if got, err := h.ReadString("/sys/bus/pci/devices/x"); h.ArchiveTop() != "host1" || err != nil || got != "1" {
		t.Errorf("ArchiveTop %q, read %q, %v", h.ArchiveTop(), got, err)
	}
}
