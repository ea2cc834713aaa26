package host

import (
	"archive/tar"
	"bytes"
	"slices"
	"strings"
	"testing"
)

// A pack holds the entries of the archive it was made from, each field of each one and
// every directory's listing; its files are its own bytes, not copies.
func TestPackHoldsTheArchive(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("0x10de\n")
	big := int64(MaxFileBytes + 1)
	for _, hdr := range []*tar.Header{
		{Name: "host1/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "host1/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/vendor", Typeflag: tar.TypeReg, Size: int64(len(body))},
		{Name: "host1/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/vendor.copy", Typeflag: tar.TypeLink,
			Linkname: "host1/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/vendor"},
		{Name: "host1/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/resource0", Typeflag: tar.TypeReg, Size: big},
		{Name: "host1/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/empty", Typeflag: tar.TypeReg},
		{Name: "host1/sys/bus/pci/devices/0000:01:00.0", Typeflag: tar.TypeSymlink,
			Linkname: "../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0"},
		{Name: "host1/dev/watchdog", Typeflag: tar.TypeChar},
		{Name: "host1/sys/fifo", Typeflag: tar.TypeFifo},
		{Name: "host1/dev/sda", Typeflag: tar.TypeBlock},
	} {
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		switch {
		case hdr.Size == big:
			tw.Write(make([]byte, big))
		case hdr.Size > 0:
			tw.Write(body)
		}
	}
	tw.Close()
	h, err := OpenArchive("capture.tar", &buf)
	if err != nil {
		t.Fatal(err)
	}
	pack, err := Pack(h)
	if err != nil {
		t.Fatal(err)
	}
	text := string(pack)
	p, err := OpenPacked("capture.pack", text)
	if err != nil {
		t.Fatal(err)
	}
	want, got := h.fs.(*archiveBackend), p.fs.(*archiveBackend)
	if want.top != "host1" || got.top != want.top {
		t.Errorf("top %q, want %q", got.top, want.top)
	}
	if got.e.n != want.e.n || len(got.e.kids) != len(want.e.kids) {
		t.Fatalf("%d entries and %d listed, want %d and %d", got.e.n, len(got.e.kids), want.e.n, len(want.e.kids))
	}
	for i := range want.e.n {
		w, g := want.e.at(i), got.e.at(i)
		if g.path != w.path || g.kind != w.kind || g.target != w.target || g.size != w.size || g.other != w.other ||
			g.parent != w.parent || g.first != w.first || g.count != w.count || !bytes.Equal(g.data, w.data) || (g.data == nil) != (w.data == nil) {
			t.Errorf("entry %d: %+v, want %+v", i, *g, *w)
		}
		if j, ok := got.e.lookup(w.path); !ok || j != i {
			t.Errorf("lookup(%s) = %d, %v", w.path, j, ok)
		}
		if len(g.data) > 0 && !strings.Contains(text, string(g.data)) {
			t.Errorf("%s: data not in the pack", g.path)
		}
	}
	if !slices.Equal(got.e.kids, want.e.kids) {
		t.Errorf("listings differ")
	}
	if _, err := p.ReadFile("/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/resource0"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a file over its cap reads: %v", err)
	}
	// An entry of no kind, or under an entry that is no directory, is refused.
	first := len(packMagic) + 1 + len("host1") + 1 // the top, then the count
	for _, bad := range []struct {
		at int
		b  byte
	}{{first, 9}, {first + 1, 7}, {first + 2, 5}} {
		b := []byte(text)
		b[bad.at] = bad.b
		if _, err := OpenPacked("bad", string(b)); err == nil || !strings.Contains(err.Error(), "entry 1 is not one") {
			t.Errorf("byte %d set to %d: %v", bad.at, bad.b, err)
		}
	}
	// Cut anywhere, a pack is refused, never read past its end.
	for n := 0; n < len(pack); n++ {
		if _, err := OpenPacked("cut", text[:n]); err == nil {
			t.Fatalf("a pack cut to %d of %d bytes opens", n, len(pack))
		}
	}
}
