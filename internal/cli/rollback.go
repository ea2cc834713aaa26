package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/proc"
)

func newRollback(g *globals) *cobra.Command {
	var c changeFlags
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "Put the devices of the last apply back on the drivers they had",
		Long: `Put every device the last apply moved back on the driver, and driver_override, it
had before, from the journal in ` + bind.JournalPath + `. Like apply, it refuses while a
device it would move is held open, asks before changing anything on a terminal (--yes
skips the question), and --dry-run shows what it would do.`,
		Example: `  sudo gpusplit rollback
  sudo gpusplit rollback --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.host()
			if err != nil {
				return err
			}
			j, err := bind.ReadJournal(h)
			if err != nil {
				return err
			}
			sels, err := g.selectors()
			if err != nil {
				return err
			}
			inv, err := inventory.Build(h, sels)
			if err != nil {
				return err
			}
			k := bind.Sysfs{H: h}
			var todo []bind.Prior
			for _, d := range j.Devices {
				drv, _ := k.Driver(d.Device)
				ov, _ := k.Override(d.Device)
				if drv != d.Driver || ov != d.Override {
					todo = append(todo, d)
				}
			}
			if len(todo) == 0 {
				fmt.Fprintf(g.stdout, "%s: nothing to roll back, the %d devices of the apply of %s are on their prior drivers.\n", h.Root(), len(j.Devices), j.Time.Local().Format("2006-01-02 15:04"))
				return nil
			}
			fmt.Fprintf(g.stdout, "%s: the apply of %s moved %d devices; %d are not back yet:\n", h.Root(), j.Time.Local().Format("2006-01-02 15:04"), len(j.Devices), len(todo))
			for _, d := range todo {
				drv, _ := k.Driver(d.Device)
				fmt.Fprintf(g.stdout, "  %s  %s → %s\n", d.Device, orNone(drv), orNone(d.Driver))
			}
			if c.dryRun {
				fmt.Fprintln(g.stdout, "\ndry run: nothing was changed.")
				return nil
			}
			if !h.Writable() {
				return fmt.Errorf("cannot roll back %s: %w", h.Root(), errSnapshot)
			}
			held := heldDevices(inv, todo)
			if len(held) > 0 {
				return explainHeld(&bind.HeldError{Held: held})
			}
			if err := c.confirm(g, fmt.Sprintf("Restore %d devices?", len(todo))); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			res, err := bind.Rollback(ctx, h, k, &bind.Journal{Time: j.Time, Host: j.Host, Devices: todo}, nil, c.options(g))
			if err != nil {
				return explainFailure(err, res)
			}
			fmt.Fprintf(g.stdout, "restored %d devices.\n", len(res.Restored))
			return nil
		},
	}
	c.register(cmd)
	return cmd
}

// heldDevices are the devices to move that a process holds open.
func heldDevices(inv *inventory.Inventory, devices []bind.Prior) map[pci.Address][]proc.Process {
	want := map[pci.Address]bool{}
	for _, d := range devices {
		want[d.Device] = true
	}
	held := map[pci.Address][]proc.Process{}
	for _, gp := range inv.GPUs {
		if want[gp.Address] && len(gp.Holders) > 0 {
			held[gp.Address] = gp.Holders
		}
	}
	return held
}
