package pve

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// The mapping-wide flags a new mapping takes from the mappings its GPUs come from.
const (
	// FlagMdev marks a mapping whose devices offer mediated devices or NVIDIA's vGPU.
	// Proxmox compares it with the hardware at every start of a VM that uses the mapping
	// (PVE::Mapping::PCI::assert_valid against pci_device_info's mdev: a device with
	// mdev_supported_types/ or nvidia/ in sysfs), both ways: a mapping that says 1 of a
	// device that offers none, or 0 of one that does, keeps the VM from starting.
	FlagMdev = "mdev"
	// FlagLiveMigration makes qemu-server give each of the mapping's devices
	// enable-migration=on (PVE::QemuServer::PCI). QEMU then refuses to start the VM when
	// the device's kernel driver has no VFIO migration ("VFIO migration is not supported
	// in kernel", vfio_migration_realize), as plain vfio-pci has none.
	FlagLiveMigration = "live-migration-capable"
)

// inherited are the flags a mapping that sync creates (id, holding gpus on this node)
// keeps from the mappings those GPUs are in now (heldIn), where they still hold once
// the split is done: the value all of them agree on, checked against the GPUs' end
// state. A flag that no longer holds is left out, with a note saying why.
func (s *syncer) inherited(f *MappingFile, id string, gpus []pci.Address, heldIn map[pci.Address][]string) map[string]string {
	var sources []*Mapping
	for _, a := range gpus {
		for _, src := range heldIn[a] {
			if m := f.Mapping(src); m != nil && !slices.Contains(sources, m) {
				sources = append(sources, m)
			}
		}
	}
	out := map[string]string{}
	for _, flag := range []string{FlagLiveMigration, FlagMdev} {
		v, ok := agreed(sources, flag)
		if !ok {
			continue
		}
		from := mappingIDs(sources)
		if why := s.flagFails(flag, v, gpus); why != "" {
			s.notes = append(s.notes, fmt.Sprintf("mapping %s: %s %s of %s is left out: %s", id, flag, v, from, why))
			continue
		}
		out[flag] = v
	}
	return out
}

// agreed is the value of a flag that every source sets alike; false when none sets it,
// or when they differ (the new mapping cannot be both).
func agreed(sources []*Mapping, flag string) (string, bool) {
	v := ""
	for _, m := range sources {
		w, ok := m.Props[flag]
		if !ok || (v != "" && w != v) {
			return "", false
		}
		v = w
	}
	return v, v != ""
}

func mappingIDs(ms []*Mapping) string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, ", ")
}

// flagFails says why a flag's value would not hold for the GPUs once the split is done;
// "" when it holds.
func (s *syncer) flagFails(flag, v string, gpus []pci.Address) string {
	for _, a := range gpus {
		sd := s.side[a]
		switch flag {
		case FlagLiveMigration:
			if v == "1" && onVFIO(sd.Driver) {
				return fmt.Sprintf("%s ends on vfio-pci, which has no VFIO migration: QEMU would refuse to start a VM given enable-migration=on", a)
			}
		case FlagMdev:
			offers, known := s.offersMdev(sd)
			switch {
			case !known:
				return fmt.Sprintf("whether %s offers mediated devices on %s is known only once it is there; set mdev on the mapping then if it does", a, plan.DriverText(sd.Driver))
			case offers != (v == "1"):
				return fmt.Sprintf("%s will offer %s on %s, and Proxmox refuses to start a VM whose mapping says otherwise", a, map[bool]string{true: "mediated devices", false: "no mediated devices"}[offers], plan.DriverText(sd.Driver))
			}
		}
	}
	return ""
}

// offersMdev says whether a GPU offers mediated devices once the split is done, as
// Proxmox's pci_device_info sees it: an mdev_supported_types/ directory (a classic mdev
// parent) or nvidia/ (NVIDIA's vGPU manager on kernels since 6.8). Both are its driver's,
// so a GPU that stays on its driver keeps what sysfs shows now, one that goes to vfio-pci
// offers none, and of one that goes to another driver nothing is known yet.
func (s *syncer) offersMdev(sd Side) (offers, known bool) {
	g := sd.GPU
	switch {
	case sd.Driver == g.Driver:
		return s.h.IsDir(g.Path+"/mdev_supported_types") || s.h.IsDir(g.Path+"/nvidia"), true
	case onVFIO(sd.Driver):
		return false, true
	}
	return false, false
}
