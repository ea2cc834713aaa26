package addrspace

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pveprop"
)

// Sizes and addresses of the guest's memory map.
const (
	MiB = uint64(1) << 20
	GiB = uint64(1) << 30
	TiB = uint64(1) << 40

	fourGiB = 4 * GiB
	// amdHTStart is where the HyperTransport range below 1 TiB starts, which QEMU
	// reserves in the e820 map of a guest with an AMD CPU of 40 or more phys-bits and
	// moves RAM above 1 TiB past (hw/i386/pc.c, AMD_HT_START, pc_memory_init).
	amdHTStart = 0xfd00000000
)

// guest is the VM as QEMU builds it from its config: the CPU the guest sees and its
// memory map below the PCI windows.
type guest struct {
	q35, ovmf bool
	cpu       cpuConfig
	vendor    string // what CPUID leaf 0 says to the guest
	// physBits is CPUID 0x80000008 EAX[7:0]: what the guest kernel takes as the
	// address width (x86 iomem_resource ends at 2^physBits).
	physBits int
	// guestPhysBits is CPUID 0x80000008 EAX[23:16] when the VM config sets it; 0
	// otherwise (QEMU may then take KVM's value, which the config does not say).
	guestPhysBits int
	pdpe1gb       bool // 1 GiB pages (CPUID 0x80000001 EDX bit 26)

	lowMem   uint64 // RAM below 4 GiB
	above4G  uint64 // RAM above it
	ramStart uint64 // where that RAM starts: 4 GiB, or 1 TiB when QEMU moves it past AMD's HT range
	// reservedEnd is fw_cfg etc/reserved-memory-end: the end of the memory hotplug
	// area; 0 without one.
	reservedEnd uint64
	hole64Start uint64 // pc_pci_hole64_start: QEMU's 64-bit PCI hole starts here
	hole64Size  uint64 // pci-hole64-size: 32 GiB (q35) or 2 GiB (i440fx) unless args set it
	// window is the OVMF window X-PciMmio64Mb asks for, in bytes; 0 without one.
	window uint64
	rombar map[string]bool // hostpciN → whether it exposes the ROM BARs (rombar, default 1)
	pcie   map[string]bool // hostpciN → pcie=1
}

// ramEnd is the end of the RAM above 4 GiB (4 GiB itself without such RAM).
func (g *guest) ramEnd() uint64 { return g.ramStart + g.above4G }

// modelVendor is the vendor qemu-server gives a CPU model (CPUConfig.pm,
// $cpu_vendor_list): "" for the generic models, which under KVM report the host's
// vendor (QEMU target/i386/host-cpu.c, host_cpu_instance_init), and for host and max.
func modelVendor(model string) string {
	switch {
	case model == "host", model == "max", model == "kvm64", model == "kvm32", model == "qemu64", model == "qemu32",
		strings.HasPrefix(model, "x86-64-v"), strings.HasPrefix(model, "custom-"):
		return ""
	case strings.HasPrefix(model, "EPYC"), strings.HasPrefix(model, "Opteron"), model == "phenom", model == "athlon":
		return "AuthenticAMD"
	}
	return "GenuineIntel"
}

// newGuest reads the VM config as QEMU will build the guest on host.
func newGuest(c vmConfig, host HostCPU) (*guest, error) {
	g := &guest{rombar: map[string]bool{}, pcie: map[string]bool{}}
	machine, _, _ := strings.Cut(c["machine"], ",")
	g.q35 = strings.Contains(machine, "q35")
	g.ovmf = c["bios"] == "ovmf"
	g.cpu = parseCPU(cpuOption(c))
	hostModel := g.cpu.Type == "host" || g.cpu.Type == "max"

	g.vendor = modelVendor(g.cpu.Type)
	if g.vendor == "" {
		g.vendor = host.Vendor
	}
	// phys-bits: host-phys-bits=true for phys-bits=host (CPUConfig.pm get_cpu_options)
	// and for -cpu host/max (host_cpu_max_instance_init); otherwise the value set, or
	// QEMU's default of 40 (x86_cpu_realizefn, TCG_PHYS_ADDR_BITS).
	switch {
	case g.cpu.PhysBits == "host" || g.cpu.PhysBits == "" && hostModel:
		g.physBits = host.PhysBits
	case g.cpu.PhysBits != "":
		n, err := strconv.Atoi(g.cpu.PhysBits)
		if err != nil || n < 8 || n > 64 {
			return nil, fmt.Errorf("cpu: phys-bits=%s is not 8-64 or host", g.cpu.PhysBits)
		}
		g.physBits = n
	default:
		g.physBits = 40
	}
	g.guestPhysBits = g.cpu.GuestPhysBits
	if on, set := g.cpu.Flags["pdpe1gb"]; set {
		g.pdpe1gb = on && host.PDPE1GB
	} else {
		// host and max carry the host's flags; of the named models only those whose
		// QEMU definition has pdpe1gb would, and the plan asks for the flag rather than
		// rely on a model table.
		g.pdpe1gb = hostModel && host.PDPE1GB
	}

	mb, err := memoryMB(c)
	if err != nil {
		return nil, err
	}
	ram := mb * MiB
	maxRAM := ram
	if hotplugMemory(c) {
		// Memory.pm config: -m size=1024,slots=255,maxmem=<get_max_mem>M (1024 per
		// socket with 1 GiB hugepages).
		static := uint64(1024)
		if c["hugepages"] == "1024" {
			if s, err := strconv.ParseUint(c["sockets"], 10, 64); err == nil && s > 0 {
				static *= s
			}
		}
		ram, maxRAM = static*MiB, g.maxMemMB(host)*MiB
		if maxRAM < ram {
			maxRAM = ram
		}
	}
	// Below 4 GiB: q35 keeps 2 GiB of RAM there once it has 2.75 GiB (pc_q35_init);
	// i440fx 3 GiB once it has 3.5 GiB (pc_init1, gigabyte_align).
	g.lowMem = ram
	switch {
	case g.q35 && ram >= 0xb0000000:
		g.lowMem = 0x80000000
	case !g.q35 && ram >= 0xe0000000:
		g.lowMem = 0xc0000000
	}
	g.above4G = ram - g.lowMem
	g.hole64Size = 2 * GiB
	if g.q35 {
		g.hole64Size = 32 * GiB
	}
	if s, ok := argsHole64(c["args"], g.q35); ok {
		g.hole64Size = s
	}
	g.ramStart = fourGiB
	g.layoutMemory(maxRAM - ram)
	if g.vendor == "AuthenticAMD" && g.above4G > 0 && g.hole64Start+g.hole64Size-1 >= amdHTStart {
		// pc_memory_init: the RAM above 4 GiB moves to 1 TiB when the highest address
		// used would cross AMD's HyperTransport range.
		g.ramStart = TiB
		g.layoutMemory(maxRAM - ram)
	}
	if mb, ok := argsWindow(c["args"]); ok {
		g.window = mb * MiB
	}
	for k, v := range c {
		if n, ok := strings.CutPrefix(k, "hostpci"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			p := pveprop.Parse(v, "host")
			g.rombar[k] = p["rombar"] != "0"
			g.pcie[k] = p["pcie"] == "1"
		}
	}
	return g, nil
}

// layoutMemory places the memory hotplug area (hotplug bytes of it, 0 for none) and
// QEMU's 64-bit PCI hole above the RAM: pc_get_device_memory_range (1 GiB more per
// slot, 255 slots) and pc_pci_hole64_start, hw/i386/pc.c.
func (g *guest) layoutMemory(hotplug uint64) {
	end := g.ramEnd()
	g.reservedEnd = 0
	if hotplug > 0 {
		end = alignUp(end, GiB) + hotplug + 255*GiB
		g.reservedEnd = alignUp(end, GiB)
	}
	g.hole64Start = alignUp(end, GiB)
}

// maxMemMB is qemu-server's maxmem for memory hotplug (Memory.pm, get_max_mem): half
// of what the VM's phys-bits (rounded down to even) address, at most 4 TiB.
func (g *guest) maxMemMB(host HostCPU) uint64 {
	bits := 0
	switch {
	case g.cpu.PhysBits == "host":
		bits = host.PhysBits
	case g.cpu.PhysBits != "":
		bits, _ = strconv.Atoi(g.cpu.PhysBits)
	case g.cpu.Type == "host" || g.cpu.Type == "max":
		bits = host.PhysBits
	default:
		bits = min(host.PhysBits, 40)
	}
	if bits == 0 {
		bits = 36
	}
	bits &^= 1
	return min(uint64(1)<<(bits-21), 4*1024*1024)
}

// startsQEMU says whether QEMU starts the guest at all: it refuses when the end of its
// 64-bit PCI hole lies past what phys-bits address ("phys-bits too low",
// pc_memory_init, pc_max_used_gpa).
func (g *guest) startsQEMU() bool {
	return g.physBits >= 64 || g.hole64Start+g.hole64Size-1 <= uint64(1)<<g.physBits-1
}

// e820Used is SeaBIOS's e820_is_used (src/e820map.c), with its 64-bit arithmetic:
// whether a range overlaps RAM or a range QEMU reserves in the e820 map (AMD's
// HyperTransport range, hw/i386/pc.c).
func (g *guest) e820Used(start, size uint64) bool {
	used := func(s, n uint64) bool { return !(start+size <= s) && !(start >= s+n) }
	if used(0, g.lowMem) || g.above4G > 0 && used(g.ramStart, g.above4G) {
		return true
	}
	return g.amdHT() && used(amdHTStart, TiB-amdHTStart)
}

// amdHT says whether QEMU reserves AMD's HyperTransport range in the e820 map: for an
// AMD guest CPU of 40 or more phys-bits (pc_memory_init).
func (g *guest) amdHT() bool { return g.vendor == "AuthenticAMD" && g.physBits >= 40 }

// alignUp rounds x up to a multiple of the power of two a, wrapping as the firmware's
// 64-bit ALIGN does.
func alignUp(x, a uint64) uint64 {
	if a == 0 {
		return x
	}
	return (x + a - 1) &^ (a - 1)
}

func alignDown(x, a uint64) uint64 { return x &^ (a - 1) }

// pow2Floor and pow2Ceil round to a power of two (edk2 GetPowerOfTwo64 is pow2Floor).
func pow2Floor(x uint64) uint64 {
	if x == 0 {
		return 0
	}
	p := uint64(1)
	for p <= x/2 {
		p <<= 1
	}
	return p
}

func pow2Ceil(x uint64) uint64 {
	p := uint64(1)
	for p < x && p < 1<<63 {
		p <<= 1
	}
	return p
}
