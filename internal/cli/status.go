package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/plural"
)

// ExitDrift is status's exit code when the host is not in the desired state.
const ExitDrift = 3

func newStatus(g *globals) *cobra.Command {
	var d desiredFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Compare the desired split with the drivers now bound: exit 0 in sync, 3 on drift",
		Long: `Compare the desired split (` + plan.DefaultConfig + `, --config or --vfio, as for plan)
with the drivers bound now. It exits 0 when every device is where it belongs, and 3 on
drift, listing what is out of place: fit for monitoring and for the boot-time unit.

A pool's GPUs belong on their resting driver, or on vfio-pci while a running VM holds
them (qemu-server's reservations); status lists each pool's GPUs with the VM that holds
each.

A GPU that a VM's stop found broken (config space reading ffff, a link down) is
quarantined: kept from its driver and its containers until gpusplit hook release.
Status lists each with its evidence, and a quarantined GPU is drift (exit 3).`,
		Example: `  gpusplit status
  gpusplit status --vfio numa:1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pl, err := d.plan(g)
			if err != nil {
				return err
			}
			inv, p := pl.inv, pl.plan
			pools := pl.plan.Pools(pl.desired)
			// A GPU that came back broken from a VM is kept from its driver and its
			// containers until released: the host is not where it belongs.
			quarantined, err := health.List(pl.h)
			var warnings []string
			if err != nil {
				quarantined = []health.Record{}
				warnings = append(warnings, fmt.Sprintf("quarantined GPUs cannot be seen: %v (the records are root's)", err))
				g.warn(warnings)
			}
			inSync := p.Empty() && len(quarantined) == 0
			if g.json() {
				doc := planJSON(inv.Root, p)
				doc.Warnings = append(doc.Warnings, warnings...)
				if err := g.writeJSON(struct {
					InSync bool `json:"in_sync"`
					planDoc
					Pools       []plan.PoolReport `json:"pools"`
					Quarantined []health.Record   `json:"quarantined"`
				}{inSync, doc, pools, quarantined}); err != nil {
					return err
				}
			} else {
				writeStatus(g.stdout, inv.Root, p, quarantined)
				writePools(g.stdout, pools)
			}
			if !inSync {
				return &ExitError{Code: ExitDrift}
			}
			return nil
		},
	}
	d.register(cmd)
	return cmd
}

// writeStatus writes the table: in sync, or each device out of place, and the
// quarantined GPUs with what found them broken.
func writeStatus(w io.Writer, root string, p *plan.Plan, quarantined []health.Record) {
	held := map[pci.Address]bool{}
	for _, r := range quarantined {
		held[r.Device], held[r.GPU] = true, true
	}
	switch {
	case p.Empty() && len(quarantined) == 0:
		fmt.Fprintf(w, "%s: in sync, %s.\n", root, plan.WhereTheyBelong(len(p.InPlace), ""))
	case p.Empty():
		fmt.Fprintf(w, "%s: NOT IN SYNC, %s quarantined; otherwise %s.\n", root, plural.N(len(quarantined), "device is", "devices are"), plan.WhereTheyBelong(len(p.InPlace), ""))
	default:
		fmt.Fprintf(w, "%s: DRIFT, %s:\n", root, plan.WhereTheyBelong(len(p.Moves), "not "))
		var free, kept int
		for _, m := range p.Moves {
			role := string(m.Role)
			if m.Device != m.GPU {
				role += " of " + m.GPU.String()
			}
			note := ""
			if held[m.Device] || held[m.GPU] {
				note, kept = ", quarantined", kept+1
			} else {
				free++
			}
			fmt.Fprintf(w, "  %s (%s): on %s, should be on %s%s\n", m.Device, role, orNone(m.From), toText(m.To), note)
		}
		if free > 0 {
			fmt.Fprintln(w, "gpusplit apply brings them there.")
		}
		if kept > 0 {
			fmt.Fprintln(w, "A quarantined GPU moves once released (below).")
		}
	}
	if len(quarantined) == 0 {
		return
	}
	fmt.Fprintf(w, "quarantined, kept from every driver and container (gpusplit doctor says what to check):\n")
	for _, r := range quarantined {
		if r.Damaged != "" {
			fmt.Fprintf(w, "  %s  its record is damaged: %s\n", r.Device, r.Damaged)
		} else {
			gpu := ""
			if r.GPU != r.Device {
				gpu = " (of GPU " + r.GPU.String() + ")"
			}
			fmt.Fprintf(w, "  %s%s  found broken by the %s of VM %d at %s:\n", r.Device, gpu, r.Phase, r.Guest, r.Time.Format("2006-01-02 15:04:05 MST"))
			for _, l := range health.Lines(r.Evidence) {
				fmt.Fprintf(w, "      %s\n", l)
			}
		}
		fmt.Fprintf(w, "    once it works again: gpusplit hook release %s\n", r.Device)
	}
}

func writePools(w io.Writer, pools []plan.PoolReport) {
	for _, pj := range pools {
		resting := pj.Resting
		if resting == "" {
			resting = "its vendor's driver"
		}
		fmt.Fprintf(w, "pool %s (rests on %s):\n", pj.Name, resting)
		for _, gp := range pj.GPUs {
			var state string
			switch {
			case gp.HeldBy != 0:
				state = fmt.Sprintf("held by VM %d", gp.HeldBy)
			case gp.InPlace:
				state = "at rest"
			default:
				state = "no VM holds it: it belongs on " + resting
			}
			fmt.Fprintf(w, "  %s  on %s, %s\n", gp.Device, orNone(gp.Driver), state)
		}
	}
}
