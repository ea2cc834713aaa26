package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/metrics"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/split"
)

func newMetrics(g *globals) *cobra.Command {
	var textfile string
	cmd := &cobra.Command{
		Use:   "metrics",
		Short: "Split state, hand-offs and GPU health in Prometheus's text format, for node_exporter",
		Long: `Print what gpusplit knows of the host as Prometheus metrics (text exposition format):
each GPU's address, model, NUMA node, IOMMU group, driver now and driver the desired
split gives it, and what holds it (process, container or VM); each GPU's PCIe link,
now and at most, and its AER error counters and those of the port above it; the drift
of each part of the split (` + plan.DefaultConfig + `, as status reads it); the doctor's
findings by check and severity; each guest's last hand-off through the hookscript
(phase, result, duration, when) and its counts since the boot; the quarantined GPUs;
and how long the collection took. docs/metrics.md lists every metric.

--textfile DIR writes DIR/` + metrics.TextfileName + ` instead, replaced atomically, for
node_exporter's textfile collector (Debian's reads ` + metrics.DefaultTextfileDir + `).
The package's gpusplit-metrics.timer does that every minute once enabled:
systemctl enable --now gpusplit-metrics.timer.

It needs no root: what only root may read (other users' processes, the quarantine and
hand-off records, the kernel log) is left out and counted in gpusplit_collect_left_out,
and what fails is counted in gpusplit_collect_errors and said on standard error; the
metrics are written all the same.`,
		Example: `  gpusplit --demo metrics
  sudo gpusplit metrics --textfile ` + metrics.DefaultTextfileDir + `
  gpusplit --demo metrics | promtool check metrics`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.host()
			if err != nil {
				return err
			}
			sels, err := g.selectors(h)
			if err != nil {
				return err
			}
			set := metrics.Collect(h, metrics.Options{
				Selectors: sels,
				Version:   version(),
				Split: func(h *host.Host) (plan.Desired, *inventory.Inventory, error) {
					pl, err := split.LoadDesired(h, split.Source{Devices: g.devices, Warn: g.warn})
					if err != nil {
						return plan.Desired{}, nil, err
					}
					return pl.Desired, pl.Inv, nil
				},
			})
			g.warn(set.Warnings)
			if textfile != "" {
				if _, err := metrics.WriteTextfile(textfile, set); err != nil {
					return fmt.Errorf("--textfile: %w", err)
				}
				if g.json() {
					return g.writeJSON(set)
				}
				return nil
			}
			if g.json() {
				return g.writeJSON(set)
			}
			return set.WriteText(g.stdout)
		},
	}
	cmd.Flags().StringVar(&textfile, "textfile", "", "write `DIR`/"+metrics.TextfileName+" atomically, for node_exporter's textfile collector, instead of standard output")
	return cmd
}
