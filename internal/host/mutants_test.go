package host

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Links are followed as the kernel follows them: 40 in one resolution (MAXSYMLINKS), not
// one more.
func TestFortyLinks(t *testing.T) {
	chain := func(n int) []treeEntry {
		var out []treeEntry
		for i := range n {
			target := fmt.Sprintf("l%02d", i+1)
			if i == n-1 {
				target = "file"
			}
			out = append(out, treeEntry{path: fmt.Sprintf("sys/l%02d", i), target: target})
		}
		// Beside the sample tree, so that the archives packed under one folder hold a
		// sysfs and are read as that folder's root.
		return append(append(out, treeEntry{path: "sys/file", body: "end\n"}), sampleTree...)
	}
	for name, h := range hosts(t, chain(40)) {
		if got, err := h.ReadString("/sys/l00"); err != nil || got != "end" {
			t.Errorf("%s: 40 links: %q, %v", name, got, err)
		}
	}
	for name, h := range hosts(t, chain(41)) {
		if _, err := h.ReadString("/sys/l00"); err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
			t.Errorf("%s: 41 links: %v, want too many levels", name, err)
		}
	}
}

// A relative link that climbs one level above the root is reported as the link that
// escapes, not only as the path asked for.
func TestEscapingLinkNamed(t *testing.T) {
	for name, h := range hosts(t, append([]treeEntry{{path: "sys/up", target: "../.."}, {path: "etc/x", body: "x\n"}}, sampleTree...)) {
		_, err := h.ReadString("/sys/up/etc/x")
		if !errors.Is(err, ErrEscapesRoot) || !strings.Contains(err.Error(), "/sys/up -> ../..") {
			t.Errorf("%s: %v, want the escaping link named", name, err)
		}
	}
}

// A file that claims less than it holds (as /proc files claim 0 bytes) and holds more
// than its cap past the first read is refused, not cut at the cap.
func TestReadPastCapAfterFirstRead(t *testing.T) {
	whole, err := readRegular("/proc/self/status", fileCap{max: 1 << 20}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) <= 600 {
		t.Fatalf("/proc/self/status holds %d bytes; the test needs more than 600", len(whole))
	}
	if b, err := readRegular("/proc/self/status", fileCap{max: 600, what: "a test file"}, false); !errors.Is(err, ErrTooLarge) {
		t.Errorf("read %d bytes, %v; want ErrTooLarge", len(b), err)
	}
}

// A name component of 255 bytes, NAME_MAX, is a Linux file name; 256 is not.
func TestArchiveNameMax(t *testing.T) {
	ok := plantTar(t, nil, []plant{{path: "sys/" + strings.Repeat("n", 255), kind: "file"}})
	if _, err := OpenArchive("crafted.tar", bytes.NewReader(ok)); err != nil {
		t.Errorf("a 255-byte name: %v", err)
	}
	long := plantTar(t, nil, []plant{{path: "sys/" + strings.Repeat("n", 256), kind: "file"}})
	if _, err := OpenArchive("crafted.tar", bytes.NewReader(long)); err == nil || !strings.Contains(err.Error(), "NAME_MAX") {
		t.Errorf("a 256-byte name: %v, want NAME_MAX", err)
	}
}
