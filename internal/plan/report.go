package plan

import (
	"slices"

	"github.com/gpusplit/gpusplit/internal/inventory"
)

// Report is the JSON form of a plan: actions[] with device, from, to (docs/json.md).
type Report struct {
	Host     string         `json:"host"`
	Empty    bool           `json:"empty"`
	Actions  []ActionReport `json:"actions"`
	InPlace  []ActionReport `json:"in_place"`
	Warnings []string       `json:"warnings"`
}

// ActionReport is a Move's JSON form.
type ActionReport struct {
	Device     string                   `json:"device"`
	Name       string                   `json:"name"`
	Role       string                   `json:"role"`
	GPU        string                   `json:"gpu"`
	Group      string                   `json:"group"`
	IOMMUGroup int                      `json:"iommu_group"`
	NUMANode   int                      `json:"numa_node"`
	From       string                   `json:"from"`
	To         string                   `json:"to"`
	Holders    []inventory.HolderReport `json:"holders"`
	// HeldBy is the running VM that holds a pool's device, for which it belongs on
	// vfio-pci; absent otherwise.
	HeldBy int `json:"held_by,omitempty"`
}

// Report is the plan's JSON form, for the host at root.
func (p *Plan) Report(root string) Report {
	r := Report{Host: root, Empty: p.Empty(), Actions: []ActionReport{}, InPlace: []ActionReport{}, Warnings: append([]string{}, p.Warnings...)}
	conv := func(m Move) ActionReport {
		return ActionReport{
			Device: m.Device.String(), Name: m.Name, Role: string(m.Role), GPU: m.GPU.String(), Group: m.Target,
			IOMMUGroup: m.IOMMUGroup, NUMANode: m.NUMANode, From: m.From, To: m.To, Holders: inventory.HolderReports(m.Holders),
			HeldBy: m.HeldBy,
		}
	}
	for _, m := range p.Moves {
		r.Actions = append(r.Actions, conv(m))
	}
	for _, m := range p.InPlace {
		r.InPlace = append(r.InPlace, conv(m))
	}
	return r
}

// PoolReport is a pool of the desired state as status sees it: each GPU with the
// driver it is on and the running VM that holds it.
type PoolReport struct {
	Name    string          `json:"name"`
	Resting string          `json:"resting"` // "" is the vendor's driver
	GPUs    []PoolGPUReport `json:"gpus"`
}

// PoolGPUReport is a GPU of a pool.
type PoolGPUReport struct {
	Device string `json:"device"`
	Driver string `json:"driver"`  // "" when unbound
	HeldBy int    `json:"held_by"` // 0 when no VM holds it
	// InPlace: on the resting driver, or on vfio-pci while held.
	InPlace bool `json:"in_place"`
}

// Pools lists d's pools, in the file's order, with their GPUs as p finds them.
func (p *Plan) Pools(d Desired) []PoolReport {
	out := []PoolReport{}
	moves := append(slices.Clone(p.Moves), p.InPlace...)
	slices.SortFunc(moves, func(a, b Move) int { return a.Device.Compare(b.Device) })
	for _, t := range d.Targets {
		if !t.Pool {
			continue
		}
		pj := PoolReport{Name: t.Name, Resting: t.Driver, GPUs: []PoolGPUReport{}}
		for _, m := range moves {
			if m.Role == RoleGPU && m.Target == t.Name {
				pj.GPUs = append(pj.GPUs, PoolGPUReport{Device: m.Device.String(), Driver: m.From, HeldBy: m.HeldBy, InPlace: m.Done()})
			}
		}
		out = append(out, pj)
	}
	return out
}
