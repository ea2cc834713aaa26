package pve

import (
	"fmt"
	"slices"

	"github.com/gpusplit/gpusplit/internal/addrspace"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// passedGPU is what one hostpci entry of a VM passes after the sync: a GPU by its
// address, or one of a mapping's.
type passedGPU struct {
	entry      string
	mapping    string
	candidates []pci.Address
}

// syncAddressSpace plans the VM's address space for the GPUs it is given
// (internal/addrspace) and writes what the plan needs into its cpu and args options.
// A host whose CPU cannot give the width is a refusal, with the way out.
func (s *syncer) syncAddressSpace(g *Guest, passed []passedGPU, c *Change) {
	devices := s.passedDevices(passed)
	if len(devices) == 0 {
		return
	}
	cpu, err := addrspace.ReadHostCPU(s.h)
	if err != nil {
		c.Notes = append(c.Notes, fmt.Sprintf("VM %d: its address space is not planned: %v", g.ID, err))
		return
	}
	r, err := addrspace.Plan(g.String(), devices, cpu)
	if err != nil {
		c.Notes = append(c.Notes, fmt.Sprintf("VM %d: its address space is not planned: %v", g.ID, err))
		return
	}
	for _, n := range r.Notes {
		c.Notes = append(c.Notes, fmt.Sprintf("VM %d: %s", g.ID, n))
	}
	switch r.Outcome {
	case addrspace.NeedsSettings, addrspace.NeedsRealloc:
		if r.CPU != "" {
			g.Set("cpu", r.CPU)
		}
		if r.Args != "" {
			g.Set("args", r.Args)
		}
		for _, st := range r.Settings {
			c.Notes = append(c.Notes, fmt.Sprintf("VM %d: %s", g.ID, st))
		}
		if r.Planned != nil {
			c.Notes = append(c.Notes, fmt.Sprintf("VM %d: with that, %s places the 64-bit BARs of all %d GPUs (the guest's address space: docs/vm-topology.md)", g.ID, firmware(r.Firmware), len(r.Planned.Assigned)))
		}
	case addrspace.Refused:
		for _, p := range r.Problems {
			c.Refusals = append(c.Refusals, fmt.Sprintf("VM %d: %s", g.ID, p))
		}
	}
}

func firmware(bios string) string {
	if bios == "ovmf" {
		return "OVMF"
	}
	return "SeaBIOS"
}

// passedDevices picks, for each entry, the GPU it passes: its address, or for the
// n-th entry on a mapping the mapping's n-th GPU of this node (qemu-server takes the
// first free ones; the GPUs of a mapping are alike). A GPU with other functions in its
// slot passes them too, as the slot paths sync writes into mappings do.
func (s *syncer) passedDevices(passed []passedGPU) []addrspace.Device {
	var out []addrspace.Device
	nth := map[string]int{}
	for _, p := range passed {
		if len(p.candidates) == 0 {
			continue
		}
		i := 0
		if p.mapping != "" {
			i = min(nth[p.mapping], len(p.candidates)-1)
			nth[p.mapping]++
		}
		sd, ok := s.side[p.candidates[i]]
		if !ok || sd.GPU == nil {
			continue
		}
		fns := append([]*pci.Device{sd.GPU.Device}, sd.GPU.Functions...)
		out = append(out, addrspace.DeviceOf(s.h, p.entry, slices.Clip(fns)...))
	}
	return out
}
