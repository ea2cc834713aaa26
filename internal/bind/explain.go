package bind

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/plural"
)

// Movable are the devices apply moves, as the host shows them now: the GPUs, their
// companion functions, and the endpoints of the IOMMU groups of both (bridges never move).
func Movable(inv *inventory.Inventory) map[pci.Address]bool {
	out := map[pci.Address]bool{}
	addGroup := func(d *pci.Device) {
		out[d.Address] = true
		if d.IOMMUGroup < 0 {
			return
		}
		for _, m := range inv.Tree.Group(d.IOMMUGroup) {
			if !m.IsBridge() {
				out[m.Address] = true
			}
		}
	}
	for _, gp := range inv.GPUs {
		addGroup(gp.Device)
		for _, f := range gp.Functions {
			addGroup(f)
		}
	}
	return out
}

// HeldDevices are the devices to move that something uses (package holders).
func HeldDevices(inv *inventory.Inventory, devices []Prior) map[pci.Address][]holders.Holder {
	held := map[pci.Address][]holders.Holder{}
	for _, d := range devices {
		if hs := inv.HoldersOf(d.Device); len(hs) > 0 {
			held[d.Device] = hs
		}
	}
	return held
}

// ReleaseLines names each holder not yet seen with the way to release it: a process,
// mount or guest holding several devices is one line.
func ReleaseLines(hs []holders.Holder, seen map[string]bool) []string {
	var lines []string
	for _, h := range hs {
		if !seen[h.Key()] {
			seen[h.Key()] = true
			lines = append(lines, fmt.Sprintf("  %s: %s", h.Short(), h.Release))
		}
	}
	return lines
}

// ExplainHeld adds to a refusal for held devices how to release each holder.
func ExplainHeld(err error) error {
	var held *HeldError
	if !errors.As(err, &held) {
		return err
	}
	var lines []string
	seen := map[string]bool{}
	for _, a := range slices.SortedFunc(maps.Keys(held.Held), pci.Address.Compare) {
		lines = append(lines, ReleaseLines(held.Held[a], seen)...)
	}
	return fmt.Errorf("%w\nrelease them, then run again:\n%s", err, strings.Join(lines, "\n"))
}

// ExplainFailure says, after a failed run, what was put back and what was not.
func ExplainFailure(err error, res *Result) error {
	if res == nil || (len(res.Restored) == 0 && len(res.Unrestored) == 0) {
		return err
	}
	msg := fmt.Sprintf("%v\nrestored %s to their prior drivers", err, plural.S(len(res.Restored), "device"))
	for _, a := range slices.SortedFunc(maps.Keys(res.Unrestored), pci.Address.Compare) {
		msg += fmt.Sprintf("\nNOT restored: %s: %v", a, res.Unrestored[a])
	}
	return errors.New(msg)
}

// Quarantined refuses a plan that would hand a quarantined device (package health: a
// GPU a VM's stop found broken, its functions and group) to a driver: it stays on
// vfio-pci, or with no driver, until gpusplit hook release lets it go. Moves to
// vfio-pci or to no driver are allowed.
func Quarantined(h *host.Host, p *plan.Plan) error {
	recs, err := health.List(h)
	if err != nil {
		return fmt.Errorf("nothing was changed: the quarantine cannot be read: %w", err)
	}
	if len(recs) == 0 {
		return nil
	}
	broken := map[pci.Address]health.Record{}
	for _, r := range recs {
		broken[r.Device], broken[r.GPU] = r, r
	}
	var lines []string
	for _, m := range p.Moves {
		r, ok := broken[m.GPU]
		if !ok {
			r, ok = broken[m.Device]
		}
		if !ok || m.To == plan.VFIO || m.To == plan.None {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: GPU %s is quarantined (%s); check it, then gpusplit hook release %s", m.Device, r.GPU, quarantineWhy(r), r.GPU))
	}
	if len(lines) > 0 {
		return fmt.Errorf("nothing was changed: the plan would hand quarantined devices to a driver:\n  %s", strings.Join(lines, "\n  "))
	}
	return nil
}

// quarantineWhy says in a few words what found a device broken.
func quarantineWhy(r health.Record) string {
	switch {
	case r.Damaged != "":
		return "its record is damaged: " + r.Damaged
	case len(r.Evidence) > 0:
		return fmt.Sprintf("the %s of VM %d found: %s", r.Phase, r.Guest, r.Evidence[0].Text)
	}
	return fmt.Sprintf("the %s of VM %d found it broken", r.Phase, r.Guest)
}

// Back reports whether a device is on the driver and driver_override it had before the
// run that journaled it.
func (p Prior) Back(k Kernel) bool {
	drv, _ := k.Driver(p.Device)
	ov, _ := k.Override(p.Device)
	return drv == p.Driver && ov == p.Override
}

// NotBack are the devices of a journal not yet back where they were.
func NotBack(k Kernel, devices []Prior) []Prior {
	var out []Prior
	for _, d := range devices {
		if !d.Back(k) {
			out = append(out, d)
		}
	}
	return out
}
