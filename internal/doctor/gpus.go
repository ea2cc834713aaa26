package doctor

import (
	"slices"

	"github.com/gpusplit/gpusplit/internal/pci"
)

// A kernel log's lines name devices by address; whether an address is a GPU depends on
// which machine the log is from. The host's own log is read with the host's inventory;
// a log pasted from another machine (--kernel-log) with the log's own enumeration
// ("pci 0000:01:00.0: [10de:2bb1] type 00 class 0x030000"), since the same address can
// be an NVMe drive there.

// gpuDrivers bind GPUs and nothing else: a line they print names a GPU, whatever
// machine the log is from.
var gpuDrivers = []string{"nvidia", "nouveau", "amdgpu", "radeon", "i915", "xe"}

// sharedDrivers bind GPUs and other devices alike, and "pci" is the PCI core's name for a
// device no driver has bound: their lines say nothing either way.
var sharedDrivers = []string{"", "pci", "vfio-pci", "pci-stub", "snd_hda_intel"}

// logFromHost reports whether the log's enumeration agrees with the host's inventory:
// more of the functions it lists are at the host's addresses with the host's ids than
// not. A log that lists none (a pasted excerpt) is taken as the host's. A function the
// host does not have, in the slot of a host's GPU of its vendor, counts neither way: it is
// the GPU's, one that sysfs does not show now (an audio function removed to pass the GPU
// through without it, or one the firmware hides).
func logFromHost(facts *LogFacts, tree *pci.Tree) bool {
	agree, differ := 0, 0
	for addr, en := range facts.Enumerated {
		a, err := pci.ParseAddress(addr)
		d, slot := (*pci.Device)(nil), (*pci.Device)(nil)
		if err == nil {
			d, slot = tree.Lookup(a), tree.Lookup(a.Slot())
		}
		switch {
		case d != nil && d.VendorID == en.Vendor && d.DeviceID == en.ID:
			agree++
		case d == nil && slot != nil && pci.IsDefaultGPU(slot) && slot.VendorID == en.Vendor:
			// a function of the GPU's slot
		default:
			differ++
		}
	}
	return agree >= differ
}

// logGPU reports whether a log line of driver about device names a GPU (a GPU's own
// functions included) or, with group, a device of a GPU's IOMMU group, whose DMA the
// GPU's peers see through the same translation. A function of a GPU's slot (same domain,
// bus and device) is the GPU's: the functions of a PCIe device share one link, which the
// PCI core reports on function 0 alone ("pci 0000:01:00.0: … limited by 2.5 GT/s PCIe x16
// link"), so a log that shows only the GPU's audio function at .1 still names the GPU's
// link at .0.
func (e *Env) logGPU(device, driver string, group bool) bool {
	if slices.Contains(gpuDrivers, driver) {
		return true
	}
	if !slices.Contains(sharedDrivers, driver) {
		return false // nvme, xhci_hcd, ahci…: not a GPU, whatever the address is here
	}
	if e.Log != nil && e.Log.Bound[device] != "" {
		return false // the log shows another driver on it: an NVMe drive there, not the GPU here
	}
	if e.Log != nil && !e.logHost {
		if e.logGPUSlots == nil {
			e.logGPUSlots = map[string]bool{}
			for addr, en := range e.Log.Enumerated {
				if en.IsGPU() {
					e.logGPUSlots[gpuKey(addr)] = true
				}
			}
		}
		return e.logGPUSlots[gpuKey(device)]
	}
	if e.gpuAddrs == nil {
		e.gpuAddrs, e.gpuSlots, e.gpuGroups = map[string]bool{}, map[string]bool{}, map[int]bool{}
		for _, g := range e.Inv.GPUs {
			e.gpuAddrs[g.Address.String()] = true
			e.gpuSlots[g.Address.Slot().String()] = true
			for _, f := range g.Functions {
				e.gpuAddrs[f.Address.String()] = true
			}
			if g.IOMMUGroup >= 0 {
				e.gpuGroups[g.IOMMUGroup] = true
			}
		}
	}
	if e.gpuAddrs[device] {
		return true
	}
	a, err := pci.ParseAddress(device)
	if err != nil {
		return false
	}
	d := e.Inv.Tree.Lookup(a)
	if d == nil && e.gpuSlots[a.Slot().String()] {
		return true // a function of a GPU's slot that sysfs no longer shows
	}
	return group && d != nil && d.IOMMUGroup >= 0 && e.gpuGroups[d.IOMMUGroup]
}
