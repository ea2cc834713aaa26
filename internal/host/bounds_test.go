//go:build linux

package host

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// plant is one thing put into a crafted root, laid out as a directory and as an archive.
type plant struct {
	path string // relative to the root
	kind string // "fifo", "char", "block", "socket", "file" (size zero bytes), "link" (hard link to target)
	size int64
	dev  [2]uint32 // major, minor of a device
	to   string    // a hard link's target
}

func makedev(major, minor uint32) int {
	return int(uint64(minor&0xff) | uint64(major&0xfff)<<8 | uint64(minor&^0xff)<<12 | uint64(major&^0xfff)<<32)
}

// plantDir lays the plants out under root. Devices need CAP_MKNOD: without it the test
// is skipped with that reason, since nothing else makes a device node.
func plantDir(t *testing.T, root string, plants []plant) {
	t.Helper()
	for _, p := range plants {
		full := filepath.Join(root, p.path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(full)
		var err error
		switch p.kind {
		case "fifo":
			err = syscall.Mkfifo(full, 0o644)
		case "char", "block":
			mode := uint32(syscall.S_IFCHR)
			if p.kind == "block" {
				mode = syscall.S_IFBLK
			}
			err = syscall.Mknod(full, mode|0o600, makedev(p.dev[0], p.dev[1]))
			if errors.Is(err, syscall.EPERM) {
				t.Skipf("making a device node needs CAP_MKNOD: %v", err)
			}
		case "socket":
			var l net.Listener
			if l, err = net.Listen("unix", full); err == nil {
				t.Cleanup(func() { l.Close() })
			}
		case "file":
			var f *os.File
			if f, err = os.Create(full); err == nil {
				// Sparse: a multi-GB file costs no disk.
				err = f.Truncate(p.size)
				f.Close()
			}
		case "link":
			err = os.Link(filepath.Join(root, p.to), full)
		default:
			t.Fatalf("unknown plant %q", p.kind)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// plantTar writes the plants as tar members after the entries of base.
func plantTar(t *testing.T, base []treeEntry, plants []plant) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	replaced := map[string]bool{}
	for _, p := range plants {
		replaced[p.path] = true
	}
	for _, e := range base {
		if replaced[e.path] {
			continue
		}
		hdr := &tar.Header{Name: e.path, Mode: 0o644}
		switch {
		case e.dir:
			hdr.Typeflag = tar.TypeDir
		case e.target != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.target
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.body))
		}
		writeMember(t, tw, hdr, strings.NewReader(e.body))
	}
	for _, p := range plants {
		hdr := &tar.Header{Name: p.path, Mode: 0o644, Devmajor: int64(p.dev[0]), Devminor: int64(p.dev[1])}
		var body io.Reader = strings.NewReader("")
		switch p.kind {
		case "fifo":
			hdr.Typeflag = tar.TypeFifo
		case "char":
			hdr.Typeflag = tar.TypeChar
		case "block":
			hdr.Typeflag = tar.TypeBlock
		case "file":
			hdr.Typeflag, hdr.Size = tar.TypeReg, p.size
			body = io.LimitReader(zeros{}, p.size)
		case "link":
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, p.to
		default:
			t.Fatalf("no tar member for %q", p.kind)
		}
		writeMember(t, tw, hdr, body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeMember(t *testing.T, tw *tar.Writer, hdr *tar.Header, body io.Reader) {
	t.Helper()
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(tw, body); err != nil {
		t.Fatal(err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// within runs fn and fails the test when it has not returned after a while: a read that
// blocks on a FIFO or never reaches the end of a device.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s has not returned after a minute: it hangs", what)
	}
}

const gpuDir = "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0"

// Each crafted file is read as a directory root and as an archive root: through the
// device's link (the first read resolves it, the second takes the path of a known
// directory), with ReadFile, ReadString and OpenFile. Every read returns at once with an
// error that names the file and says what is wrong, and the other files stay readable.
func TestCraftedFiles(t *testing.T) {
	cases := []struct {
		name    string
		plant   plant
		read    string // as the machine sees it
		dirOnly bool   // tar has no member for it
		wantErr error  // nil: the read succeeds, with plant.size bytes
		msg     []string
	}{
		{"FIFO attribute", plant{path: gpuDir + "/numa_node", kind: "fifo"},
			"/sys/bus/pci/devices/0000:01:00.0/numa_node", false, ErrNotRegular, []string{"is a FIFO, not a regular file"}},
		{"FIFO pci.cfg", plant{path: "etc/pve/mapping/pci.cfg", kind: "fifo"},
			"/etc/pve/mapping/pci.cfg", false, ErrNotRegular, []string{"is a FIFO"}},
		{"zero device as proc/cmdline", plant{path: "proc/cmdline", kind: "char", dev: [2]uint32{1, 5}},
			"/proc/cmdline", false, ErrNotRegular, []string{"is a character device"}},
		{"block device as config", plant{path: gpuDir + "/config", kind: "block", dev: [2]uint32{7, 0}},
			"/sys/bus/pci/devices/0000:01:00.0/config", false, ErrNotRegular, []string{"is a block device"}},
		{"socket", plant{path: "s", kind: "socket"}, "/s", true, ErrNotRegular, []string{"is a socket"}},
		{"sparse 3 GiB resource", plant{path: gpuDir + "/resource", kind: "file", size: 3 << 30},
			"/sys/bus/pci/devices/0000:01:00.0/resource", true, ErrTooLarge, []string{"is 3 GiB: larger than 1 MiB, the most gpusplit reads of a sysfs attribute"}},
		{"attribute one byte over", plant{path: gpuDir + "/config", kind: "file", size: MaxFileBytes + 1},
			"/sys/bus/pci/devices/0000:01:00.0/config", false, ErrTooLarge, []string{"larger than 1 MiB"}},
		{"attribute at the cap", plant{path: gpuDir + "/config", kind: "file", size: MaxFileBytes},
			"/sys/bus/pci/devices/0000:01:00.0/config", false, nil, nil},
		{"Proxmox file over", plant{path: "etc/pve/nodes/kpro6/qemu-server/131.conf", kind: "file", size: 2 << 20},
			"/etc/pve/qemu-server/131.conf", false, ErrTooLarge, []string{"larger than 1 MiB, the most gpusplit reads of a Proxmox file"}},
		{"large /proc file", plant{path: "proc/cpuinfo", kind: "file", size: 2 << 20},
			"/proc/cpuinfo", false, nil, nil},
		{"/proc file over", plant{path: "proc/cpuinfo", kind: "file", size: MaxProcFileBytes + 1},
			"/proc/cpuinfo", false, ErrTooLarge, []string{"larger than 16 MiB, the most gpusplit reads of a /proc file"}},
	}
	for _, c := range cases {
		roots := map[string]func(t *testing.T) *Host{
			"dir": func(t *testing.T) *Host {
				root := writeDirTree(t, sampleTree)
				plantDir(t, root, []plant{c.plant})
				h, err := Open(root)
				if err != nil {
					t.Fatal(err)
				}
				return h
			},
		}
		if !c.dirOnly {
			roots["archive"] = func(t *testing.T) *Host {
				h, err := OpenArchive("crafted.tar", bytes.NewReader(plantTar(t, sampleTree, []plant{c.plant})))
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
		}
		for kind, open := range roots {
			t.Run(c.name+"/"+kind, func(t *testing.T) {
				h := open(t)
				for i := range 2 {
					var b []byte
					var err error
					within(t, "ReadFile", func() { b, err = h.ReadFile(c.read) })
					checkRead(t, fmt.Sprintf("ReadFile #%d", i+1), c.read, b, err, c.wantErr, c.plant.size, c.msg)
				}
				var s string
				var err error
				within(t, "ReadString", func() { s, err = h.ReadString(c.read) })
				checkRead(t, "ReadString", c.read, []byte(s), err, c.wantErr, c.plant.size, c.msg)
				within(t, "OpenFile", func() {
					var r io.ReadCloser
					if r, err = h.OpenFile(c.read); err == nil {
						var buf bytes.Buffer
						_, err = buf.ReadFrom(r)
						r.Close()
						s = buf.String()
					}
				})
				checkRead(t, "OpenFile", c.read, []byte(s), err, c.wantErr, c.plant.size, c.msg)
				if k, _, err := h.Lstat(c.read); err != nil || (c.wantErr == ErrNotRegular) != (k == Other) {
					t.Errorf("Lstat: kind %v, %v", k, err)
				}
				// The rest of the root reads as before.
				if v, err := h.ReadString("/sys/devices/pci0000:00/0000:00:01.1/vendor"); err != nil || v != "0x1022" {
					t.Errorf("a file beside it: %q, %v", v, err)
				}
			})
		}
	}
}

func checkRead(t *testing.T, op, p string, b []byte, err, wantErr error, size int64, msg []string) {
	t.Helper()
	if wantErr == nil {
		if err != nil || int64(len(b)) != size {
			t.Errorf("%s: %d bytes, %v; want %d bytes", op, len(b), err, size)
		}
		return
	}
	if !errors.Is(err, wantErr) {
		t.Fatalf("%s: %d bytes, error %v; want %v", op, len(b), err, wantErr)
	}
	for _, m := range append([]string{p}, msg...) {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%s: %q does not say %q", op, err, m)
		}
	}
}

// The live host's devices are refused like planted ones: what is under /dev is looked
// at before it is opened.
func TestLiveDevices(t *testing.T) {
	h, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", "/dev/null", "/dev/urandom"} {
		var err error
		within(t, "ReadFile "+p, func() { _, err = h.ReadFile(p) })
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p+": is a character device") {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// A FIFO in a directory root is never opened: a writer waiting for a reader stays
// waiting (opening it would let the writer's open return).
func TestFIFONotOpened(t *testing.T) {
	root := writeDirTree(t, sampleTree)
	plantDir(t, root, []plant{{path: gpuDir + "/numa_node", kind: "fifo"}})
	fifo := filepath.Join(root, gpuDir, "numa_node")
	opened := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		opened <- err
	}()
	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		within(t, "ReadFile", func() { _, err = h.ReadFile("/sys/bus/pci/devices/0000:01:00.0/numa_node") })
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("ReadFile: %v", err)
		}
	}
	select {
	case <-opened:
		t.Error("reading the FIFO opened it")
	case <-time.After(200 * time.Millisecond):
		// Let the writer go.
		if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			<-opened
			f.Close()
		}
	}
}

// A /proc file claims a size of 0, so its cap is kept while reading.
func TestReadPastCap(t *testing.T) {
	c := fileCap{max: 64, what: "a test file"}
	for _, lstatFirst := range []bool{false, true} {
		_, err := readRegular("/proc/self/status", c, lstatFirst)
		if !errors.Is(err, ErrTooLarge) || err.Error() != "is larger than 64 bytes, the most gpusplit reads of a test file" {
			t.Errorf("readRegular: %v", err)
		}
		r, err := openRegular("/proc/self/status", c, lstatFirst)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(r)
		r.Close()
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("openRegular: %v", err)
		}
	}
	if b, err := readRegular("/proc/self/status", fileCap{max: 1 << 20}, false); err != nil || !bytes.Contains(b, []byte("Name:")) {
		t.Errorf("under the cap: %q, %v", b, err)
	}
}

// What makes an archive unlike any host's snapshot refuses it as a whole, at the member
// that goes over, before it costs the memory.
func TestArchiveCaps(t *testing.T) {
	reg := func(name string, size int64) plant { return plant{path: name, kind: "file", size: size} }
	hardlinks := func(n int, size int64) []plant {
		out := []plant{reg("sys/big", size)}
		for i := range n {
			out = append(out, plant{path: fmt.Sprintf("sys/link%03d", i), kind: "link", to: "sys/big"})
		}
		return out
	}
	deep := func(members, depth int) []plant {
		var out []plant
		for i := range members {
			out = append(out, reg(fmt.Sprintf("d%d/%sf", i, strings.Repeat("a/", depth)), 1))
		}
		return out
	}
	cases := []struct {
		name   string
		tar    func(t *testing.T) io.Reader
		refuse []string // nil: it opens
	}{
		{"a 3 GiB member", func(t *testing.T) io.Reader { return bytes.NewReader(headerOnly(t, "sys/resource", 3<<30)) },
			[]string{`member "sys/resource" takes the files and names past 64 MiB`}},
		{"hard links count at their size", func(t *testing.T) io.Reader { return bytes.NewReader(plantTar(t, nil, hardlinks(70, 1<<20))) },
			[]string{`member "sys/link06`, "past 64 MiB"}},
		{"a few hard links", func(t *testing.T) io.Reader { return bytes.NewReader(plantTar(t, nil, hardlinks(3, 1<<20))) }, nil},
		{"files add up", func(t *testing.T) io.Reader {
			var ps []plant
			for i := range 70 {
				ps = append(ps, reg(fmt.Sprintf("proc/%d", i), 1<<20))
			}
			return bytes.NewReader(plantTar(t, nil, ps))
		}, []string{"past 64 MiB"}},
		{"a name past PATH_MAX", func(t *testing.T) io.Reader { return bytes.NewReader(plantTar(t, nil, deep(1, 3000))) },
			[]string{"longer than 4096 bytes (PATH_MAX)"}},
		{"a component past NAME_MAX", func(t *testing.T) io.Reader {
			return bytes.NewReader(plantTar(t, nil, []plant{reg("sys/"+strings.Repeat("n", 256), 1)}))
		},
			[]string{"longer than 255 bytes (NAME_MAX)"}},
		{"deep names add up", func(t *testing.T) io.Reader { return bytes.NewReader(plantTar(t, nil, deep(40, 2000))) },
			[]string{`member "d1`, "past 64 MiB"}},
		{"deep, within bounds", func(t *testing.T) io.Reader { return bytes.NewReader(plantTar(t, nil, deep(2, 2000))) }, nil},
		{"too many entries", manyEntries(MaxArchiveEntries), []string{"more than 262144 entries"}},
		{"many entries, within bounds", manyEntries(1000), nil},
		{"a member twice", func(t *testing.T) io.Reader {
			return bytes.NewReader(plantTar(t, nil, []plant{reg("etc/x", 1), reg("etc/x", 2)}))
		},
			[]string{`"/etc/x" is in the archive twice`}},
		{"a member below a file", func(t *testing.T) io.Reader {
			return bytes.NewReader(plantTar(t, nil, []plant{reg("etc/x", 1), reg("etc/x/y", 2)}))
		},
			[]string{`"/etc/x" is not a directory`}},
		{"a hard link to nothing", func(t *testing.T) io.Reader {
			return bytes.NewReader(plantTar(t, nil, []plant{{path: "a", kind: "link", to: "b"}}))
		},
			[]string{`hard link "a" points to "b"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			within(t, "OpenArchive", func() { _, err = OpenArchive("crafted.tar", c.tar(t)) })
			if c.refuse == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("opened")
			}
			for _, m := range append(c.refuse, "snapshot crafted.tar: ") {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%q does not say %q", err, m)
				}
			}
		})
	}
}

// headerOnly is a tar archive whose one member claims size bytes and holds none.
func headerOnly(t *testing.T, name string, size int64) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Size: size, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// manyEntries is a tar archive of n+1 entries in all: n empty directories under one,
// written as it is read.
func manyEntries(n int) func(t *testing.T) io.Reader {
	return func(t *testing.T) io.Reader {
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			for i := range n {
				if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d/%06d/", i), Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			pw.CloseWithError(tw.Close())
		}()
		t.Cleanup(func() { pr.Close() })
		return pr
	}
}

// The unpacked stream is capped, headers included: long names cost time to read too.
func TestArchiveStreamCap(t *testing.T) {
	defer func(old int64) { maxArchiveStream = old }(maxArchiveStream)
	maxArchiveStream = 1 << 20
	var ps []plant
	for i := range 4 {
		ps = append(ps, plant{path: fmt.Sprintf("proc/%d", i), kind: "file", size: 300 << 10})
	}
	var err error
	within(t, "OpenArchive", func() { _, err = OpenArchive("s", bytes.NewReader(plantTar(t, nil, ps))) })
	if err == nil || !strings.Contains(err.Error(), "snapshot s: unpacks to more than 1 MiB") {
		t.Errorf("over: %v", err)
	}
	within(t, "OpenArchive", func() { _, err = OpenArchive("s", bytes.NewReader(plantTar(t, nil, ps[:3]))) })
	if err != nil {
		t.Errorf("under: %v", err)
	}
}

// A listing over the cap is an error that names the directory.
func TestDirEntriesCap(t *testing.T) {
	defer func(old int) { dirCapScale = old }(dirCapScale)
	dirCapScale = MaxSysDirEntries / 100
	root := t.TempDir()
	for i := range 100 {
		if err := os.Symlink("x", filepath.Join(root, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if names, err := h.ReadDir("/"); err != nil || len(names) != 100 {
		t.Fatalf("at the cap: %d names, %v", len(names), err)
	}
	if err := os.Symlink("x", filepath.Join(root, "one-more")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ReadDir("/"); err == nil || !strings.Contains(err.Error(), "read directory / (under root "+root+"): holds more than 100 entries") {
		t.Errorf("over the cap: %v", err)
	}
	// A FIFO where a directory is listed is not opened.
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	within(t, "ReadDir of a FIFO", func() { _, err = h.ReadDir("/fifo") })
	if err == nil {
		t.Error("ReadDir of a FIFO succeeded")
	}
}

// A listing's cap depends on where it lies, in a directory and in an archive alike.
func TestDirCapByPlace(t *testing.T) {
	defer func(old int) { dirCapScale = old }(dirCapScale)
	dirCapScale = MaxPVEDirEntries / 8 // /etc/pve and /proc: 8 entries, /proc/PID/fd: 32, elsewhere 2
	var ps []plant
	for i := range 32 {
		ps = append(ps, plant{path: fmt.Sprintf("proc/1/fd/%d", i), kind: "file"})
	}
	for _, d := range []string{"proc/1/task", "etc/pve/nodes", "sys/bus/pci/devices"} {
		for i := range 8 {
			ps = append(ps, plant{path: fmt.Sprintf("%s/%d", d, i), kind: "file"})
		}
	}
	dir := t.TempDir()
	plantDir(t, dir, ps)
	fromDir, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	fromArchive, err := OpenArchive("a", bytes.NewReader(plantTar(t, nil, ps)))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Host{fromDir, fromArchive} {
		for d, n := range map[string]int{"/proc/1/fd": 32, "/proc/1/task": 8, "/etc/pve/nodes": 8} {
			if names, err := h.ReadDir(d); err != nil || len(names) != n {
				t.Errorf("%s %s: %d names, %v", h.Root(), d, len(names), err)
			}
		}
		_, err := h.ReadDir("/sys/bus/pci/devices")
		if err == nil || !strings.Contains(err.Error(), "read directory /sys/bus/pci/devices") || !strings.Contains(err.Error(), "holds more than 2 entries") {
			t.Errorf("%s: /sys/bus/pci/devices over its cap: %v", h.Root(), err)
		}
	}
}

// A directory root is read up to MaxRootBytes and MaxRootEntries in all: past either,
// every read fails with ErrRootSpent, which says what was budget.
func TestRootSpent(t *testing.T) {
	defer func(b, e int64) { maxRootBytes, maxRootEntries = b, e }(maxRootBytes, maxRootEntries)
	maxRootBytes, maxRootEntries = 10<<10, 24
	var ps []plant
	for i := range 12 {
		ps = append(ps, plant{path: fmt.Sprintf("sys/a/%02d", i), kind: "file", size: 1 << 10})
	}
	root := t.TempDir()
	plantDir(t, root, ps)

	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, p := range ps {
		if _, err := h.ReadFile("/" + p.path); err != nil {
			if !errors.Is(err, ErrRootSpent) || !strings.Contains(err.Error(), "10 KiB of files") || !strings.Contains(err.Error(), "/"+p.path) {
				t.Errorf("read %s: %v", p.path, err)
			}
			break
		}
		read++
	}
	if read != 10 {
		t.Errorf("read %d files of 1 KiB under a cap of 10 KiB, want 10", read)
	}
	// Streams count, and so do reads that would have been refused anyway.
	if _, err := h.OpenFile("/sys/a/00"); !errors.Is(err, ErrRootSpent) {
		t.Errorf("OpenFile once budget: %v", err)
	}

	h, err = Open(root)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.OpenFile("/sys/a/00")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r); err != nil || len(b) != 1<<10 {
		t.Fatalf("stream: %d bytes, %v", len(b), err)
	}
	r.Close()
	for range 2 {
		if names, err := h.ReadDir("/sys/a"); err != nil || len(names) != 12 {
			t.Fatalf("listing 12 names of 24: %d, %v", len(names), err)
		}
	}
	if _, err := h.ReadDir("/sys"); !errors.Is(err, ErrRootSpent) || !strings.Contains(err.Error(), "24 names in its directories") {
		t.Errorf("listing once 24 names were listed: %v", err)
	}
}

// An archive's files are held once: every read returns the same bytes.
func TestArchiveReadsShare(t *testing.T) {
	h, err := OpenArchive("a", bytes.NewReader(plantTar(t, nil, []plant{
		{path: "a", kind: "file", size: 4096}, {path: "b", kind: "link", to: "a"},
	})))
	if err != nil {
		t.Fatal(err)
	}
	first, err := h.ReadFile("/a")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a", "/b"} {
		again, err := h.ReadFile(p)
		if err != nil || len(again) != 4096 || &again[0] != &first[0] {
			t.Errorf("%s: not the same bytes (%v)", p, err)
		}
	}
	kl, err := h.KernelLog()
	if !errors.Is(err, fs.ErrNotExist) || kl != nil {
		t.Errorf("KernelLog of an archive without one: %v", err)
	}
}

func TestKernelLog(t *testing.T) {
	// The live host's device is read to its end, without blocking.
	live, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	var log []byte
	within(t, "KernelLog of the live host", func() { log, err = live.KernelLog() })
	if errors.Is(err, fs.ErrPermission) {
		t.Logf("the live kernel log is not readable here: %v", err)
	} else if err != nil || !bytes.Contains(log, []byte(";")) {
		t.Errorf("live: %d bytes, %v", len(log), err)
	}

	// Under any other root, /dev/kmsg is a file of records; a device there is refused,
	// even the kernel log's own.
	for _, c := range []struct {
		name string
		p    plant
		msg  string
	}{
		{"zero device", plant{path: "dev/kmsg", kind: "char", dev: [2]uint32{1, 5}}, "is a character device"},
		{"the kernel log device", plant{path: "dev/kmsg", kind: "char", dev: [2]uint32{1, 11}}, "is a character device"},
		{"FIFO", plant{path: "dev/kmsg", kind: "fifo"}, "is a FIFO"},
		{"too large", plant{path: "dev/kmsg", kind: "file", size: 4 << 30}, "larger than 32 MiB, the most gpusplit reads of the kernel log"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			plantDir(t, root, []plant{c.p})
			h, err := Open(root)
			if err != nil {
				t.Fatal(err)
			}
			within(t, "KernelLog", func() { _, err = h.KernelLog() })
			if err == nil || !strings.Contains(err.Error(), "/dev/kmsg") || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("KernelLog: %v", err)
			}
			within(t, "OpenKernelLog", func() { _, err = h.OpenKernelLog() })
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("OpenKernelLog: %v", err)
			}
		})
	}
	a, err := OpenArchive("a", bytes.NewReader(plantTar(t, nil, []plant{{path: "dev/kmsg", kind: "char", dev: [2]uint32{1, 11}}})))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.KernelLog(); err == nil || !strings.Contains(err.Error(), "/dev/kmsg (under root a): is a character device") {
		t.Errorf("archive: %v", err)
	}
}

func TestKmsgDevice(t *testing.T) {
	for _, c := range []struct {
		major, minor uint32
		ok           bool
	}{{1, 11, true}, {1, 5, false}, {1, 3, false}, {11, 1, false}, {1, 11 + 256, false}, {257, 11, false}} {
		major, minor, ok := kmsgDevice(uint64(makedev(c.major, c.minor)))
		if ok != c.ok || major != uint64(c.major) || minor != uint64(c.minor) {
			t.Errorf("%d:%d: got %d:%d %v", c.major, c.minor, major, minor, ok)
		}
	}
}

// The live log that goes on past its cap ends with ErrLogCut after whole records: a
// pipe stands in for the device, which a test cannot make write 32 MiB.
func TestKmsgReaderCut(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[1])
	record := []byte("6,1,100,-;pci 0000:81:00.0: BAR 1: no space\n")
	r := &kmsgReader{fd: fds[0], c: fileCap{max: int64(5*len(record)) + 10, what: "the kernel log"}}
	defer r.Close()
	// The device returns a record a read: write one, read it.
	var got []byte
	var err error
	for range 10 {
		if _, werr := syscall.Write(fds[1], record); werr != nil {
			t.Fatal(werr)
		}
		buf := make([]byte, 8192)
		var n int
		n, err = r.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
	}
	if !errors.Is(err, ErrLogCut) {
		t.Errorf("read past the cap: %v, want ErrLogCut", err)
	}
	if want := bytes.Repeat(record, 5); !bytes.Equal(got, want) {
		t.Errorf("read %q before the cut, want the 5 records under the cap", got)
	}
	if n, err := r.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("read after the cut: %d, %v; want the end", n, err)
	}
}
