package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

const upstreamSample = `#
#	List of PCI IDs
#
#	Version: 2099.01.02
#
#	This file can be distributed under either the GNU General Public License
#	(version 2 or higher) or the 3-clause BSD License.
#

# Vendors, devices and subsystems. Please keep sorted.

0001  Dropped vendor
	0002  Dropped device
		0003 0004  Dropped subsystem
1000  Kept complete
# a comment inside a kept vendor
	0001  Device A
		1000 0001  Subsystem A
1001  Another dropped vendor
	0001  Dropped device
8086  Kept devices only
	1234  Device B
		8086 0001  Dropped subsystem B

# List of known device classes, subclasses and programming interfaces
C 03  Display controller
	00  VGA compatible controller
		00  VGA controller
# PTP Grandmaster Source Clock
C ff  Unassigned class
`

func TestTrim(t *testing.T) {
	vendors := []vendor{{"1000", subsystems}, {"8086", devices}}
	var out bytes.Buffer
	if err := trim(&out, strings.NewReader(upstreamSample), vendors, "abc123"); err != nil {
		t.Fatal(err)
	}
	header, body, ok := strings.Cut(out.String(), "\n\n")
	if !ok {
		t.Fatalf("no blank line after the header:\n%s", out.String())
	}
	for _, want := range []string{
		"#	Version: 2099.01.02",
		"(version 2 or higher) or the 3-clause BSD License.",
		"(Version 2099.01.02, pciutils/pciids commit abc123)",
		"#	  1000  Kept complete (devices and subsystems)",
		"#	  8086  Kept devices only (devices only)",
	} {
		if !strings.Contains(header, want) {
			t.Errorf("header lacks %q:\n%s", want, header)
		}
	}
	wantBody := `1000  Kept complete
	0001  Device A
		1000 0001  Subsystem A
8086  Kept devices only
	1234  Device B
C 03  Display controller
	00  VGA compatible controller
		00  VGA controller
C ff  Unassigned class
`
	if body != wantBody {
		t.Errorf("body:\n%s\nwant:\n%s", body, wantBody)
	}
}

func TestTrimErrors(t *testing.T) {
	tests := []struct {
		name, in string
		vendors  []vendor
		want     string
	}{
		{"missing vendor", upstreamSample, []vendor{{"1000", subsystems}, {"abcd", devices}}, "abcd"},
		{"no version", strings.ReplaceAll(upstreamSample, "Version:", "Vers"), nil, "Version"},
		{"no classes", upstreamSample[:strings.Index(upstreamSample, "C 03")], nil, "class"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := trim(&out, strings.NewReader(tc.in), tc.vendors, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// The committed ../../pciids/pci.ids is a fixed point of trim: trimming it again keeps every
// line of its body (the kept vendors at the detail keep gives them, the class list, no
// comments) and its header names the vendors keep lists. What it was cut from is
// checked by TestCommittedCopy.
func TestCommittedCopyIsTrimmed(t *testing.T) {
	committed, err := os.ReadFile("../../pciids/pci.ids")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := trim(&out, bytes.NewReader(committed), keep, ""); err != nil {
		t.Fatal(err)
	}
	header, want, _ := strings.Cut(string(committed), "\n\n")
	again, got, _ := strings.Cut(out.String(), "\n\n")
	if got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("trimming the committed pci.ids changes line %d of its body: %q becomes %q; regenerate it", i+1, wl[i], gl[i])
			}
		}
		t.Fatalf("trimming the committed pci.ids leaves %d lines of its body's %d; regenerate it", len(gl), len(wl))
	}
	// The list of kept vendors in the header is keep's, in keep's order.
	// Trimming again keeps the committed header and adds a note of its own after it:
	// the list that note ends with is keep's.
	vendors := func(h string) string {
		return h[strings.LastIndex(h, "#\tKept vendors:\n"):]
	}
	if !strings.Contains(header, "#\tKept vendors:\n") {
		t.Fatalf("the header of the committed pci.ids lists no kept vendors:\n%s", header)
	}
	if got, want := vendors(header), vendors(again); got != want {
		t.Errorf("the header lists\n%s\nwant, as keep has them,\n%s", got, want)
	}
}

// TestCommittedCopy checks that the committed ../../pciids/pci.ids is what trim makes of the
// upstream file named by PCIIDS_UPSTREAM (header aside). The upstream file is not in the
// repository: README.md's Development section says when and how to run it.
func TestCommittedCopy(t *testing.T) {
	path := os.Getenv("PCIIDS_UPSTREAM")
	if path == "" {
		t.Skip("PCIIDS_UPSTREAM not set: it needs the upstream pci.ids (see README.md, Development)")
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	if err := trim(&out, in, keep, ""); err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("../../pciids/pci.ids")
	if err != nil {
		t.Fatal(err)
	}
	_, got, _ := strings.Cut(out.String(), "\n\n")
	_, want, _ := strings.Cut(string(committed), "\n\n")
	if got != want {
		t.Error("committed pci.ids differs from trimming PCIIDS_UPSTREAM; regenerate it")
	}
}
