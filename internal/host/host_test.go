package host

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// treeEntry is one member of a test tree: a file (body) or a link (target).
type treeEntry struct {
	path   string
	body   string
	target string
	dir    bool
}

// A small sysfs-shaped tree, with the links the kernel makes.
var sampleTree = []treeEntry{
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/vendor", body: "0x10de\n"},
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/driver", target: "../../../../bus/pci/drivers/nvidia"},
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/iommu_group", target: "../../../../kernel/iommu_groups/10"},
	{path: "sys/devices/pci0000:00/0000:00:01.1/vendor", body: "0x1022\n"},
	{path: "sys/bus/pci/drivers/nvidia", dir: true},
	{path: "sys/kernel/iommu_groups/10/devices/0000:01:00.0", target: "../../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0"},
	{path: "sys/bus/pci/devices/0000:01:00.0", target: "../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0"},
	{path: "sys/bus/pci/devices/0000:00:01.1", target: "../../../devices/pci0000:00/0000:00:01.1"},
	{path: "proc/1234/fd/5", target: "/dev/nvidia0"},
	{path: "etc/pve/qemu-server", target: "/etc/pve/nodes/kpro6/qemu-server"},
	{path: "etc/pve/nodes/kpro6/qemu-server/131.conf", body: "machine: q35\n"},
	{path: "sys/escape", target: "../../../etc/passwd"},
	{path: "sys/devices/escape2", target: "../../.."},
	{path: "sys/loop", target: "loop"},
	{path: "sys/dangling", target: "nowhere"},
}

func writeDirTree(t *testing.T, entries []treeEntry) string {
	t.Helper()
	root := t.TempDir()
	for _, e := range entries {
		p := filepath.Join(root, e.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case e.dir:
			err = os.MkdirAll(p, 0o755)
		case e.target != "":
			err = os.Symlink(e.target, p)
		default:
			err = os.WriteFile(p, []byte(e.body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func archiveTree(t *testing.T, entries []treeEntry, prefix string, compress bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	var tw *tar.Writer
	var zw *gzip.Writer
	if compress {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	} else {
		tw = tar.NewWriter(&buf)
	}
	for _, e := range entries {
		hdr := &tar.Header{Name: prefix + e.path, Mode: 0o644}
		switch {
		case e.dir:
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		case e.target != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.target
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// hosts returns the same tree as a directory and as archives, with and without "./",
// and packed under one folder as many people pack a capture (read as that folder's root).
func hosts(t *testing.T, entries []treeEntry) map[string]*Host {
	t.Helper()
	out := map[string]*Host{}
	dir, err := Open(writeDirTree(t, entries))
	if err != nil {
		t.Fatal(err)
	}
	out["dir"] = dir
	for name, a := range map[string][]byte{
		"tar.gz":          archiveTree(t, entries, "", true),
		"tar.gz ./":       archiveTree(t, entries, "./", true),
		"plain tar":       archiveTree(t, entries, "", false),
		"tar.gz abs":      archiveTree(t, entries, "/", true),
		"tar.gz host1/":   archiveTree(t, entries, "host1/", true),
		"tar.gz ./host1/": archiveTree(t, append([]treeEntry{{path: "", dir: true}}, entries...), "./host1/", true),
	} {
		h, err := OpenArchive(name, bytes.NewReader(a))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = h
	}
	// The same archive, from a file on disk, through Open.
	f := filepath.Join(t.TempDir(), "snap.tar.gz")
	if err := os.WriteFile(f, archiveTree(t, entries, "./", true), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := Open(f)
	if err != nil {
		t.Fatal(err)
	}
	out["file"] = h
	// And the archive under a folder, packed as the sample host is embedded.
	pack, err := Pack(out["tar.gz host1/"])
	if err != nil {
		t.Fatal(err)
	}
	if out["pack"], err = OpenPacked("pack", string(pack)); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestResolution(t *testing.T) {
	cases := []struct {
		name    string
		op      func(h *Host) (string, error)
		want    string
		fail    bool
		wantErr error // matched with errors.Is, when set
	}{
		{"read through device link", func(h *Host) (string, error) {
			return h.ReadString("/sys/bus/pci/devices/0000:01:00.0/vendor")
		}, "0x10de", false, nil},
		{"parent through ..", func(h *Host) (string, error) {
			return h.ReadString("/sys/bus/pci/devices/0000:01:00.0/../vendor")
		}, "0x1022", false, nil},
		{"realpath", func(h *Host) (string, error) {
			return h.Realpath("/sys/bus/pci/devices/0000:01:00.0")
		}, "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0", false, nil},
		{"driver link base", func(h *Host) (string, error) {
			return h.LinkBase("/sys/bus/pci/devices/0000:01:00.0/driver")
		}, "nvidia", false, nil},
		{"missing link base is empty", func(h *Host) (string, error) {
			return h.LinkBase("/sys/bus/pci/devices/0000:00:01.1/driver")
		}, "", false, nil},
		{"group link target", func(h *Host) (string, error) {
			return h.Readlink("/sys/bus/pci/devices/0000:01:00.0/iommu_group")
		}, "../../../../kernel/iommu_groups/10", false, nil},
		{"group member back to device", func(h *Host) (string, error) {
			return h.ReadString("/sys/kernel/iommu_groups/10/devices/0000:01:00.0/vendor")
		}, "0x10de", false, nil},
		{"readlink of absolute fd link", func(h *Host) (string, error) {
			return h.Readlink("/proc/1234/fd/5")
		}, "/dev/nvidia0", false, nil},
		{"absolute link resolves inside root", func(h *Host) (string, error) {
			return h.ReadString("/etc/pve/qemu-server/131.conf")
		}, "machine: q35", false, nil},
		{"escaping link", func(h *Host) (string, error) {
			return h.ReadString("/sys/escape")
		}, "", true, ErrEscapesRoot},
		{"escaping link as directory", func(h *Host) (string, error) {
			return h.ReadString("/sys/devices/escape2/etc/passwd")
		}, "", true, ErrEscapesRoot},
		{"escaping path", func(h *Host) (string, error) {
			return h.ReadString("/../../etc/passwd")
		}, "", true, ErrEscapesRoot},
		{"missing file", func(h *Host) (string, error) {
			return h.ReadString("/sys/bus/pci/devices/0000:01:00.0/numa_node")
		}, "", true, fs.ErrNotExist},
		{"dangling link", func(h *Host) (string, error) {
			return h.ReadString("/sys/dangling")
		}, "", true, fs.ErrNotExist},
		{"relative path", func(h *Host) (string, error) {
			return h.ReadString("sys/escape")
		}, "", true, nil},
		{"readlink of a file", func(h *Host) (string, error) {
			return h.Readlink("/sys/devices/pci0000:00/0000:00:01.1/vendor")
		}, "", true, nil},
		{"link loop", func(h *Host) (string, error) {
			return h.ReadString("/sys/loop")
		}, "", true, nil},
		{"file as directory", func(h *Host) (string, error) {
			return h.ReadString("/sys/devices/pci0000:00/0000:00:01.1/vendor/x")
		}, "", true, nil},
	}
	for hname, h := range hosts(t, sampleTree) {
		for _, c := range cases {
			t.Run(hname+"/"+c.name, func(t *testing.T) {
				// Twice: the second run goes through the cache of resolved directories.
				for range 2 {
					got, err := c.op(h)
					if c.fail {
						if err == nil {
							t.Fatalf("got %q, want an error", got)
						}
						if c.wantErr != nil && !errors.Is(err, c.wantErr) {
							t.Fatalf("error %v, want %v", err, c.wantErr)
						}
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					if got != c.want {
						t.Fatalf("got %q, want %q", got, c.want)
					}
				}
			})
		}
	}
}

func TestReadDir(t *testing.T) {
	for hname, h := range hosts(t, sampleTree) {
		got, err := h.ReadDir("/sys/bus/pci/devices")
		if err != nil {
			t.Fatalf("%s: %v", hname, err)
		}
		want := []string{"0000:00:01.1", "0000:01:00.0"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", hname, got, want)
		}
		// A directory reached through a link lists the link's target.
		got, err = h.ReadDir("/sys/bus/pci/devices/0000:00:01.1")
		if err != nil {
			t.Fatalf("%s: %v", hname, err)
		}
		want = []string{"0000:01:00.0", "vendor"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", hname, got, want)
		}
		if !h.IsDir("/sys/bus/pci/drivers/nvidia") || h.IsDir("/sys/bus/pci/devices/0000:01:00.0/vendor") {
			t.Errorf("%s: IsDir wrong", hname)
		}
		if h.Exists("/sys/escape") || !h.Exists("/proc/1234/fd") {
			t.Errorf("%s: Exists wrong", hname)
		}
		if _, err := h.ReadDir("/sys/bus/pci/devices/0000:01:00.0/vendor"); err == nil {
			t.Errorf("%s: ReadDir of a file succeeded", hname)
		}
	}
}

func TestErrorsNameRootAndPath(t *testing.T) {
	for hname, h := range hosts(t, sampleTree) {
		_, err := h.ReadString("/sys/escape")
		msg := err.Error()
		if !strings.Contains(msg, "/sys/escape") || !strings.Contains(msg, "../../../etc/passwd") {
			t.Errorf("%s: message %q does not name the path and the link", hname, msg)
		}
		if !strings.Contains(msg, h.Root()) {
			t.Errorf("%s: message %q does not name the root %s", hname, msg, h.Root())
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "nope")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.tar.gz")
	if err := os.WriteFile(bad, []byte("this is not an archive at all, not even close to one..........................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................."), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bad); err == nil || !strings.Contains(err.Error(), "bad.tar.gz") {
		t.Errorf("garbage archive: %v", err)
	}
	// Truncated gzip stream.
	a := archiveTree(t, sampleTree, "", true)
	if _, err := OpenArchive("cut", bytes.NewReader(a[:len(a)/2])); err == nil {
		t.Error("truncated archive opened without error")
	}
	// A member that climbs out of the archive.
	evil := archiveTree(t, []treeEntry{{path: "../../etc/cron.d/x", body: "boom"}}, "", true)
	if _, err := OpenArchive("evil", bytes.NewReader(evil)); err == nil || !strings.Contains(err.Error(), "outside the archive") {
		t.Errorf("escaping member: %v", err)
	}
}

func TestHardLinkInArchive(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("42\n")
	for _, hdr := range []*tar.Header{
		{Name: "a/file", Typeflag: tar.TypeReg, Size: int64(len(body)), Mode: 0o644},
		{Name: "b/same", Typeflag: tar.TypeLink, Linkname: "a/file", Mode: 0o644},
	} {
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	tw.Close()
	h, err := OpenArchive("hl", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := h.ReadString("/b/same"); err != nil || got != "42" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// An error shows a long path by its start and end, whatever its length.
func TestPathErrorShortens(t *testing.T) {
	long := "/sys/" + strings.Repeat("d/", 2000) + "numa_node"
	msg := (&PathError{Op: "read", Root: "r", Path: long, Err: fs.ErrNotExist}).Error()
	if len(msg) > 400 || !strings.HasPrefix(msg, "read /sys/d/d/") || !strings.Contains(msg, "d/d/numa_node (4014 bytes) (under root r): file does not exist") {
		t.Errorf("%d bytes: %s", len(msg), msg)
	}
	if msg := (&PathError{Op: "read", Root: "/", Path: "/proc/cmdline", Err: fs.ErrNotExist}).Error(); msg != "read /proc/cmdline: file does not exist" {
		t.Errorf("short path: %s", msg)
	}
}
