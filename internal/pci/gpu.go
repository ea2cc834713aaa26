package pci

import "slices"

// GPU vendors whose display-class devices count as GPUs by default. A BMC's VGA
// (ASPEED 1a03, Matrox 102b) is display class too, and must never be moved.
const (
	VendorNVIDIA = 0x10de
	VendorAMD    = 0x1002
)

// GPU is a device that counts as a GPU, with the other functions of its slot
// (HDMI audio, USB-C controller), which must move with it.
type GPU struct {
	*Device
	Functions []*Device
}

// Choose applies selectors the way --devices does: naming selectors (an address, a
// slot, a GPU number, vendor:device, class:, mapping:) pick among pool, and without any
// the choice is defaults; then narrowing selectors keep part of it. GPU numbers count
// defaults in address order, which is how inventory and topo number the GPUs they show:
// so for GPUs the numbers are those of the host's GPUs as chosen without --devices, and
// for plan (whose pool and defaults are the inventory's GPUs) those of the table that
// the same --devices prints. Selectors of one kind add up (numa:0,numa:1 is both
// nodes); kinds narrow in turn, count: last, since it packs what the others left. The
// nouns name pool and the choice in errors.
func Choose(pool, defaults []*Device, sels []Selector, poolNoun, noun string) ([]*Device, error) {
	var naming []Selector
	narrowing := map[selectorKind][]Selector{}
	for _, s := range sels {
		if s.Narrows() {
			narrowing[s.kind] = append(narrowing[s.kind], s)
		} else {
			naming = append(naming, s)
		}
	}
	picked := defaults
	if len(naming) > 0 {
		var err error
		if picked, err = selectFrom(pool, defaults, naming, poolNoun); err != nil {
			return nil, err
		}
	}
	for _, kind := range []selectorKind{byNUMA, byGroup, byCount} {
		if len(narrowing[kind]) == 0 {
			continue
		}
		var err error
		if picked, err = Select(picked, narrowing[kind], noun); err != nil {
			return nil, err
		}
	}
	return picked, nil
}

// IsDefaultGPU reports whether d counts as a GPU when the user names no selector:
// an NVIDIA or AMD display controller that is not an SR-IOV virtual function.
func IsDefaultGPU(d *Device) bool {
	return d.IsDisplay() && (d.VendorID == VendorNVIDIA || d.VendorID == VendorAMD) && d.PhysFn == nil
}

// GPUs returns the devices that count as GPUs, with their companion functions.
// Selectors that name devices (an address, a slot, vendor:device, class:, mapping:)
// pick among all the devices of the tree, a GPU number among the default GPUs (see
// Choose); without any, the default rule applies (IsDefaultGPU). Selectors
// that narrow (numa:, group:, then count:) keep part of that choice. So "numa:1" is the
// GPUs on NUMA node 1, and "8086:10d3,numa:0" the 8086:10d3 devices on node 0.
// No selector at all, and a host without GPUs, give an empty result, not an error.
func GPUs(t *Tree, sels []Selector) ([]GPU, error) {
	var defaults []*Device
	for _, d := range t.Devices {
		if IsDefaultGPU(d) {
			defaults = append(defaults, d)
		}
	}
	picked, err := Choose(t.Devices, defaults, sels, "PCI device", "GPU")
	if err != nil {
		return nil, err
	}
	isGPU := map[Address]bool{}
	for _, d := range picked {
		isGPU[d.Address] = true
	}
	out := make([]GPU, 0, len(picked))
	for _, d := range picked {
		g := GPU{Device: d}
		for _, f := range t.Slot(d.Address) {
			// An SR-IOV virtual function shares the slot but is a device of its own.
			if !isGPU[f.Address] && f.PhysFn == nil {
				g.Functions = append(g.Functions, f)
			}
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(x, y GPU) int { return x.Address.Compare(y.Address) })
	return out, nil
}
