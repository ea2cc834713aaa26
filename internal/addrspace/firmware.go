package addrspace

import (
	"cmp"
	"slices"
)

// Window is a range of guest-physical addresses: [Start, End).
type Window struct {
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
}

// Size is the window's length.
func (w Window) Size() uint64 { return w.End - w.Start }

// Placement is what a firmware makes of the guest's PCI devices.
type Placement struct {
	// FirmwareBits is the address width the firmware works with: the guest's
	// phys-bits as it trusts and caps them; 0 when it does not trust them.
	FirmwareBits int `json:"firmware_bits"`
	// Window is the 64-bit MMIO window: where the firmware may put 64-bit BARs.
	Window Window `json:"window"`
	// Need is the room the 64-bit BARs take in it as the firmware packs them: each
	// bridge window naturally aligned, one after the other.
	Need uint64 `json:"need"`
	// Align is the alignment of the largest of them.
	Align uint64 `json:"align"`
	// Assigned are the hostpci entries whose 64-bit BARs the firmware places where the
	// guest's kernel can use them; Unassigned the others.
	Assigned   []string `json:"assigned"`
	Unassigned []string `json:"unassigned"`
	// Mem32Need is the room the BARs below 4 GiB (32-bit and non-prefetchable ones,
	// ROMs) of the passed devices take, and Mem32Window the firmware's window for them.
	Mem32Need   uint64 `json:"mem32_need"`
	Mem32Window Window `json:"mem32_window"`
}

// Fits says whether every device's 64-bit BARs are placed.
func (p Placement) Fits() bool { return len(p.Unassigned) == 0 }

// Mem32Fits says whether the passed devices' BARs below 4 GiB fit their window.
func (p Placement) Mem32Fits() bool { return p.Mem32Need <= p.Mem32Window.Size() }

const (
	seabiosBarMin    = 4 << 10 // PCI_DEVICE_MEM_MIN, src/fw/pciinit.c
	seabiosBridgeMin = 2 << 20 // PCI_BRIDGE_MEM_MIN
	seabiosMemEnd    = 0xfec00000
	edk2BridgeAlign  = 1 << 20 // a P2P bridge's memory granularity: its initial Alignment 0xFFFFF
	ovmfClassicSize  = 32 * GiB
	ovmfOverrideMax  = 0x1000000 * MiB // X-PciMmio64Mb is accepted up to 16 TiB
)

// seabios places the devices as SeaBIOS 1.16.3 and later does (src/fw/pciinit.c,
// src/fw/paravirt.c physbits).
func seabios(g *guest, devices []Device) Placement {
	var p Placement
	// physbits(): CPUID phys-bits are trusted from 41 up, or at 36 and 39 on Intel
	// and 40 on AMD (the "QEMU quirk"); unknown, the 64-bit window has no top.
	if trusted(g.physBits, g.vendor) {
		p.FirmwareBits = g.physBits
	}
	var top uint64
	if p.FirmwareBits > 0 {
		top = uint64(1) << p.FirmwareBits
		// pci_setup: more than 44 bits only in guests with 1 TiB of RAM or more.
		if p.FirmwareBits > 44 && g.above4G < TiB {
			top, p.FirmwareBits = uint64(1)<<44, 44
		}
	}
	// pci_pad_mem64: padding and the high window whenever there is RAM above 4 GiB.
	pad := g.above4G > 0
	root := buildBus(g, devices, nil)

	var r64mem, r64pref []res
	for _, b := range root.bars {
		if b.Is64Bit && b.Index != romIndex {
			r := res{size: max(b.Size, seabiosBarMin), align: max(b.Size, seabiosBarMin), devices: []string{b.entry}}
			if b.Prefetchable {
				r64pref = append(r64pref, r)
			} else {
				r64mem = append(r64mem, r)
			}
		}
	}
	for _, k := range root.kids {
		r64pref = append(r64pref, seabiosBridge(k, top, pad, true))
	}
	sortRes(r64mem)
	sortRes(r64pref)
	sumMem, sumPref := sumRes(r64mem), sumRes(r64pref)
	alignMem, alignPref := firstAlign(r64mem), firstAlign(r64pref)
	p.Need, p.Align = sumPref+sumMem, max(alignMem, alignPref)

	// pci_bios_map_devices: above the RAM and the hotplug area, or, when the width is
	// known, at its top, padded to an eighth of it.
	base := max(g.reservedEnd, fourGiB+g.above4G)
	if top > 0 {
		size := alignUp(sumMem, GiB) + alignUp(sumPref, GiB)
		if pad {
			size = alignUp(size, top>>3)
		}
		if base < top-size {
			base = top - size
		}
		if g.e820Used(base, size) {
			base -= size
		}
	}
	base = alignUp(alignUp(base, alignMem), GiB)
	pref := alignUp(alignUp(base+sumMem, alignPref), GiB)
	end := alignUp(pref+sumPref, GiB)
	p.Window = Window{Start: base, End: end}

	// The guest's kernel uses a BAR that lies above the RAM and below 2^phys-bits.
	limit := uint64(1)<<min(g.physBits, 63) - 1
	usable := func(start, size uint64) bool {
		return start >= g.ramEnd() && start+size >= start && start+size-1 <= limit
	}
	placed := map[string]bool{}
	failed := map[string]bool{}
	at := base
	for _, r := range r64mem {
		mark(r.devices, usable(at, r.size), placed, failed)
		at += r.size
	}
	at = pref
	for _, r := range r64pref {
		mark(r.devices, usable(at, r.size), placed, failed)
		at += r.size
	}
	p.Assigned, p.Unassigned = split(devices, failed)

	// Below 4 GiB: from the end of the MMCONFIG area (q35) or of the low RAM to the
	// IO-APIC (pci_bios_init_root_regions_mem, mch_mem_addr_setup, i440fx_mem_addr_setup).
	start := uint64(0xc0000000)
	if !g.q35 {
		start = max(g.lowMem, 0x80000000)
		if g.lowMem > 0x80000000 {
			start = max(g.lowMem, 0xc0000000)
		}
	}
	p.Mem32Window = Window{Start: start, End: seabiosMemEnd}
	var mem32 []res
	for _, b := range root.bars {
		if !b.Is64Bit || b.Index == romIndex {
			mem32 = append(mem32, res{size: max(b.Size, seabiosBarMin), align: max(b.Size, seabiosBarMin)})
		}
	}
	for _, k := range root.kids {
		mem32 = append(mem32, seabiosBridge(k, top, pad, false))
	}
	sortRes(mem32)
	// Placed top down from the IO-APIC, aligned down: what it takes is the distance.
	need := seabiosMemEnd - alignDown(seabiosMemEnd-sumRes(mem32), max(firstAlign(mem32), 1))
	p.Mem32Need = need
	return p
}

// seabiosBridge is a bridge's window in SeaBIOS (pci_bios_check_devices): its BARs and
// its bridges' windows, aligned to the largest of them (2 MiB at least), a hot-plug
// slot's 64-bit window at least 1/2048 of the address space when padding.
func seabiosBridge(b *bus, top uint64, pad, want64 bool) res {
	var rs []res
	for _, bar := range b.bars {
		if bar.pref64() == want64 {
			rs = append(rs, res{size: max(bar.Size, seabiosBarMin), align: max(bar.Size, seabiosBarMin)})
		}
	}
	for _, k := range b.kids {
		rs = append(rs, seabiosBridge(k, top, pad, want64))
	}
	align := max(uint64(seabiosBridgeMin), firstAlignSorted(rs))
	if want64 && b.hotplug && pad && top>>11 > align {
		align = top >> 11
	}
	sum := sumRes(rs)
	if align > sum && b.hotplug {
		sum = align // the hot-plug reserve
	}
	return res{size: alignUp(sum, align), align: align, devices: b.devices}
}

// ovmf places the devices as OVMF does: the window from PlatformInitLib (MemDetect.c:
// PlatformGetFirstNonAddress, PlatformAddressWidthFromCpuid, PlatformDynamicMmioWindow),
// the packing from PciBusDxe (PciResourceSupport.c, CalculateResourceAperture) and
// PciHostBridgeDxe (AllocateResource), the hot-plug padding from PciHotPlugInitDxe
// (GetResourcePadding).
func ovmf(g *guest, devices []Device) Placement {
	var p Placement
	p.FirmwareBits = ovmfBits(g)

	// PlatformGetFirstNonAddress: above the RAM and the hotplug area, 1 GiB aligned
	// and naturally aligned to the window's size.
	first := max(g.ramEnd(), g.reservedEnd)
	size := uint64(ovmfClassicSize)
	override := g.window > 0 && g.window <= ovmfOverrideMax
	if override {
		size = alignUp(g.window, GiB)
	}
	base := alignUp(alignUp(first, GiB), pow2Floor(size))
	if !override && p.FirmwareBits > 0 {
		// PlatformDynamicMmioWindow: an eighth of the address space, at its top.
		space, mmio := uint64(1)<<p.FirmwareBits, uint64(1)<<(p.FirmwareBits-3)
		if size < mmio && base+mmio < space {
			size, base = mmio, space-mmio
			// PlatformReservationConflictCB: below a reserved e820 range it overlaps.
			if g.amdHT() && base < TiB && amdHTStart < base+size {
				base = (amdHTStart - size) &^ (size - 1)
			}
		}
	}
	p.Window = Window{Start: base, End: base + size}
	if override && g.amdHT() && base < amdHTStart && amdHTStart < base+size {
		// A window set by hand is not moved off QEMU's reserved HyperTransport range:
		// what lies from there on cannot be used.
		p.Window.End = amdHTStart
	}
	// Past the width the firmware maps, or the guest's kernel addresses (its
	// iomem_resource ends at 2^phys-bits), nothing can be used.
	limit := uint64(1) << min(g.physBits, 63)
	if p.FirmwareBits > 0 {
		limit = min(limit, uint64(1)<<p.FirmwareBits)
	}
	if p.Window.End > limit {
		p.Window.End = max(base, limit)
	}

	// PciBusDxe rejects the device that takes most until the rest fits.
	left := map[string]bool{}
	order := slices.Clone(devices)
	slices.SortStableFunc(order, func(a, b Device) int { return cmp.Compare(b.pref64(), a.pref64()) })
	for _, d := range append([]Device{{}}, order...) {
		if d.Entry != "" {
			left[d.Entry] = true
		}
		root := buildBus(g, devices, left)
		need, align := ovmfRoot(root, size)
		if len(left) == 0 {
			p.Need, p.Align = need, align
		}
		if need == 0 || alignUp(p.Window.Start, align)+need <= p.Window.End && p.Window.End > p.Window.Start {
			break
		}
	}
	p.Assigned, p.Unassigned = split(devices, left)

	// Below 4 GiB (PlatformMemMapInitialization): from the low RAM rounded up to a
	// power-of-two distance from 4 GiB, to the MMCONFIG area at 0xE0000000 (q35) or
	// 0xFC000000.
	uc32 := uint64(fourGiB) - pow2Floor(fourGiB-g.lowMem)
	end := uint64(0xfc000000)
	if g.q35 {
		end = 0xe0000000
	}
	p.Mem32Window = Window{Start: uc32, End: end}
	root := buildBus(g, devices, nil)
	var mem32 []res
	for _, b := range root.bars {
		if !b.Is64Bit || b.Index == romIndex {
			mem32 = append(mem32, res{size: b.Size, align: b.Size})
		}
	}
	for _, k := range root.kids {
		mem32 = append(mem32, ovmfBridge(k, size, false))
	}
	p.Mem32Need, _ = edk2Aperture(mem32, 1)
	return p
}

// ovmfBits is the address width OVMF works with (PlatformAddressWidthFromCpuid): the
// CPU's phys-bits, trusted when guest-phys-bits are set, from 41 up, or at 36 and 39
// on Intel and 40 on AMD; at most guest-phys-bits, 46 under 4-level paging, and 40
// without 1 GiB pages. 0 when it does not trust them.
func ovmfBits(g *guest) int {
	bits := g.physBits
	if g.guestPhysBits == 0 && !trusted(bits, g.vendor) {
		return 0
	}
	if g.guestPhysBits > 0 && bits > g.guestPhysBits {
		bits = g.guestPhysBits
	}
	bits = min(bits, 46)
	if !g.pdpe1gb && bits > 40 {
		bits = 40
	}
	return bits
}

// trusted applies the firmwares' "QEMU quirk": QEMU reports 40 bits by default
// whatever the host has, so 40 and below count only where they are a real CPU's.
func trusted(bits int, vendor string) bool {
	switch {
	case bits >= 41:
		return true
	case vendor == "GenuineIntel":
		return bits == 36 || bits == 39
	case vendor == "AuthenticAMD":
		return bits == 40
	}
	return false
}

// ovmfRoot is the root bridge's 64-bit aperture: OVMF's host bridge combines
// prefetchable and other memory (PciHostBridgeLib, EFI_PCI_HOST_BRIDGE_COMBINE_MEM_PMEM).
func ovmfRoot(root *bus, window uint64) (length, align uint64) {
	var rs []res
	for _, b := range root.bars {
		if b.Is64Bit && b.Index != romIndex {
			rs = append(rs, res{size: b.Size, align: b.Size})
		}
	}
	for _, k := range root.kids {
		rs = append(rs, ovmfBridge(k, window, true))
	}
	return edk2Aperture(rs, 1)
}

// ovmfBridge is a bridge's window in PciBusDxe: its resources one after the other,
// each aligned, rounded up to 1 MiB; a hot-plug bridge at least its padding, which for
// the 64-bit window is 1/256 of the window rounded up to a power of two when the
// window is larger than 32 GiB, and 2 MiB below 4 GiB.
func ovmfBridge(b *bus, window uint64, want64 bool) res {
	var rs []res
	for _, bar := range b.bars {
		if bar.pref64() == want64 {
			rs = append(rs, res{size: bar.Size, align: bar.Size})
		}
	}
	for _, k := range b.kids {
		rs = append(rs, ovmfBridge(k, window, want64))
	}
	length, align := edk2Aperture(rs, edk2BridgeAlign)
	if b.hotplug {
		var padding uint64
		switch {
		case want64 && window > ovmfClassicSize:
			padding = pow2Ceil(window >> 8)
		case !want64:
			padding = 2 * MiB
		}
		length, align = max(length, padding), max(align, padding)
	}
	return res{size: length, align: max(align, edk2BridgeAlign), devices: b.devices}
}

// edk2Aperture is CalculateResourceAperture: the resources in InsertResourceNode's
// order (alignment down; among equals those that fill their alignment first, then the
// larger remainder), each at the next offset its alignment allows; the total rounded
// up to the bridge's own alignment. It returns the length and the largest alignment.
func edk2Aperture(rs []res, own uint64) (length, align uint64) {
	rest := func(r res) uint64 {
		if m := r.size & (r.align - 1); m != 0 {
			return m
		}
		return ^uint64(0)
	}
	slices.SortStableFunc(rs, func(a, b res) int {
		if c := cmp.Compare(b.align, a.align); c != 0 {
			return c
		}
		return cmp.Compare(rest(b), rest(a))
	})
	var off uint64
	for _, r := range rs {
		off = alignUp(off, r.align) + r.size
	}
	align = own
	if len(rs) > 0 {
		align = max(align, rs[0].align)
	}
	return alignUp(off, own), align
}

func sumRes(rs []res) uint64 {
	var s uint64
	for _, r := range rs {
		s += r.size
	}
	return s
}

// firstAlign is the alignment of the first (largest-aligned) resource; 1 for none.
func firstAlign(rs []res) uint64 {
	if len(rs) == 0 {
		return 1
	}
	return rs[0].align
}

func firstAlignSorted(rs []res) uint64 {
	sortRes(rs)
	return firstAlign(rs)
}

func mark(devices []string, ok bool, placed, failed map[string]bool) {
	for _, d := range devices {
		if ok {
			placed[d] = true
		} else {
			failed[d] = true
		}
	}
}

// split lists the devices' entries, placed or not, in the devices' order.
func split(devices []Device, failed map[string]bool) (placed, unplaced []string) {
	placed, unplaced = []string{}, []string{}
	for _, d := range devices {
		if failed[d.Entry] {
			unplaced = append(unplaced, d.Entry)
		} else {
			placed = append(placed, d.Entry)
		}
	}
	return placed, unplaced
}
