package vmtest

import "fmt"

// Endpoint ids are the devices whose relations the tests check: e1000e NICs (8086:10d3)
// with the MAC address macFor(id), which the guest's network driver shows, so that a test
// can find which PCI address the firmware gave each described device.

// E1000E is the vendor:device of QEMU's e1000e, the device that plays the GPU in the tests.
const E1000E = "8086:10d3"

func nic(id, bus, addr string, props ...string) Device {
	return Device{ID: id, Model: "e1000e", Bus: bus, Addr: addr, Props: append([]string{"mac=" + macFor(id)}, props...)}
}

func rootPort(id, bus, addr string, props ...string) Device {
	return Device{ID: id, Model: "pcie-root-port", Bus: bus, Addr: addr, Props: props}
}

// macFor derives a stable locally administered MAC address from an endpoint id.
func macFor(id string) string {
	var h uint32 = 2166136261
	for _, c := range []byte(id) {
		h = (h ^ uint32(c)) * 16777619
	}
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", byte(h>>16), byte(h>>8), byte(h))
}

// TwoSockets: two NUMA nodes, each with two pxb-pcie expander bridges (separate host
// bridges, as a server's root complexes), a root port on each and a NIC behind it.
func TwoSockets() Topology {
	t := Topology{Name: "two-sockets", IOMMU: true, NUMA: 2}
	for i, x := range []struct {
		name   string
		busNr  string
		node   int
		pcAddr string
	}{{"a", "0x20", 0, "0x4"}, {"b", "0x40", 0, "0x5"}, {"c", "0x80", 1, "0x6"}, {"d", "0xa0", 1, "0x7"}} {
		pxb := "pxb" + x.name
		t.Devices = append(t.Devices,
			Device{ID: pxb, Model: "pxb-pcie", Bus: "pcie.0", Addr: x.pcAddr, Props: []string{"bus_nr=" + x.busNr, fmt.Sprintf("numa_node=%d", x.node)}},
			rootPort("rp"+x.name, pxb, "0x0", fmt.Sprintf("chassis=%d", 10+i)),
			nic("nic"+x.name, "rp"+x.name, "0x0"),
		)
	}
	return t
}

// Switches: a root port leading to a switch (upstream port, three downstream ports), one
// downstream port leading to a second switch; NICs on the ports of both, and one NIC on
// its own root port.
func Switches() Topology {
	return Topology{Name: "switches", IOMMU: true, Devices: []Device{
		rootPort("rp1", "pcie.0", "0x10.0"),
		{ID: "up1", Model: "x3130-upstream", Bus: "rp1"},
		{ID: "dp1", Model: "xio3130-downstream", Bus: "up1", Addr: "0x0"},
		{ID: "dp2", Model: "xio3130-downstream", Bus: "up1", Addr: "0x1"},
		{ID: "dp3", Model: "xio3130-downstream", Bus: "up1", Addr: "0x2"},
		nic("nica", "dp1", "0x0"),
		nic("nicb", "dp2", "0x0"),
		{ID: "up2", Model: "x3130-upstream", Bus: "dp3"},
		{ID: "dp4", Model: "xio3130-downstream", Bus: "up2", Addr: "0x0"},
		{ID: "dp5", Model: "xio3130-downstream", Bus: "up2", Addr: "0x1"},
		nic("nicc", "dp4", "0x0"),
		nic("nicd", "dp5", "0x0"),
		rootPort("rp2", "pcie.0", "0x11.0"),
		nic("nice", "rp2", "0x0"),
	}}
}

// FlatVM: what Proxmox gives a q35 VM: root ports on pcie.0 (a multifunction slot of
// four, as at 00:10.0–00:10.3), no NUMA information. One NIC shares its slot with an
// NVMe controller at function 1: its companion function.
func FlatVM() Topology {
	t := Topology{Name: "flat-vm", IOMMU: true}
	for i, id := range []string{"a", "b", "c", "d"} {
		props := []string{}
		if i == 0 {
			props = append(props, "multifunction=on")
		}
		t.Devices = append(t.Devices, rootPort("rp"+id, "pcie.0", fmt.Sprintf("0x10.%d", i), props...))
		if id == "a" {
			t.Devices = append(t.Devices,
				nic("nic"+id, "rp"+id, "0x0.0", "multifunction=on"),
				Device{ID: "nvmea", Model: "nvme", Bus: "rp" + id, Addr: "0x0.1"})
		} else {
			t.Devices = append(t.Devices, nic("nic"+id, "rp"+id, "0x0"))
		}
	}
	return t
}

// I440FX: the old PC chipset: every device on bus 0 of the one host bridge, no PCIe.
func I440FX() Topology {
	return Topology{Name: "i440fx", MachineType: "pc", Devices: []Device{
		nic("nica", "pci.0", "0x10"),
		nic("nicb", "pci.0", "0x11"),
		nic("nicc", "pci.0", "0x12"),
	}}
}

// Topologies are every topology the tests boot.
func Topologies() []Topology { return []Topology{TwoSockets(), Switches(), FlatVM(), I440FX()} }
