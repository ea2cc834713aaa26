package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/split"
)

// statusDoc is status -o json: the drivers' status, and the other parts' drift.
type statusDoc struct {
	*health.StatusReport
	*split.Parts
}

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
			inv, p := pl.Inv, pl.Plan
			pools := pl.Plan.Pools(pl.Desired)
			// A GPU that came back broken from a VM is kept from its driver and its
			// containers until released: the host is not where it belongs.
			quarantined, err := health.List(pl.H)
			var warnings []string
			if err != nil {
				quarantined = []health.Record{}
				warnings = append(warnings, fmt.Sprintf("quarantined GPUs cannot be seen: %v (the records are root's)", err))
				g.warn(warnings)
			}
			ch, err := pl.Change("apply")
			if err != nil {
				return err
			}
			doc := statusDoc{StatusReport: health.NewStatusReport(inv.Root, p, pools, quarantined)}
			doc.Warnings = append(doc.Warnings, warnings...)
			others := ch.Drift()
			if len(others) > 0 && len(p.Moves) > 0 {
				others = others[1:] // the drivers', which the status report has
			}
			next := ""
			if len(others) > 0 || !doc.InSync {
				doc.InSync, next = false, d.next(g)
			}
			parts := ch.Parts(next)
			doc.Parts = &parts
			if g.json() {
				if err := g.writeJSON(doc); err != nil {
					return err
				}
			} else {
				if len(others) > 0 && p.Empty() && len(quarantined) == 0 {
					fmt.Fprintf(g.stdout, "%s: DRIFT: the drivers are as the split asks, the rest is not:\n", inv.Root)
					plan.WritePools(g.stdout, doc.Pools)
				} else {
					doc.WriteText(g.stdout, p)
				}
				if doc.InSync {
					ch.WriteInSync(g.stdout)
				}
				ch.WriteDrift(g.stdout, g.width())
				if next != "" {
					fmt.Fprintf(g.stdout, "\nnext: %s\n", next)
				}
			}
			if !doc.InSync {
				return &ExitError{Code: ExitDrift}
			}
			return nil
		},
	}
	d.register(cmd)
	return cmd
}
