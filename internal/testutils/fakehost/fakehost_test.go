package fakehost

import (
	"testing"
)

// Links are written as sysfs writes them: a link to a directory above its own climbs
// past it.
func TestRelLink(t *testing.T) {
	cases := []struct{ dir, target, want string }{
		{"/sys/bus/pci/devices", "/sys/devices/pci0000:00/0000:00:01.0", "../../../devices/pci0000:00/0000:00:01.0"},
		{"/sys/devices/pci0000:00/pci_bus/0000:00", "/sys/devices/pci0000:00", "../../../pci0000:00"},
		{"/sys/devices/pci0000:00/0000:00:10.0/pci_bus/0000:01", "/sys/devices/pci0000:00/0000:00:10.0", "../../../0000:00:10.0"},
		{"/sys/devices/pci0000:00/0000:00:10.0/pci_bus/0000:01", "/sys/class/pci_bus", "../../../../../class/pci_bus"},
		{"/sys/bus/pci/drivers/e1000e", "/sys/module/e1000e", "../../../../module/e1000e"},
		{"/sys/kernel/iommu_groups/5/devices", "/sys/devices/pci0000:00/0000:00:1f.0", "../../../../devices/pci0000:00/0000:00:1f.0"},
		{"/a/b", "/a/b/c", "c"},
	}
	for _, c := range cases {
		if got := relLink(c.dir, c.target); got != c.want {
			t.Errorf("relLink(%q, %q) = %q, want %q", c.dir, c.target, got, c.want)
		}
	}
}

// The optional device fields change what the kernel would show, and their zero values
// keep the defaults.
func TestDeviceFields(t *testing.T) {
	root := "sys/devices/pci0000:00/"
	m := Machine{
		Nodes:         []Node{{ID: 0, CPUs: "0-1"}, {ID: 1}},
		IOMMU:         true,
		IOMMUType:     "DMA-FQ",
		Drivers:       []string{"serial"},
		DriverModules: map[string]string{"serial": ""},
		Bridges: []HostBridge{{NUMA: -1, Devices: []Device{
			{Slot: 0x1f, Func: 0, Vendor: 0x8086, Device: 0x2918, Class: 0x060100, NoPM: true, Reserved: []string{"0x0000000000000000 0x0000000000ffffff direct-relaxable"}, Group: 3},
			{Slot: 0x1f, Func: 2, Vendor: 0x8086, Device: 0x2922, Class: 0x010601, NoPM: true, Group: 3},
			{Slot: 0x1f, Func: 3, Vendor: 0x8086, Device: 0x2930, Class: 0x0c0500, Multifunction: true, Group: 3},
			{
				Slot: 0x10, Vendor: 0x1b36, Device: 0x000c, Class: 0x060400, Driver: "pcieport", Group: 1,
				Speed: "2.5 GT/s PCIe", Width: 1, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 32, ResetMethod: NoReset, Secondary: 1,
				Children: []Device{
					{Vendor: 0x104c, Device: 0x8233, Class: 0x060400, Driver: "pcieport", Group: 2, Speed: "2.5 GT/s PCIe", Width: 1, MaxSpeed: "Unknown", MaxWidth: NoWidth, ResetMethod: "flr bus", Secondary: 2},
				},
			},
			{Slot: 0x11, Vendor: 0x8086, Device: 0x10d3, Class: 0x020000, Driver: "e1000e", Group: 4, Speed: "2.5 GT/s PCIe", Width: 1, ConfigSize: 256, PowerState: "D3hot"},
		}}},
	}
	tree, err := m.Build()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		root + "0000:00:1f.0/d3cold_allowed":                      "0\n",
		root + "0000:00:1f.0/power_state":                         "unknown\n",
		root + "0000:00:1f.0/enable":                              "0\n",
		root + "0000:00:1f.3/d3cold_allowed":                      "1\n",
		root + "0000:00:10.0/power_state":                         "D0\n",
		root + "0000:00:10.0/max_link_width":                      "32\n",
		root + "0000:00:10.0/ari_enabled":                         "0\n",
		root + "0000:00:10.0/0000:01:00.0/max_link_speed":         "Unknown\n",
		root + "0000:00:10.0/0000:01:00.0/max_link_width":         "0\n",
		root + "0000:00:10.0/0000:01:00.0/reset_method":           "flr bus\n",
		root + "0000:00:11.0/reset_method":                        "flr bus\n",
		root + "0000:00:11.0/power_state":                         "D3hot\n",
		root + "0000:00:11.0/local_cpus":                          "3\n",
		"sys/kernel/iommu_groups/3/type":                          "DMA-FQ\n",
		"sys/kernel/iommu_groups/3/reserved_regions":              "0x0000000000000000 0x0000000000ffffff direct-relaxable\n0x00000000fee00000 0x00000000feefffff msi\n",
		"sys/kernel/iommu_groups/1/reserved_regions":              "0x00000000fee00000 0x00000000feefffff msi\n",
		"sys/devices/system/node/has_cpu":                         "0\n",
		"sys/devices/system/node/has_memory":                      "0-1\n",
		"sys/devices/system/node/node0/cpumap":                    "3\n",
		"sys/devices/system/cpu/possible":                         "0-1\n",
		root + "0000:00:10.0/0000:01:00.0/secondary_bus_number":   "2\n",
		root + "0000:00:10.0/0000:01:00.0/subordinate_bus_number": "2\n",
	}
	for p, want := range files {
		if got, ok := tree.files[p]; !ok || string(got) != want {
			t.Errorf("%s = %q (exists: %v), want %q", p, got, ok, want)
		}
	}
	if _, ok := tree.files[root+"0000:00:10.0/reset_method"]; ok {
		t.Error("NoReset: the root port has a reset_method file")
	}
	if _, ok := tree.files[root+"0000:00:1f.0/reset_method"]; ok {
		t.Error("conventional PCI: 00:1f.0 has a reset_method file")
	}
	// Header type: the multi-function bit on function 0 of a slot with others and where
	// asked for, the bridge bit, and a bridge's bus numbers.
	for p, want := range map[string][]byte{
		"0000:00:1f.0": {0x80}, "0000:00:1f.2": {0x00}, "0000:00:1f.3": {0x80},
		"0000:00:10.0": {0x01, 0x00, 0x01, 0x02}, "0000:00:10.0/0000:01:00.0": {0x01, 0x01, 0x02, 0x02},
	} {
		c := tree.files[root+p+"/config"]
		got := []byte{c[0x0e]}
		if len(want) > 1 {
			got = append(got, c[0x18:0x1b]...)
		}
		if string(got) != string(want) {
			t.Errorf("%s config: header type and buses % x, want % x", p, got, want)
		}
	}
	for p, n := range map[string]int{"0000:00:1f.0": 256, "0000:00:10.0": 4096, "0000:00:11.0": 256} {
		if got := len(tree.files[root+p+"/config"]); got != n {
			t.Errorf("%s config: %d bytes, want %d", p, got, n)
		}
	}
	links := map[string]string{
		"sys/bus/pci/drivers/e1000e/module":          "../../../../module/e1000e",
		root + "0000:00:10.0/pci_bus/0000:01/device": "../../../0000:00:10.0",
		root + "pci_bus/0000:00/device":              "../../../pci0000:00",
	}
	for p, want := range links {
		if got := tree.links[p]; got != want {
			t.Errorf("%s -> %q, want %q", p, got, want)
		}
	}
	for _, p := range []string{"sys/bus/pci/drivers/pcieport/module", "sys/bus/pci/drivers/serial/module"} {
		if _, ok := tree.links[p]; ok {
			t.Errorf("%s: a built-in driver has a module link", p)
		}
	}
}

// The kernel makes /sys/kernel/iommu_groups without an IOMMU too.
func TestIOMMUGroupsDirectory(t *testing.T) {
	tree, err := Machine{Nodes: []Node{{ID: 0, CPUs: "0"}}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !tree.dirs["sys/kernel/iommu_groups"] {
		t.Error("no sys/kernel/iommu_groups")
	}
}
