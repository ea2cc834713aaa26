package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/plan"
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
			doc, err := pl.Status("apply", d.next(g))
			if err != nil {
				return err
			}
			if g.json() {
				if err := g.writeJSON(doc); err != nil {
					return err
				}
			} else {
				doc.WriteText(g.stdout, g.width())
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
