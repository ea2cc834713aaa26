package hook

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// quarantine is what a VM's stop found broken: the GPUs that stay on vfio-pci, with
// their functions and IOMMU groups, and those that went back but that their driver did
// not set up.
type quarantine struct {
	gpus   map[pci.Address][]health.Evidence // every GPU quarantined, with why
	kept   map[pci.Address]bool              // those kept back on vfio-pci
	groups map[int]bool                      // the IOMMU groups of those kept back
}

// keeps reports whether a device stays on vfio-pci with a GPU kept back: the GPU
// itself, its functions, the other members of its IOMMU group.
func (q *quarantine) keeps(device, gpu pci.Address, group int) bool {
	return q.kept[gpu] || q.kept[device] || (group >= 0 && q.groups[group])
}

// checkReturns checks each GPU that the stop is about to give back (a device of the
// journal that is its own GPU, in todo or moved by the pool) before anything moves: one
// whose config space does not answer, that is gone, or whose link is down or narrower
// than at the start is quarantined. What it keeps back is taken out of todo and pool.
func (r *run) checkReturns(j *bind.Journal, todo []bind.Prior, pool *plan.Plan) ([]bind.Prior, *quarantine, error) {
	q := &quarantine{gpus: map[pci.Address][]health.Evidence{}, kept: map[pci.Address]bool{}, groups: map[int]bool{}}
	to := map[pci.Address]string{} // the GPUs about to go back, and where
	for _, d := range todo {
		to[d.Device] = d.Driver
	}
	for _, m := range pool.Moves {
		to[m.Device] = m.To
	}
	for _, d := range j.Devices {
		driver, back := to[d.Device]
		if !back || d.GPU != d.Device {
			continue
		}
		var base health.Baseline
		if d.Link != nil {
			base = *d.Link
		}
		ev := health.CheckReturn(r.c.H, d.Device, base)
		if len(ev) == 0 {
			continue
		}
		if err := r.quarantine(d.Device, driver, base, ev); err != nil {
			return nil, nil, err
		}
		q.gpus[d.Device] = ev
		q.kept[d.Device] = true
		if d.IOMMUGroup >= 0 {
			q.groups[d.IOMMUGroup] = true
		}
	}
	if len(q.kept) == 0 {
		return todo, q, nil
	}
	todo = slices.DeleteFunc(slices.Clone(todo), func(d bind.Prior) bool { return q.keeps(d.Device, d.GPU, d.IOMMUGroup) })
	pool.Moves = slices.DeleteFunc(pool.Moves, func(m plan.Move) bool { return q.keeps(m.Device, m.GPU, m.IOMMUGroup) })
	return todo, q, nil
}

// checkBinds checks each GPU given back once the driver had it and its node was made:
// one that the driver did not take, or whose /dev/nvidiaN is missing, is quarantined
// too, and its containers are not given it.
func (r *run) checkBinds(q *quarantine, back map[pci.Address]string) error {
	for _, a := range slices.SortedFunc(maps.Keys(back), pci.Address.Compare) {
		ev := health.CheckBound(r.c.H, a, back[a])
		if len(ev) == 0 {
			continue
		}
		if err := r.quarantine(a, back[a], health.Baseline{}, ev); err != nil {
			return err
		}
		q.gpus[a] = ev
	}
	return nil
}

// quarantine writes the record of a broken GPU and says so.
func (r *run) quarantine(a pci.Address, driver string, base health.Baseline, ev []health.Evidence) error {
	rec := health.Record{Device: a, GPU: a, Guest: r.vmid, Phase: PostStop, Driver: driver, Time: r.c.Now(), Evidence: ev, Baseline: base}
	for _, e := range ev {
		r.logf("%s QUARANTINED: %s", a, strings.TrimPrefix(e.Text, a.String()+": "))
	}
	if err := health.Quarantine(r.c.H, rec); err != nil {
		return fmt.Errorf("%s is broken, and its quarantine could not be recorded: %w", a, err)
	}
	return nil
}

// err is the phase's error for what it quarantined: nil for none.
func (q *quarantine) err(vmid int) error {
	if q == nil || len(q.gpus) == 0 {
		return nil
	}
	var lines []string
	for _, a := range slices.SortedFunc(maps.Keys(q.gpus), pci.Address.Compare) {
		lines = append(lines, health.Lines(q.gpus[a])...)
		lines = append(lines, fmt.Sprintf("once it is fixed (a reset with no VM using it, or a reboot): gpusplit hook release %s", a))
	}
	return fmt.Errorf("VM %d's stop quarantined %d GPU(s): no container is given them, gpusplit status and gpusplit doctor name them:\n  %s", vmid, len(q.gpus), strings.Join(lines, "\n  "))
}
