package pci

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		path    string
		addr    string
		hb      HostBridge
		parents []string
		err     string // part of the error; "" for none
	}{
		{"/sys/devices/pci0000:00/0000:00:02.0", "0000:00:02.0", HostBridge{0, 0}, nil, ""},
		{"/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0", "0000:01:00.0", HostBridge{0, 0}, []string{"0000:00:01.1"}, ""},
		{
			"/sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0/0000:82:00.0/0000:83:00.0", "0000:83:00.0",
			HostBridge{0, 0x80}, []string{"0000:80:01.1", "0000:81:00.0", "0000:82:00.0"}, "",
		},
		// Intel VMD: the host bridge nested in the VMD device's directory counts.
		{
			"/sys/devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/10000:01:00.0", "10000:01:00.0",
			HostBridge{0x10000, 0}, []string{"10000:00:02.0"}, "",
		},
		// Hyper-V: PCI passthrough devices hang off the VMBus, under a host bridge of their own.
		{
			"/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/7870e5c6-0b7a-4b6f-bc8b-1d4ea1f6b4a2/pci7870:00/7870:00:00.0",
			"7870:00:00.0", HostBridge{0x7870, 0}, nil, "",
		},
		// Errors: the host bridge falls back to the device's domain and bus.
		{"/sys/devices/pci0000:00/0000:00:02.0", "0000:00:03.0", HostBridge{0, 0}, nil, "does not end in the device's address"},
		{"/sys/devices/platform/0000:05:00.0", "0000:05:00.0", HostBridge{0, 5}, nil, "no host bridge"},
		{"", "0000:05:00.0", HostBridge{0, 5}, nil, "does not end"},
		{"/", "0000:05:00.0", HostBridge{0, 5}, nil, "does not end"},
		{
			"/sys/devices/pci0000:00/0000:00:01.1/extra/0000:01:00.0", "0000:01:00.0",
			HostBridge{0, 0}, nil, `"extra" between the host bridge and the device`,
		},
		{
			"/sys/devices/pci0000:00/0000:00:01.1/0000:E1:00.0/0000:e2:00.0", "0000:e2:00.0",
			HostBridge{0, 0}, nil, `"0000:E1:00.0"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			a := mustAddr(t, tt.addr)
			hb, parents, err := parsePath(tt.path, a)
			if (err != nil) != (tt.err != "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parsePath error %v, want one saying %q", err, tt.err)
			}
			if hb != tt.hb {
				t.Errorf("parsePath host bridge %s, want %s", hb, tt.hb)
			}
			var got []string
			for _, p := range parents {
				got = append(got, p.String())
			}
			if !slices.Equal(got, tt.parents) {
				t.Errorf("parsePath parents %v, want %v", got, tt.parents)
			}
		})
	}
}
