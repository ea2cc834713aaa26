package pci_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpusplit/gpusplit/internal/cpuset"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// The brief read of a device is its full read without what ScanFor leaves for the
// detailed ones; the detailed ones are read in full; the warnings of what was read come
// in address order.
func TestScanForReadsInFullWhatDetailPicks(t *testing.T) {
	dir := sampleDir(t)
	// Garbage in numa_node, which a brief read reads, and in a link width, which only a
	// full one does: on the GPU read in full, and on devices read briefly.
	for p, v := range map[string]string{
		"sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0/numa_node":          "many\n",
		"sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/current_link_width": "wide\n",
		"sys/devices/pci0000:60/0000:60:00.0/numa_node":                       "none\n",
		"sys/devices/pci0000:60/0000:60:00.0/max_link_width":                  "wide\n",
	} {
		writeFile(t, filepath.Join(dir, p), v)
	}
	full := scanDir(t, dir)
	gpu := pci.Address{Bus: 0x01}
	var asked *pci.Tree
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	brief, err := pci.ScanFor(h, nil, func(t *pci.Tree) []*pci.Device {
		asked = t
		return t.Slot(gpu)
	})
	if err != nil {
		t.Fatal(err)
	}
	if asked == nil || len(asked.Devices) != len(full.Devices) {
		t.Fatalf("detail was given %v", asked)
	}
	for i, f := range full.Devices {
		b := brief.Devices[i]
		want := *f
		if f.Address.Bus != gpu.Bus {
			want.SubVendorID, want.SubDeviceID, want.Revision = 0, 0, 0
			want.DriverOverride, want.LocalCPUs, want.Link, want.BARs = "", cpuset.Set{}, pci.Link{}, nil
		}
		if !reflect.DeepEqual(&want, b) {
			t.Errorf("%s:\n got %+v\nwant %+v", f.Address, b, &want)
		}
	}
	wantWarnings := []string{
		`0000:01:00.0: current_link_width holds "wide", not a lane count; link taken as unknown`,
		`0000:60:00.0: numa_node holds "none", not a node number; NUMA node taken as unknown`,
		`0000:81:00.0: numa_node holds "many", not a node number; NUMA node taken as unknown`,
	}
	if !reflect.DeepEqual(brief.Warnings, wantWarnings) {
		t.Errorf("warnings:\n%q\nwant\n%q", brief.Warnings, wantWarnings)
	}
	if len(full.Warnings) != 4 {
		t.Errorf("the full scan warns of %q", full.Warnings)
	}
}

// A scan leaves no directory open: each listing holds one while its device is read.
func TestScanClosesWhatItOpens(t *testing.T) {
	dir := sampleDir(t)
	open := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd here")
		}
		return len(fds)
	}
	before := open()
	for range 3 {
		h, err := host.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pci.ScanFor(h, nil, func(t *pci.Tree) []*pci.Device { return t.Devices[:10] }); err != nil {
			t.Fatal(err)
		}
	}
	if after := open(); after != before {
		t.Errorf("%d files open before the scans, %d after", before, after)
	}
}

// sampleDir lays the sample host out in a temporary directory.
func sampleDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}
