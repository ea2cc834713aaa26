package fakehost

import (
	"fmt"
	"slices"
	"strings"
)

// Machines modelled on real hosts, for tests. Each is also committed as a snapshot
// archive under testdata/hosts at the repository root (see testdata/hosts/README.md),
// which --root reads like any snapshot.
//
// The Oracle machines rebuild public nvidia-smi topo -m outputs that users pasted into
// GitHub issues: what the output shows (the relations, the CPU lists, the NUMA nodes,
// the bus numbers a report gives) is kept exactly; what it does not show (the other bus
// numbers, the device ids of bridges, the chipset devices, the driver version) is filled
// in with what such a machine typically has, and the doc comment says which is which.

// PCI vendor ids used by the fixtures.
const (
	vendorNVIDIA   = 0x10de
	vendorIntel    = 0x8086
	vendorAMD      = 0x1022
	vendorRedHat   = 0x1b36 // QEMU's own devices
	vendorVirtio   = 0x1af4 // virtio devices, and QEMU's subsystem vendor
	vendorQEMUVGA  = 0x1234 // QEMU's standard VGA
	vendorBroadcom = 0x1000 // Broadcom / LSI, the PEX switches since PEX88000
	vendorMellanox = 0x15b3
	vendorSamsung  = 0x144d
	vendorASPEED   = 0x1a03
)

// Link speeds as sysfs prints them.
const (
	speedGen5 = "32.0 GT/s PCIe"
	speedGen4 = "16.0 GT/s PCIe"
	speedGen3 = "8.0 GT/s PCIe"
	speedGen2 = "5.0 GT/s PCIe"
	speedGen1 = "2.5 GT/s PCIe"
)

// gpuModel is a GPU board: its ids, its HDMI audio function, its BARs and its fastest link.
type gpuModel struct {
	device, subVendor, subDevice uint16
	audio                        uint16
	model                        string
	bar0, bar1                   uint64
	maxSpeed                     string
}

var (
	modelRTXPro6000 = gpuModel{0x2bb1, vendorNVIDIA, 0x204b, 0x22e8, "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 64 << 20, 128 << 30, speedGen5}
	modelRTXA6000   = gpuModel{0x2230, vendorNVIDIA, 0x1459, 0x1aef, "NVIDIA RTX A6000", 16 << 20, 256 << 20, speedGen4}
	// The GeForce boards carry their maker's subsystem ids; the reports do not say
	// which maker, so these are a Gigabyte board's.
	modelRTX4090 = gpuModel{0x2684, 0x1458, 0x4104, 0x22ba, "NVIDIA GeForce RTX 4090", 16 << 20, 32 << 30, speedGen4}
	modelRTX5090 = gpuModel{0x2b85, 0x1458, 0x4198, 0x22e8, "NVIDIA GeForce RTX 5090", 64 << 20, 32 << 30, speedGen5}
)

// slot returns the GPU at function 0 of slot and its audio function at 1, on the nvidia
// driver. speed and width are the link as trained, "" and 0 for conventional PCI (no
// link files); base32 and base64 place the 32-bit and the 64-bit BARs.
func (g gpuModel) slot(slot uint8, speed string, width int, base32, base64 uint64) []Device {
	maxSpeed, maxWidth := "", 0
	if speed != "" {
		maxSpeed, maxWidth = g.maxSpeed, 16
	}
	return []Device{
		{
			Slot: slot, Func: 0, Vendor: vendorNVIDIA, Device: g.device, SubVendor: g.subVendor, SubDevice: g.subDevice,
			Class: 0x030000, Rev: 0xa1, Driver: "nvidia", Speed: speed, Width: width, MaxSpeed: maxSpeed, MaxWidth: maxWidth,
			Model: g.model,
			BARs: []BAR{
				{Index: 0, Start: base32, Size: g.bar0, Flags: Mem32},
				{Index: 1, Start: base64, Size: g.bar1, Flags: Mem64Pref},
				{Index: 3, Start: base64 + g.bar1, Size: 32 << 20, Flags: Mem64Pref},
				{Index: 6, Start: base32 + g.bar0, Size: 512 << 10, Flags: ROM},
			},
		},
		{
			Slot: slot, Func: 1, Vendor: vendorNVIDIA, Device: g.audio, SubVendor: g.subVendor, SubDevice: g.subDevice,
			Class: 0x040300, Rev: 0xa1, Driver: "snd_hda_intel", Speed: speed, Width: width, MaxSpeed: maxSpeed, MaxWidth: maxWidth,
			BARs: []BAR{{Index: 0, Start: base32 + g.bar0 + 512<<10, Size: 16 << 10, Flags: Mem32}},
		},
	}
}

// bridge is a PCI-to-PCI bridge (root port or switch port) on the pcieport driver.
func bridge(slot, fn uint8, vendor, device, subVendor, subDevice uint16, speed string, width int, secondary uint8, children ...Device) Device {
	return Device{
		Slot: slot, Func: fn, Vendor: vendor, Device: device, SubVendor: subVendor, SubDevice: subDevice,
		Class: 0x060400, Driver: "pcieport", Speed: speed, Width: width, Secondary: secondary, Children: children,
	}
}

// nvme is a Samsung PM9A3 data-centre NVMe drive.
func nvme(base uint64) Device {
	return Device{
		Vendor: vendorSamsung, Device: 0xa80a, SubVendor: vendorSamsung, SubDevice: 0xaa0a, Class: 0x010802,
		Driver: "nvme", Speed: speedGen4, Width: 4,
		BARs: []BAR{{Index: 0, Start: base, Size: 32 << 10, Flags: Mem64}},
	}
}

// bmcVGA is an ASPEED BMC's VGA behind its PCIe-to-PCI bridge, in slot 0 of the bus.
func bmcVGA(secondary uint8, base32 uint64) Device {
	return Device{
		Vendor: vendorASPEED, Device: 0x1150, SubVendor: vendorASPEED, SubDevice: 0x1150, Class: 0x060400, Rev: 0x06,
		Speed: speedGen2, Width: 1, Secondary: secondary,
		Children: []Device{{
			Vendor: vendorASPEED, Device: 0x2000, SubVendor: vendorASPEED, SubDevice: 0x2000, Class: 0x030000, Rev: 0x52,
			Driver: "ast",
			BARs: []BAR{
				{Index: 0, Start: base32, Size: 64 << 20, Flags: Mem32},
				{Index: 1, Start: base32 + 64<<20, Size: 256 << 10, Flags: Mem32},
			},
		}},
	}
}

// numberGroups gives every device an IOMMU group, as the kernel does on a host whose
// root and switch ports have ACS: one group per slot (the functions of a multi-function
// device share it), numbered in address order, depth first; the IOMMU's own function
// has none.
func numberGroups(m *Machine) {
	n := 0
	var walk func(devs []Device)
	walk = func(devs []Device) {
		bySlot := map[uint8]int{}
		for i := range devs {
			d := &devs[i]
			if d.Class>>8 == 0x0806 {
				d.Group = NoGroup
				continue
			}
			g, ok := bySlot[d.Slot]
			if !ok {
				g = n
				n++
				bySlot[d.Slot] = g
			}
			d.Group = g
			walk(d.Children)
		}
	}
	for i := range m.Bridges {
		walk(m.Bridges[i].Devices)
	}
}

// Q35Guest8 is a Proxmox VE virtual machine of machine type q35 with eight RTX PRO 6000
// Blackwell passed through, seen from inside the guest: the GPUs (with their HDMI audio
// functions) sit on QEMU pcie-root-ports 00:10.0–00:10.3 and 00:1c.0–00:1c.3 of the one
// host bridge pci0000:00, buses 01 to 08 in that order, beside the ICH9 chipset devices;
// the kernel reports no NUMA node for any device, and one NUMA node holds the 32 vCPUs.
// The guest has no (virtual) IOMMU. The layout is what QEMU builds for such a VM (the
// q35 and pcie-root-port device models); every GPU pair is PHB in it, whatever the
// host's real topology.
func Q35Guest8() Machine { return ProxmoxQ35Guest(8, []Node{{ID: 0, CPUs: "0-31"}}) }

// proxmoxRootPorts are the slots of the root ports qemu-server gives hostpci0… with
// pcie=1 on q35: ich9-pcie-port-1…4 of its pve-q35 config files, then the ones it adds.
var proxmoxRootPorts = []uint8{0x1c << 3, 0x1c<<3 | 1, 0x1c<<3 | 2, 0x1c<<3 | 3, 0x10 << 3, 0x10<<3 | 1, 0x10<<3 | 2, 0x10<<3 | 3, 0x10<<3 | 4, 0x10<<3 | 5, 0x10<<3 | 6, 0x10<<3 | 7}

// ProxmoxQ35Guest is a q35 Proxmox VE VM with gpus RTX PRO 6000 (1 to 12) passed through
// as hostpci0… with pcie=1, seen from inside: each GPU behind the root port qemu-server
// gives its hostpci entry, the buses numbered in slot order as the firmware does, and
// the guest NUMA nodes given (a VM with numa: 1 and numaN entries has several).
func ProxmoxQ35Guest(gpus int, nodes []Node) Machine {
	bus0 := []Device{
		{Slot: 0x00, Vendor: vendorIntel, Device: 0x29c0, SubVendor: vendorVirtio, SubDevice: 0x1100, Class: 0x060000},
		{
			Slot: 0x01, Vendor: vendorQEMUVGA, Device: 0x1111, SubVendor: vendorVirtio, SubDevice: 0x1100, Class: 0x030000,
			Rev: 0x02, Driver: "bochs-drm",
			BARs: []BAR{{Index: 0, Start: 0x80000000, Size: 16 << 20, Flags: Mem32 | 0x8}, {Index: 2, Start: 0x81000000, Size: 4 << 10, Flags: Mem32}},
		},
		{
			Slot: 0x05, Vendor: vendorVirtio, Device: 0x1004, SubVendor: vendorVirtio, SubDevice: 0x0008, Class: 0x010000,
			Driver: "virtio-pci",
			BARs:   []BAR{{Index: 0, Start: 0x6000, Size: 0x40, Flags: IOPort}, {Index: 4, Start: 0x380000000000, Size: 16 << 10, Flags: Mem64Pref}},
		},
	}
	ports := slices.Clone(proxmoxRootPorts[:gpus])
	slices.Sort(ports)
	for i, devfn := range ports {
		bus := uint8(i + 1)
		gpu := modelRTXPro6000.slot(0, speedGen5, 16, 0x84000000+uint64(i)*0x08000000, 0x20000000000+uint64(i)*0x4000000000)
		// QEMU's pcie-root-port reports a 16 GT/s x32 link since QEMU 4.0.
		bus0 = append(bus0, bridge(devfn>>3, devfn&7, vendorRedHat, 0x000c, 0, 0, speedGen4, 32, bus, gpu...))
	}
	bus0 = append(bus0,
		Device{Slot: 0x1f, Func: 0, Vendor: vendorIntel, Device: 0x2918, SubVendor: vendorVirtio, SubDevice: 0x1100, Class: 0x060100, Rev: 0x02, Driver: "lpc_ich"},
		Device{
			Slot: 0x1f, Func: 2, Vendor: vendorIntel, Device: 0x2922, SubVendor: vendorVirtio, SubDevice: 0x1100, Class: 0x010601, Rev: 0x02,
			Driver: "ahci",
			BARs:   []BAR{{Index: 4, Start: 0x6040, Size: 0x20, Flags: IOPort}, {Index: 5, Start: 0x82000000, Size: 4 << 10, Flags: Mem32}},
		},
		Device{
			Slot: 0x1f, Func: 3, Vendor: vendorIntel, Device: 0x2930, SubVendor: vendorVirtio, SubDevice: 0x1100, Class: 0x0c0500, Rev: 0x02,
			Driver: "i801_smbus",
			BARs:   []BAR{{Index: 4, Start: 0x0700, Size: 0x40, Flags: IOPort}},
		},
	)
	return Machine{
		Nodes:         nodes,
		Bridges:       []HostBridge{{Domain: 0, Bus: 0, NUMA: -1, Devices: bus0}},
		NvidiaVersion: "580.95.05",
		Files: map[string]string{
			"proc/cmdline":                  "BOOT_IMAGE=/boot/vmlinuz-6.8.0-85-generic root=/dev/sda1 ro quiet\n",
			"proc/sys/kernel/hostname":      "train01\n",
			"etc/hostname":                  "train01\n",
			"sys/class/dmi/id/sys_vendor":   "QEMU\n",
			"sys/class/dmi/id/product_name": "Standard PC (Q35 + ICH9, 2009)\n",
		},
	}
}

// I440fxGuest4 is a QEMU virtual machine of machine type i440fx (pc) with four RTX A6000
// passed through, seen from inside the guest: i440fx has no PCIe, so the GPUs (with
// their HDMI audio functions) are conventional PCI devices directly on bus 0 at 00:10.0,
// 00:11.0, 00:12.0 and 00:13.0, beside the 440FX host bridge and the PIIX3/PIIX4
// functions, and have no link files. No device has a NUMA node; one node holds the 16
// vCPUs; the guest has no IOMMU. The layout is what QEMU builds for such a VM.
func I440fxGuest4() Machine {
	bus0 := []Device{
		{Slot: 0x00, Vendor: vendorIntel, Device: 0x1237, SubVendor: vendorVirtio, SubDevice: 0x1100, Class: 0x060000, Rev: 0x02},
		{Slot: 0x01, Func: 0, Vendor: vendorIntel, Device: 0x7000, SubVendor: vendorVirtio, SubDevice: 0x1100, Class: 0x060100},
		{
			Slot: 0x01, Func: 1, Vendor: vendorIntel, Device: 0x7010, SubVendor: vendorVirtio, SubDevice: 0x1100, Class: 0x010180,
			Driver: "ata_piix", BARs: []BAR{{Index: 4, Start: 0xc0a0, Size: 0x10, Flags: IOPort}},
		},
		{Slot: 0x01, Func: 3, Vendor: vendorIntel, Device: 0x7113, SubVendor: vendorVirtio, SubDevice: 0x1100, Class: 0x068000, Rev: 0x03, Driver: "piix4_smbus"},
		{
			Slot: 0x02, Vendor: vendorQEMUVGA, Device: 0x1111, SubVendor: vendorVirtio, SubDevice: 0x1100, Class: 0x030000,
			Rev: 0x02, Driver: "bochs-drm",
			BARs: []BAR{{Index: 0, Start: 0xfd000000, Size: 16 << 20, Flags: Mem32 | 0x8}, {Index: 2, Start: 0xfebf0000, Size: 4 << 10, Flags: Mem32}},
		},
		{
			Slot: 0x03, Vendor: vendorVirtio, Device: 0x1000, SubVendor: vendorVirtio, SubDevice: 0x0001, Class: 0x020000,
			Driver: "virtio-pci", BARs: []BAR{{Index: 0, Start: 0xc000, Size: 0x20, Flags: IOPort}},
		},
		{
			Slot: 0x05, Vendor: vendorVirtio, Device: 0x1004, SubVendor: vendorVirtio, SubDevice: 0x0008, Class: 0x010000,
			Driver: "virtio-pci", BARs: []BAR{{Index: 0, Start: 0xc040, Size: 0x40, Flags: IOPort}},
		},
	}
	for i := range 4 {
		bus0 = append(bus0, modelRTXA6000.slot(0x10+uint8(i), "", 0, 0xe0000000+uint64(i)*0x02000000, 0x800000000+uint64(i)*0x20000000)...)
	}
	return Machine{
		Nodes:         []Node{{ID: 0, CPUs: "0-15"}},
		Bridges:       []HostBridge{{Domain: 0, Bus: 0, NUMA: -1, Devices: bus0}},
		NvidiaVersion: "580.95.05",
		Files: map[string]string{
			"proc/cmdline":                  "BOOT_IMAGE=/boot/vmlinuz-6.8.0-85-generic root=/dev/sda1 ro quiet\n",
			"proc/sys/kernel/hostname":      "ws01\n",
			"etc/hostname":                  "ws01\n",
			"sys/class/dmi/id/sys_vendor":   "QEMU\n",
			"sys/class/dmi/id/product_name": "Standard PC (i440FX + PIIX, 1996)\n",
		},
	}
}

// OracleO1 rebuilds oracle O1: 8 × GeForce RTX 4090 in a two-socket server with a PCIe
// switch per socket, and one RDMA NIC (NVIDIA/nccl#1086, the nvidia-smi topo -m output
// and nccl-tests banner pasted there).
//
// From the report: two NUMA nodes with CPUs 0-27,56-83 and 28-55,84-111; GPU0–GPU3
// behind one switch on node 0 (GPU0 at bus 0x34, GPU1 at 0x35), GPU4–GPU7 behind
// another on node 1; NIC0 on node 0 but under another host bridge (NODE to GPU0–GPU3).
// Filled in: the CPUs are taken to be Xeon Ice Lake-SP (28 cores, the host bridges at
// the buses Ice Lake uses), the switches Broadcom PEX88000 whose first downstream port
// holds an NVMe drive (which is why the first GPU is at 0x34, not 0x33), the NIC a
// ConnectX-6 named mlx5_0 (the paste has no NIC legend), and the driver version.
func OracleO1() Machine {
	const (
		iceLakeVTd = 0x09a2 // each host bridge's Memory Map/VT-d function, at xx:00.0
		iceLakeRPA = 0x347a // root port A of an IIO stack, at xx:02.0
		pex88000   = 0xc010
	)
	vtd := Device{Vendor: vendorIntel, Device: iceLakeVTd, SubVendor: vendorIntel, SubDevice: 0, Class: 0x088000, Rev: 0x04}
	rootPort := func(speed string, width int, secondary uint8, children ...Device) Device {
		return bridge(0x02, 0, vendorIntel, iceLakeRPA, vendorIntel, 0, speed, width, secondary, children...)
	}
	// switchUnder is a PEX88000 below the root port of host bridge hb: upstream port on
	// bus hb+1, downstream ports on hb+2, an NVMe drive on hb+3, GPUs on hb+4 to hb+7.
	switchUnder := func(hb uint8, first int) Device {
		up, down := hb+1, hb+2
		ports := []Device{bridge(0, 0, vendorBroadcom, pex88000, vendorBroadcom, 0xa064, speedGen4, 4, hb+3, nvme(0xc0000000+uint64(hb)<<20))}
		for k := range 4 {
			i := first + k
			bus := hb + 4 + uint8(k)
			gpu := modelRTX4090.slot(0, speedGen4, 16, 0x90000000+uint64(i)*0x02000000, 0x200000000000+uint64(i)*0x1000000000)
			ports = append(ports, bridge(uint8(k+1), 0, vendorBroadcom, pex88000, vendorBroadcom, 0xa064, speedGen4, 16, bus, gpu...))
		}
		upstream := bridge(0, 0, vendorBroadcom, pex88000, vendorBroadcom, 0xa064, speedGen4, 16, down, ports...)
		return rootPort(speedGen4, 16, up, upstream)
	}
	cx6 := Device{
		Vendor: vendorMellanox, Device: 0x101b, SubVendor: vendorMellanox, SubDevice: 0x0007, Class: 0x020700,
		Driver: "mlx5_core", Speed: speedGen4, Width: 16, RDMA: "mlx5_0",
		BARs: []BAR{{Index: 0, Start: 0x20ffe000000, Size: 32 << 20, Flags: Mem64Pref}},
	}
	pchRootPort := bridge(0x1c, 0, vendorIntel, 0xa190, vendorIntel, 0, speedGen2, 1, 0x01, bmcVGA(0x02, 0x9c000000))
	hb := func(bus uint8, numa int, devs ...Device) HostBridge {
		return HostBridge{Domain: 0, Bus: bus, NUMA: numa, Devices: append([]Device{vtd}, devs...)}
	}
	return Machine{
		Nodes: []Node{{ID: 0, CPUs: "0-27,56-83"}, {ID: 1, CPUs: "28-55,84-111"}},
		Bridges: []HostBridge{
			hb(0x00, 0, pchRootPort,
				Device{Slot: 0x17, Vendor: vendorIntel, Device: 0xa182, SubVendor: vendorIntel, SubDevice: 0, Class: 0x010601, Rev: 0x09, Driver: "ahci"}),
			hb(0x16, 0, rootPort(speedGen4, 16, 0x17, cx6)),
			hb(0x30, 0, switchUnder(0x30, 0)),
			hb(0x4a, 0),
			hb(0x64, 0),
			hb(0x80, 1),
			hb(0x97, 1),
			hb(0xb0, 1, switchUnder(0xb0, 4)),
			hb(0xc9, 1),
			hb(0xe2, 1),
		},
		NvidiaVersion: "535.104.05",
		Files: map[string]string{
			"proc/cmdline":             "BOOT_IMAGE=/boot/vmlinuz-5.15.0-88-generic root=/dev/mapper/vg0-root ro\n",
			"proc/sys/kernel/hostname": "gpu4090x8\n",
			"etc/hostname":             "gpu4090x8\n",
		},
	}
}

// OracleO2 rebuilds oracle O2: five GeForce RTX 4090 on a one-socket AMD EPYC host in
// NPS1 (aikitoria/open-gpu-kernel-modules#13, host "epyc", a P2P-patched driver).
//
// From the report: one NUMA node with CPUs 0-63; every GPU pair NODE (different root
// complexes) except GPU3–GPU4, PHB (one root complex, different root ports). The same
// user's run in #12 lists GPUs at buses e1, e2, 01, 41, 81 and a1; here the five are 01,
// 41, 81, e1 and e2, so that GPU3 and GPU4 in address order are e1:00.0 and e2:00.0 on
// root ports e0:01.1 and e0:03.1 (which one of the six is gone is not known). Filled in:
// the CPU is taken to be a 32-core EPYC 9004 (Genoa) with its eight root complexes at
// buses 00, 20 … e0, the BMC and chipset devices, and the driver version.
func OracleO2() Machine {
	const (
		genoaRC    = 0x14a4
		genoaIOMMU = 0x149e
		genoaRCEC  = 0x14a6
		genoaDummy = 0x149f
		genoaGPP   = 0x14a5
	)
	port := func(slot, fn uint8, speed string, secondary uint8, children ...Device) Device {
		d := bridge(slot, fn, vendorAMD, genoaGPP, vendorAMD, genoaGPP, speed, 16, secondary, children...)
		d.MaxSpeed = speedGen5
		return d
	}
	rc := func(bus uint8, devs ...Device) HostBridge {
		base := []Device{
			{Slot: 0, Func: 0, Vendor: vendorAMD, Device: genoaRC, SubVendor: vendorAMD, SubDevice: genoaRC, Class: 0x060000},
			{Slot: 0, Func: 2, Vendor: vendorAMD, Device: genoaIOMMU, SubVendor: vendorAMD, SubDevice: genoaIOMMU, Class: 0x080600},
			{Slot: 0, Func: 3, Vendor: vendorAMD, Device: genoaRCEC, SubVendor: vendorAMD, SubDevice: genoaRCEC, Class: 0x080700, Driver: "pcieport"},
			{Slot: 1, Func: 0, Vendor: vendorAMD, Device: genoaDummy, Class: 0x060000},
		}
		return HostBridge{Domain: 0, Bus: bus, NUMA: 0, Devices: append(base, devs...)}
	}
	gpu := func(i int, slot uint8, bus uint8) Device {
		g := modelRTX4090.slot(0, speedGen4, 16, 0xf0000000-uint64(i+1)*0x04000000, 0x10000000000+uint64(i)*0x1000000000)
		return port(slot, 1, speedGen4, bus, g...)
	}
	fch := []Device{
		{Slot: 0x14, Func: 0, Vendor: vendorAMD, Device: 0x790b, SubVendor: vendorAMD, SubDevice: 0x790b, Class: 0x0c0500, Rev: 0x71, Driver: "piix4_smbus"},
		{Slot: 0x14, Func: 3, Vendor: vendorAMD, Device: 0x790e, SubVendor: vendorAMD, SubDevice: 0x790e, Class: 0x060100, Rev: 0x51},
	}
	for fn := range uint8(8) {
		fch = append(fch, Device{Slot: 0x18, Func: fn, Vendor: vendorAMD, Device: 0x14ad + uint16(fn), Class: 0x060000})
	}
	m := Machine{
		Nodes: []Node{{ID: 0, CPUs: "0-63"}},
		IOMMU: true,
		Bridges: []HostBridge{
			rc(0x00, append([]Device{gpu(0, 1, 0x01)}, fch...)...),
			rc(0x20),
			rc(0x40, gpu(1, 1, 0x41)),
			rc(0x60),
			rc(0x80, gpu(2, 1, 0x81)),
			rc(0xa0),
			rc(0xc0, port(5, 2, speedGen2, 0xc1, bmcVGA(0xc2, 0xe4000000))),
			rc(0xe0, gpu(3, 1, 0xe1), gpu(4, 3, 0xe2)),
		},
		NvidiaVersion: "550.54.15",
		Files: map[string]string{
			"proc/cmdline":             "BOOT_IMAGE=/boot/vmlinuz-6.5.0-27-generic root=/dev/nvme0n1p2 ro amd_iommu=on iommu=pt\n",
			"proc/sys/kernel/hostname": "epyc\n",
			"etc/hostname":             "epyc\n",
		},
	}
	numberGroups(&m)
	return m
}

// OracleO4 rebuilds oracle O4: two GeForce RTX 5090 on an AMD Threadripper PRO
// workstation with one NUMA node (noonghunna/club-3090#1229; the same matrix is in #1133
// and #1140).
//
// From the report: CPUs 0-63 on NUMA node 0; the two GPUs PHB, so on one root complex
// but different root ports. The reporter's rig report (#1261) lists an ASRock WRX80
// Creator R2.0 with a Threadripper PRO 3975WX (that it is the same rig is an inference),
// so the bridges are the Zen 2 (Starship) ones of the WRX80 platform with its four root
// complexes at buses 00, 20, 40 and 60. Filled in: which root complex and root ports hold
// the GPUs (40:01.1 and 40:03.1, buses 41 and 42), the links (5090s trained at the
// platform's 16 GT/s), the chipset devices and the driver version.
func OracleO4() Machine {
	const (
		starshipRC    = 0x1480
		starshipIOMMU = 0x1481
		starshipDummy = 0x1482
		starshipGPP   = 0x1483
	)
	rc := func(bus uint8, devs ...Device) HostBridge {
		base := []Device{
			{Slot: 0, Func: 0, Vendor: vendorAMD, Device: starshipRC, SubVendor: vendorAMD, SubDevice: starshipRC, Class: 0x060000},
			{Slot: 0, Func: 2, Vendor: vendorAMD, Device: starshipIOMMU, SubVendor: vendorAMD, SubDevice: starshipIOMMU, Class: 0x080600},
			{Slot: 1, Func: 0, Vendor: vendorAMD, Device: starshipDummy, Class: 0x060000},
			{Slot: 3, Func: 0, Vendor: vendorAMD, Device: starshipDummy, Class: 0x060000},
		}
		return HostBridge{Domain: 0, Bus: bus, NUMA: 0, Devices: append(base, devs...)}
	}
	port := func(slot uint8, speed string, width int, secondary uint8, children ...Device) Device {
		return bridge(slot, 1, vendorAMD, starshipGPP, 0, 0, speed, width, secondary, children...)
	}
	gpu := func(i int, slot, bus uint8) Device {
		g := modelRTX5090.slot(0, speedGen4, 16, 0xe0000000+uint64(i)*0x08000000, 0x38000000000+uint64(i)*0x1000000000)
		return port(slot, speedGen4, 16, bus, g...)
	}
	bus0 := []Device{
		port(1, speedGen4, 4, 0x01, nvme(0xfcf00000)),
		port(3, speedGen1, 1, 0x02, bmcVGA(0x03, 0xfa000000)),
		{Slot: 0x14, Func: 0, Vendor: vendorAMD, Device: 0x790b, SubVendor: vendorAMD, SubDevice: 0x790b, Class: 0x0c0500, Rev: 0x61, Driver: "piix4_smbus"},
		{Slot: 0x14, Func: 3, Vendor: vendorAMD, Device: 0x790e, SubVendor: vendorAMD, SubDevice: 0x790e, Class: 0x060100, Rev: 0x51},
	}
	for fn := range uint8(8) {
		bus0 = append(bus0, Device{Slot: 0x18, Func: fn, Vendor: vendorAMD, Device: 0x1490 + uint16(fn), Class: 0x060000})
	}
	m := Machine{
		Nodes: []Node{{ID: 0, CPUs: "0-63"}},
		IOMMU: true,
		Bridges: []HostBridge{
			rc(0x00, bus0...),
			rc(0x20),
			rc(0x40, gpu(0, 1, 0x41), gpu(1, 3, 0x42)),
			rc(0x60),
		},
		NvidiaVersion: "580.95.05",
		Files: map[string]string{
			"proc/cmdline":             "BOOT_IMAGE=/boot/vmlinuz-6.14.0-33-generic root=/dev/nvme0n1p2 ro quiet splash\n",
			"proc/sys/kernel/hostname": "wrx80\n",
			"etc/hostname":             "wrx80\n",
		},
	}
	numberGroups(&m)
	return m
}

// Fixture is a named fixture machine.
type Fixture struct {
	Name    string // the archive's base name under testdata/hosts: "q35-guest-8gpu"
	Machine func() Machine
}

// Fixtures lists the fixture machines by archive name.
func Fixtures() []Fixture {
	return []Fixture{
		{"q35-guest-8gpu", Q35Guest8},
		{"i440fx-guest-4gpu", I440fxGuest4},
		{"oracle-o1-8x4090-2socket", OracleO1},
		{"oracle-o2-epyc-5gpu", OracleO2},
		{"oracle-o4-2x5090-trpro", OracleO4},
		{"q35-guest-8gpu-bar-failure", CloudGuestBARFailure},
		{"q35-guest-vm131", GuestVM131},
	}
}

// GuestVM131 is the sample host's VM 131 after the reference split, seen from inside:
// q35, the four NUMA-1 RTX PRO 6000 of mapping pro6000-vm as hostpci0–3 with pcie=1, so
// behind the root ports at 00:1c.0–00:1c.3 (buses 01–04), and 64 vCPUs (cpu: host, AMD
// EPYC 9335) in one guest NUMA node, which numa0 binds to host node 1. The guest itself
// knows nothing of that node: every device has numa_node -1.
func GuestVM131() Machine {
	m := ProxmoxQ35Guest(4, []Node{{ID: 0, CPUs: "0-63"}})
	var cpuinfo strings.Builder
	for cpu := range 64 {
		fmt.Fprintf(&cpuinfo, "processor\t: %d\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC 9335 32-Core Processor\nstepping\t: 1\n", cpu)
		fmt.Fprintf(&cpuinfo, "physical id\t: %d\nsiblings\t: 32\ncore id\t\t: %d\ncpu cores\t: 32\napicid\t\t: %d\n", cpu/32, cpu%32, cpu)
		cpuinfo.WriteString("flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm rep_good nopl cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy svm cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext perfctr_core ssbd ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 clzero xsaveerptr wbnoinvd arat npt nrip_save avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid movdiri movdir64b fsrm avx512_vp2intersect flush_l1d arch_capabilities\naddress sizes\t: 52 bits physical, 57 bits virtual\n\n")
	}
	m.Files["proc/cpuinfo"] = cpuinfo.String()
	return m
}

// CloudGuestBARFailure is the VM the doctor's reference case came from: an Ubuntu cloud
// image on q35 with eight RTX PRO 6000 on root ports of one host bridge, no NUMA
// information (so every GPU pair is PHB), a 64-bit MMIO window that held the BARs of only
// two GPUs (the other six have BAR1 and BAR3 unassigned, no driver, and the kernel log
// says so: "can't assign; no space", "BAR1 is 0M", "probe ... failed"), and pci=realloc
// added to /etc/default/grub where the cloud image's 50-cloudimg-settings.cfg discards it.
func CloudGuestBARFailure() Machine {
	m := Q35Guest8()
	var log strings.Builder
	log.WriteString("[    0.000000] Linux version 6.8.0-85-generic (buildd@lcy02-amd64-029) (x86_64-linux-gnu-gcc-13 (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0, GNU ld (GNU Binutils for Ubuntu) 2.42) #85-Ubuntu SMP PREEMPT_DYNAMIC Thu Sep 18 15:26:59 UTC 2025\n")
	log.WriteString("[    0.000000] Command line: BOOT_IMAGE=/vmlinuz-6.8.0-85-generic root=LABEL=cloudimg-rootfs ro console=tty1 console=ttyS0\n")
	failed := 0
	for bi := range m.Bridges {
		for di := range m.Bridges[bi].Devices {
			port := &m.Bridges[bi].Devices[di]
			for ci := range port.Children {
				d := &port.Children[ci]
				if d.Vendor != vendorNVIDIA || port.Secondary <= 2 {
					continue // the first two GPUs got their BARs
				}
				if d.Func == 0 {
					failed++
					d.Driver = ""
					for bi := range d.BARs {
						if b := &d.BARs[bi]; b.Index == 1 || b.Index == 3 {
							b.Start, b.Flags = 0, b.Flags|Unset
						}
					}
					addr := fmt.Sprintf("0000:%02x:00.0", port.Secondary)
					fmt.Fprintf(&log, "[    0.4%05d] pci %s: BAR 1 [mem size 0x2000000000 64bit pref]: can't assign; no space\n", 10*port.Secondary, addr)
					fmt.Fprintf(&log, "[    0.4%05d] pci %s: BAR 1 [mem size 0x2000000000 64bit pref]: failed to assign\n", 10*port.Secondary+1, addr)
					fmt.Fprintf(&log, "[    0.4%05d] pci %s: BAR 3 [mem size 0x02000000 64bit pref]: can't assign; no space\n", 10*port.Secondary+2, addr)
					fmt.Fprintf(&log, "[    0.4%05d] pci %s: BAR 3 [mem size 0x02000000 64bit pref]: failed to assign\n", 10*port.Secondary+3, addr)
				}
			}
		}
	}
	log.WriteString("[    0.512345] pci_bus 0000:00: Some PCI device resources are unassigned, try booting with pci=realloc\n")
	log.WriteString("[    5.102211] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Oct  9 21:29:00 UTC 2025\n")
	for bus := 3; bus <= 8; bus++ {
		fmt.Fprintf(&log, "[    5.1%04d] NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:\n               NVRM: BAR1 is 0M @ 0x0 (PCI:0000:%02x:00.0)\n", 10*bus, bus)
		fmt.Fprintf(&log, "[    5.1%04d] nvidia: probe of 0000:%02x:00.0 failed with error -1\n", 10*bus+1, bus)
	}
	fmt.Fprintf(&log, "[    5.210003] NVRM: The NVIDIA probe routine failed for %d device(s).\n", failed)
	m.Files["dev/kmsg"] = log.String()
	m.Files["proc/cmdline"] = "BOOT_IMAGE=/vmlinuz-6.8.0-85-generic root=LABEL=cloudimg-rootfs ro console=tty1 console=ttyS0\n"
	m.Files["etc/default/grub"] = `# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.

GRUB_DEFAULT=0
GRUB_TIMEOUT_STYLE=hidden
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=` + "`( . /etc/os-release; echo ${NAME:-Ubuntu} ) 2>/dev/null || echo Ubuntu`" + `
GRUB_CMDLINE_LINUX_DEFAULT="quiet splash pci=realloc"
GRUB_CMDLINE_LINUX=""
`
	// The cloud image's drop-in, as Ubuntu ships it.
	m.Files["etc/default/grub.d/50-cloudimg-settings.cfg"] = `# Cloud Image specific Grub settings for Generic Cloud Images
# CLOUD_IMG: This file was created/modified by the Cloud Image build process

# Set the recordfail timeout
GRUB_RECORDFAIL_TIMEOUT=0

# Do not wait on grub prompt
GRUB_TIMEOUT=0

# Set the default commandline
GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"

# Set the grub console type
GRUB_TERMINAL=console
`
	m.Files["proc/cpuinfo"] = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9335 32-Core Processor\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm rep_good nopl cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy svm cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext\naddress sizes\t: 40 bits physical, 48 bits virtual\n"
	return m
}

// SharedGroups is a host whose IOMMU groups hold more than a GPU: GPU 01:00.0 shares
// group 1 with its root port and an igb NIC at 01:01.0, and the GPUs at 00:02.0 and
// 00:03.0 share group 2. It is not in Fixtures: the tests of the group rules build it.
func SharedGroups() Machine {
	gpu := func(slot uint8, group int) Device {
		return Device{Slot: slot, Vendor: 0x10de, Device: 0x2bb1, SubVendor: 0x10de, SubDevice: 0x204b, Class: 0x030000, Driver: "nvidia", Group: group}
	}
	return Machine{
		Nodes: []Node{{ID: 0, CPUs: "0-7"}},
		IOMMU: true,
		Bridges: []HostBridge{{NUMA: 0, Devices: []Device{
			{Slot: 1, Vendor: 0x1022, Device: 0x14ab, Class: 0x060400, Driver: "pcieport", Group: 1, Secondary: 1, Children: []Device{
				gpu(0, 1),
				{Slot: 1, Vendor: 0x8086, Device: 0x1521, Class: 0x020000, Driver: "igb", Group: 1},
			}},
			gpu(2, 2), gpu(3, 2),
		}}},
	}
}

// SecondDomain is a Proxmox VE node (pve1) whose GPUs sit in two PCI domains, as on
// hosts with several PCI segment groups, where RTX PRO 6000 systems show 0001:: an RTX
// PRO 6000 with its HDMI audio at 0000:01:00 behind root port 0000:00:01.1 on NUMA node
// 0, and another at 0001:01:00 behind 0001:00:01.1 on node 1, both on nvidia (minors 0
// and 1). Mapping pro6000 holds both cards, and VM 150 passes the second by address
// (hostpci0: 0001:01:00,pcie=1). It is not in Fixtures: the tests of each path that
// names a device (selectors, mappings, hostpci, NCCL's topology) build it.
func SecondDomain() Machine {
	card := func(base32, base64 uint64, group int) []Device {
		devs := modelRTXPro6000.slot(0, speedGen5, 16, base32, base64)
		for i := range devs {
			devs[i].Group = group
		}
		return devs
	}
	port := func(group int, children []Device) Device {
		d := bridge(1, 1, vendorAMD, 0x14ab, vendorAMD, 0x14ab, speedGen5, 16, 1, children...)
		d.Group = group
		return d
	}
	rc := func(group int) Device {
		return Device{Vendor: vendorAMD, Device: 0x14a4, SubVendor: vendorAMD, SubDevice: 0x14a4, Class: 0x060000, Group: group}
	}
	return Machine{
		Nodes: []Node{{ID: 0, CPUs: "0-15"}, {ID: 1, CPUs: "16-31"}},
		IOMMU: true,
		Bridges: []HostBridge{
			{Domain: 0, Bus: 0, NUMA: 0, Devices: []Device{rc(0), port(1, card(0xf0000000, 0x20000000000, 2))}},
			{Domain: 1, Bus: 0, NUMA: 1, Devices: []Device{rc(3), port(4, card(0xe0000000, 0x40000000000, 5))}},
		},
		Drivers:       []string{"vfio-pci"},
		NvidiaVersion: "580.95.05",
		Links:         pveNodeLinks("pve1"),
		Files: map[string]string{
			"etc/hostname": "pve1\n",
			"proc/cpuinfo": "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9124 16-Core Processor\n\n",
			"etc/pve/mapping/pci.cfg": "pro6000\n" +
				"\tmap id=10de:2bb1,iommugroup=2,node=pve1,path=0000:01:00,subsystem-id=10de:204b\n" +
				"\tmap id=10de:2bb1,iommugroup=5,node=pve1,path=0001:01:00,subsystem-id=10de:204b\n\n",
			"etc/pve/nodes/pve1/qemu-server/150.conf": "hostpci0: 0001:01:00,pcie=1\nmachine: q35\nmemory: 16384\n",
		},
	}
}

// SRIOVHost is a Proxmox VE node (pve1) with NVIDIA's vGPU manager on RTX PRO 6000
// Blackwell Server Editions (10de:2bb5), which give vGPUs through SR-IOV virtual
// functions on kernels since 6.8. GPU 0000:81:00.0 (NUMA node 1) has 4 of its 32 VFs
// enabled, 0000:81:00.4–0000:81:00.7, each with the manager's nvidia/ directory: 81:00.4
// carries vGPU type 1234 for running VM 140 (hostpci0: 0000:81:00.4,mdev=nvidia-1234),
// and VM 141, stopped, takes one of 81:00.5 and 81:00.6 through mapping vgpu. GPU
// 0000:c1:00.0 can have 32 VFs and has none enabled; GPU 0000:01:00.0 (NUMA node 0) has
// no SR-IOV. The vGPU types' ids and names are illustrative, in the manager's format.
// It is not in Fixtures: the tests of SR-IOV build it.
func SRIOVHost() Machine {
	const types = "ID    : vGPU Name\n1234  : NVIDIA RTX PRO 6000 Blackwell DC-24Q\n1235  : NVIDIA RTX PRO 6000 Blackwell DC-48Q\n"
	gpu := func(group int) Device {
		return Device{Vendor: vendorNVIDIA, Device: 0x2bb5, SubVendor: vendorNVIDIA, SubDevice: 0x204e, Class: 0x030200, Rev: 0xa1,
			Driver: "nvidia", Group: group, Speed: speedGen5, Width: 16, Model: "NVIDIA RTX PRO 6000 Blackwell Server Edition",
			BARs: []BAR{{Index: 0, Start: 0xf0000000, Size: 64 << 20, Flags: Mem32}, {Index: 1, Start: 0x20000000000, Size: 128 << 30, Flags: Mem64Pref}}}
	}
	vf := func(fn uint8, vgpuType int) Device {
		return Device{Func: fn, Vendor: vendorNVIDIA, Device: 0x2bb5, SubVendor: vendorNVIDIA, SubDevice: 0x204e, Class: 0x030200, Rev: 0xa1,
			Group: 40 + int(fn), Speed: speedGen5, Width: 16, VGPUTypes: types, VGPUType: vgpuType}
	}
	withVFs := gpu(22)
	withVFs.TotalVFs = 32
	withVFs.VirtFns = []Device{vf(4, 1234), vf(5, 0), vf(6, 0), vf(7, 0)}
	capable := gpu(32)
	capable.TotalVFs = 32
	port := func(group int, secondary uint8, child Device) Device {
		d := bridge(1, 1, vendorAMD, 0x14ab, vendorAMD, 0x14ab, speedGen5, 16, secondary, child)
		d.Group = group
		return d
	}
	return Machine{
		Nodes: []Node{{ID: 0, CPUs: "0-15"}, {ID: 1, CPUs: "16-31"}},
		IOMMU: true,
		Bridges: []HostBridge{
			{Bus: 0x00, NUMA: 0, Devices: []Device{port(1, 0x01, gpu(2))}},
			{Bus: 0x80, NUMA: 1, Devices: []Device{port(21, 0x81, withVFs)}},
			{Bus: 0xc0, NUMA: 1, Devices: []Device{port(31, 0xc1, capable)}},
		},
		Drivers:       []string{"vfio-pci"},
		NvidiaVersion: "580.95.05",
		Processes:     []Process{{PID: 5140, Comm: "kvm", Cmdline: []string{"/usr/bin/kvm", "-id", "140"}, Cgroup: "/qemu.slice/140.scope"}},
		Links:         pveNodeLinks("pve1"),
		Files: map[string]string{
			"etc/hostname":            "pve1\n",
			"run/qemu-server/140.pid": "5140\n",
			"etc/pve/mapping/pci.cfg": "vgpu\n" +
				"\tmap id=10de:2bb5,iommugroup=45,node=pve1,path=0000:81:00.5,subsystem-id=10de:204e\n" +
				"\tmap id=10de:2bb5,iommugroup=46,node=pve1,path=0000:81:00.6,subsystem-id=10de:204e\n" +
				"\tmdev 1\n\n",
			"etc/pve/nodes/pve1/qemu-server/140.conf": "hostpci0: 0000:81:00.4,mdev=nvidia-1234,pcie=1\nmachine: q35\nmemory: 16384\n",
			"etc/pve/nodes/pve1/qemu-server/141.conf": "hostpci0: mapping=vgpu,mdev=nvidia-1235,pcie=1\nmachine: q35\nmemory: 16384\n",
		},
	}
}

// pveNodeLinks are the links pmxcfs makes in /etc/pve for the node it runs on: local,
// qemu-server and lxc lead into nodes/NODE.
func pveNodeLinks(node string) map[string]string {
	return map[string]string{
		"etc/pve/local":       "nodes/" + node,
		"etc/pve/qemu-server": "nodes/" + node + "/qemu-server",
		"etc/pve/lxc":         "nodes/" + node + "/lxc",
	}
}
