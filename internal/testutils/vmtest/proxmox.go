package vmtest

import (
	"fmt"
	"strings"
)

// ProxmoxQ35 is the topology of a Proxmox VE q35 VM whose config holds gpusplit's layout:
// the PCI devices qemu-server always gives a q35 machine (its pve-q35-4.0.cfg: four
// root ports at 1c.0–1c.3, the DMI-to-PCI bridge at 1e.0 and the PCI bridges behind it;
// the display; a virtio-iommu-pci with viommu=virtio),
// a NUMA node per numaN entry, and the -device options of the config's args line, where
// each vfio-pci function 0 becomes an e1000e NIC on the same bus and slot (the other
// functions are left out): what the guest kernel sees of the layout, without the GPUs.
func ProxmoxQ35(name, conf string) (Topology, error) {
	t := Topology{Name: name, Devices: []Device{
		rootPort("ich9-pcie-port-1", "pcie.0", "0x1c.0", "multifunction=on"),
		rootPort("ich9-pcie-port-2", "pcie.0", "0x1c.1"),
		rootPort("ich9-pcie-port-3", "pcie.0", "0x1c.2"),
		rootPort("ich9-pcie-port-4", "pcie.0", "0x1c.3"),
		{ID: "pcidmi", Model: "i82801b11-bridge", Bus: "pcie.0", Addr: "0x1e.0"},
	}}
	for i := range 4 {
		t.Devices = append(t.Devices, Device{ID: fmt.Sprintf("pci.%d", i), Model: "pci-bridge", Bus: "pcidmi", Addr: fmt.Sprintf("0x%d.0", i+1), Props: []string{fmt.Sprintf("chassis_nr=%d", i+1)}})
	}
	var args, machine, vga string
	for _, line := range strings.Split(conf, "\n") {
		if strings.HasPrefix(line, "[") {
			break // pending changes and snapshots
		}
		k, v, _ := strings.Cut(line, ": ")
		switch {
		case k == "args":
			args = v
		case k == "machine":
			machine = v
		case k == "vga":
			vga = v
		case strings.HasPrefix(k, "numa") && k != "numa":
			t.NUMA++
		}
	}
	// What qemu-server puts on pcie.0 before the args: the display at 01 (unless vga:
	// none), and with viommu=virtio a virtio-iommu-pci with no address, which QEMU gives
	// the first free slot.
	if vga != "none" {
		t.Devices = append(t.Devices, Device{ID: "vga", Model: "VGA", Bus: "pcie.0", Addr: "0x1"})
	}
	if strings.Contains(machine, "viommu=virtio") {
		t.Devices = append(t.Devices, Device{ID: "viommu", Model: "virtio-iommu-pci"})
	}
	f := strings.Fields(args)
	for i := 0; i < len(f); i++ {
		if f[i] != "-device" || i+1 == len(f) {
			continue
		}
		i++
		parts := strings.Split(f[i], ",")
		d := Device{Model: parts[0]}
		for _, p := range parts[1:] {
			k, v, _ := strings.Cut(p, "=")
			switch k {
			case "id":
				d.ID = v
			case "bus":
				d.Bus = v
			case "addr":
				d.Addr = v
			case "host", "multifunction", "rombar", "romfile":
				// the host device and its options stay with the host
			default:
				d.Props = append(d.Props, p)
			}
		}
		if d.Model == "vfio-pci" {
			if !strings.HasSuffix(d.Addr, ".0") && strings.Contains(d.Addr, ".") {
				continue
			}
			d = nic(d.ID, d.Bus, "0x0")
		}
		t.Devices = append(t.Devices, d)
	}
	if t.NUMA == 0 {
		return t, fmt.Errorf("%s: no numaN entries, which the expander bridges' numa_node needs", name)
	}
	return t, nil
}
