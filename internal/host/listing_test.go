package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// listingTree is sampleTree with what a listing must tell apart: a device's directory
// reached through a link to a link, a link whose target is a link to a file, a link
// that leads out of the root at its end, a directory link in the middle, an empty file,
// a file larger than a page and a link to a directory of its own.
var listingTree = append([]treeEntry{
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/numa_node", body: "1\n"},
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/empty", body: ""},
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/resource", body: fmt.Sprintf("%05000d\n", 7)},
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/alias", target: "vendor"},
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/alias2", target: "alias"},
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/out", target: "../../../../../.."},
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/physfn", target: "../0000:01:00.0"},
	{path: "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/sub/x", body: "x\n"},
	{path: "sys/bus/pci/devices/0000:01:00.1", target: "0000:01:00.0"},
	{path: "sys/bus/pci/devices/0000:02:00.0", target: "../../../devices/gone"},
	{path: "sys/bus/pci/devices/0000:03:00.0", target: "../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/vendor"},
	{path: "sys/bus/pci/devices/0000:04:00.0", target: "../../../escape"},
	{path: "sys/bus/pci/devices/0000:05:00.0", target: "../../../../.."},
	{path: "sys/devices/link", target: "pci0000:00"},
	{path: "sys/bus/pci/devices/0000:06:00.0", target: "../../../devices/link/0000:00:01.1"},
}, sampleTree...)

// Every method of a listing answers as the Host's own method on the same path does,
// errors and all, on every name of every directory, in every form of root.
func TestListingAnswersAsTheHost(t *testing.T) {
	for hname, h := range hosts(t, listingTree) {
		for _, dir := range []string{
			"/sys/bus/pci/devices", "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0",
			"/sys/devices/pci0000:00/0000:00:01.1", "/sys/devices", "/sys", "/", "/proc/1234/fd",
		} {
			l, err := h.List(dir)
			if err != nil {
				t.Fatalf("%s: List(%s): %v", hname, dir, err)
			}
			names, err := h.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != len(l.Entries()) {
				t.Fatalf("%s: %s: %d entries listed, ReadDir %d", hname, dir, len(l.Entries()), len(names))
			}
			for i, e := range l.Entries() {
				p := l.join(e.Name)
				if e.Name != names[i] {
					t.Errorf("%s: %s: entry %d is %q, ReadDir %q", hname, dir, i, e.Name, names[i])
				}
				if k, _, err := h.Lstat(p); err != nil || k != e.Kind {
					t.Errorf("%s: %s listed as %v, Lstat %v, %v", hname, p, e.Kind, k, err)
				}
				same(t, hname, "ReadFile "+p, str(l.ReadFile(e.Name)), str(h.ReadFile(p)))
				same(t, hname, "Realpath "+p, pair(l.Realpath(e.Name)), pair(h.Realpath(p)))
				same(t, hname, "LinkBase "+p, pair(l.LinkBase(e.Name)), pair(h.LinkBase(p)))
				same(t, hname, "Readlink "+p, pair(l.Readlink(e.Name)), pair(h.Readlink(p)))
				var want, got string
				if r, err := h.Realpath(p); err != nil {
					want = "error " + err.Error()
				} else if sub, err := h.List(r); err != nil {
					want = "error " + err.Error()
				} else {
					want = fmt.Sprint(sub.Path(), sub.Entries())
					sub.Close()
				}
				if sub, err := l.ListTarget(e.Name); err != nil {
					got = "error " + err.Error()
				} else {
					got = fmt.Sprint(sub.Path(), sub.Entries())
					sub.Close()
				}
				same(t, hname, "ListTarget "+p, got, want)
			}
			for _, name := range []string{"absent", "..", ".", "sub/x", ""} {
				p := l.join(name)
				same(t, hname, "ReadFile "+p, str(l.ReadFile(name)), str(h.ReadFile(p)))
				same(t, hname, "LinkBase "+p, pair(l.LinkBase(name)), pair(h.LinkBase(p)))
				same(t, hname, "Readlink "+p, pair(l.Readlink(name)), pair(h.Readlink(p)))
			}
			l.Close()
		}
	}
}

func str(b []byte, err error) string {
	if err != nil {
		return "error " + err.Error()
	}
	return string(b)
}

func pair(s string, err error) string {
	if err != nil {
		return "error " + err.Error()
	}
	return s
}

func same(t *testing.T, hname, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: %s: %.120q, the Host says %.120q", hname, what, got, want)
	}
}

// A listed file that is a FIFO, a device or a socket is never opened, and one swapped
// for a FIFO after the listing is opened without blocking and read as empty or refused.
func TestListingNeverBlocks(t *testing.T) {
	root := writeDirTree(t, listingTree)
	dev := filepath.Join(root, "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0")
	if err := syscall.Mkfifo(filepath.Join(dev, "fifo"), 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.List("/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadFile("fifo"); err == nil {
		t.Error("a FIFO reads")
	}
	// numa_node is listed as a file; make it a FIFO, as a swap between the listing and
	// the read would.
	p := filepath.Join(dev, "numa_node")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	// Blocking here would hang the test until its deadline.
	if b, err := l.ReadFile("numa_node"); err == nil && len(b) > 0 {
		t.Errorf("a FIFO swapped in after the listing reads %q", b)
	}
}

// A listed attribute over its cap is refused as one read by its path is, not cut at
// the cap, whether the first read reaches the cap or a later one does.
func TestListingCaps(t *testing.T) {
	dir := "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0"
	for _, size := range []int{MaxFileBytes + 1, MaxFileBytes + 4096, 3 * MaxFileBytes} {
		big := strings.Repeat("x", size)
		for hname, h := range hosts(t, []treeEntry{{path: dir + "/resource", body: big}, {path: dir + "/vendor", body: "0x10de\n"}}) {
			l, err := h.List("/" + dir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.ReadFile("resource")
			if err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
				t.Errorf("%s: a listed file of %d bytes reads: %v", hname, size, err)
			}
			if b, err := l.ReadFile("vendor"); err != nil || string(b) != "0x10de\n" {
				t.Errorf("%s: vendor: %q, %v", hname, b, err)
			}
			l.Close()
		}
	}
}
