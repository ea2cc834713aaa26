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

// TestCommittedCopy checks that the committed ../../pci.ids is what trim
// makes of the upstream file named by PCIIDS_UPSTREAM (header aside).
func TestCommittedCopy(t *testing.T) {
	path := os.Getenv("PCIIDS_UPSTREAM")
	if path == "" {
		t.Skip("PCIIDS_UPSTREAM not set")
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
	committed, err := os.ReadFile("../../pci.ids")
	if err != nil {
		t.Fatal(err)
	}
	_, got, _ := strings.Cut(out.String(), "\n\n")
	_, want, _ := strings.Cut(string(committed), "\n\n")
	if got != want {
		t.Error("committed pci.ids differs from trimming PCIIDS_UPSTREAM; regenerate it")
	}
}
