package cli

import (
	"fmt"

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
drift, listing what is out of place: fit for monitoring and for the boot-time unit.`,
		Example: `  gpusplit status
  gpusplit status --vfio numa:1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pl, err := d.plan(g)
			if err != nil {
				return err
			}
			inv, p := pl.inv, pl.plan
			if g.json() {
				doc := planJSON(inv.Root, p)
				if err := g.writeJSON(struct {
					InSync bool `json:"in_sync"`
					planDoc
				}{p.Empty(), doc}); err != nil {
					return err
				}
			} else if p.Empty() {
				fmt.Fprintf(g.stdout, "%s: in sync, %s.\n", inv.Root, whereTheyBelong(len(p.InPlace), ""))
			} else {
				fmt.Fprintf(g.stdout, "%s: DRIFT, %s:\n", inv.Root, whereTheyBelong(len(p.Moves), "not "))
				for _, m := range p.Moves {
					role := string(m.Role)
					if m.Device != m.GPU {
						role += " of " + m.GPU.String()
					}
					fmt.Fprintf(g.stdout, "  %s (%s): on %s, should be on %s\n", m.Device, role, orNone(m.From), toText(m.To))
				}
				fmt.Fprintln(g.stdout, "gpusplit apply brings them there.")
			}
			if !p.Empty() {
				return &ExitError{Code: ExitDrift}
			}
			return nil
		},
	}
	d.register(cmd)
	return cmd
}
