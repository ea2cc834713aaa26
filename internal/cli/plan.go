package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/fit"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/split"
)

func newPlan(g *globals) *cobra.Command {
	var d desiredFlags
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show the driver moves that reach the desired split, changing nothing",
		Long: `Show the driver moves that reach the desired split, changing nothing.

The split comes from --vfio (the selected GPUs go to vfio-pci, the others to, or stay on,
their vendor's driver) or from the desired state file (` + plan.DefaultConfig + `, or --config;
gpusplit help split.toml describes it). Devices move by whole IOMMU groups: the companion functions
of a GPU (HDMI audio, USB-C) go with it, a plan that would split a group is refused, and so
is one that would pass through a device nobody selected unless --allow-shared-groups.
When everything is in place the plan is empty and says so.`,
		Example: `  gpusplit --demo plan --vfio numa:1
  gpusplit plan --vfio 0000:81:00.0 --vfio 0000:91:00.0
  gpusplit plan --config split.toml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pl, err := d.plan(g)
			if err != nil {
				return err
			}
			ch, err := pl.Change("apply")
			if err != nil {
				return err
			}
			next := ""
			if !ch.Empty() {
				next = d.next(g)
			}
			models := splitModels(pl)
			if g.json() {
				doc := planJSON(pl.Inv.Root, pl.Plan)
				rep := ch.Parts(next)
				doc.Parts, doc.Models = &rep, models
				return g.writeJSON(doc)
			}
			if err := writeChange(g.stdout, pl, ch, g.width()); err != nil {
				return err
			}
			writeSplitModels(g.stdout, models)
			if next != "" {
				fmt.Fprintf(g.stdout, "\nnext: %s\n", next)
			}
			return nil
		},
	}
	d.register(cmd)
	return cmd
}

// planDoc is plan -o json: the plan's report, and the fits of the groups that name a
// model (absent when none does).
type planDoc struct {
	plan.Report
	// Split is the parts beside the drivers (Proxmox, hookscripts, boot files), the
	// reasons apply would stop and the command that follows.
	*split.Parts
	Models []planModelJSON `json:"models,omitempty"`
}

func planJSON(root string, p *plan.Plan) planDoc { return planDoc{Report: p.Report(root)} }

// writeChange prints the whole change: the drivers' plan with what holds its devices,
// then the other parts and what would stop apply.
func writeChange(w io.Writer, pl *split.Planned, ch *split.Change, width int) error {
	if err := pl.Plan.WriteText(w, pl.Inv.Root, width); err != nil {
		return err
	}
	ch.WriteText(w, width)
	return nil
}

func toText(to string) string { return plan.TargetText(to) }

// planModelJSON is a group's model fit in plan -o json and pve sync -o json.
type planModelJSON = fit.GroupModel

// splitModels is whether each model the split's groups name fits (Planned.Models).
func splitModels(pl *split.Planned) []planModelJSON { return pl.Models(measuredMemory, fitAdvice) }

// writeSplitModels prints splitModels' result after a plan.
func writeSplitModels(w io.Writer, models []planModelJSON) { fit.WriteGroupModels(w, models) }
