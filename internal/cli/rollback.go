package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/plural"
)

func newRollback(g *globals) *cobra.Command {
	var c changeFlags
	var force bool
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "Put the devices of the last apply back on the drivers they had",
		Long: `Put every device the last apply moved back on the driver, and driver_override, it
had before, from the journal in ` + bind.JournalPath + `. Like apply, it runs only on the
host itself, refuses while a device it would move is held open, asks before changing
anything on a terminal (--yes skips the question), and --dry-run shows what it would do.

The journal says which host and which boot it is of, and which card each device was.
Before the first change rollback refuses, naming each field with the journal's value
and the host's: a journal of another host (host name or machine id), of an earlier boot
(after a reboot the drivers are what the boot made of them: gpusplit status and
gpusplit apply are the way), a device whose vendor:device or class changed (another card
in that slot) or that is gone, a journal older than these fields, and a device that is
neither a GPU (as --devices selects them, so give the --devices of the apply) nor a
function or IOMMU group member of one. --force sets aside only where and when the
journal was written (host name, machine id, boot, a journal older than these fields)
and a device that is gone. Nothing sets aside what the journal says of a device it
would touch: a driver name that is not a driver of this host, a vendor:device or class
that is not the device's now, or a device that is not a GPU or of a GPU's group.`,
		Example: `  sudo gpusplit rollback --dry-run
  sudo gpusplit rollback --yes
  sudo gpusplit --devices 8086:10d3 rollback`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.check(); err != nil {
				return err
			}
			if !c.dryRun {
				if err := needRoot(g, "rollback", "it rebinds PCI devices through /sys"); err != nil {
					return err
				}
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			j, err := bind.ReadJournal(h)
			if errors.Is(err, bind.ErrNoJournal) {
				// Nothing was applied: the host is as a rollback would leave it.
				if g.json() {
					return g.writeJSON(bind.NoRollbackReport(h.Root(), c.dryRun))
				}
				fmt.Fprintf(g.stdout, "%s: nothing to roll back: no apply left a journal (%s).\n", h.Root(), bind.JournalPath)
				return nil
			}
			if err != nil {
				return err
			}
			sels, err := g.selectors(h)
			if err != nil {
				return err
			}
			inv, err := inventory.Build(h, sels)
			if err != nil {
				return err
			}
			k, kerr := openKernel(h)
			if kerr != nil {
				if !c.dryRun {
					return fmt.Errorf("nothing was changed: %w", kerr)
				}
				// A dry run only reads, which a copy allows; it says what a real run would meet.
				fmt.Fprintf(g.stderr, "note: without --dry-run this is refused: %v\n", kerr)
				k = bind.Sysfs{H: h}
			}
			scope := bind.Scope{Movable: bind.Movable(inv), Force: force}
			forcedProblems, cerr := bind.CheckJournal(h, k, j, scope)
			var forced []string
			for _, p := range forcedProblems {
				forced = append(forced, journalProblem(p))
				fmt.Fprintf(g.stderr, "warning: --force: %s\n", journalProblem(p))
			}
			cerr = flagWays(cerr)
			if cerr != nil && !c.dryRun && !g.json() {
				return cerr
			}
			todo := bind.NotBack(k, j.Devices)
			when := j.Time.Local().Format("2006-01-02 15:04")
			doc := bind.NewRollbackReport(h.Root(), j, k, todo, forced, c.dryRun)
			// report ends a run that reached a result: with -o json it prints the
			// document, with what stopped the run among its problems.
			report := func(err error) error {
				if !g.json() {
					return err
				}
				if d := details(err); len(d) > 0 {
					doc.Problems = append(doc.Problems, d...)
				} else if err != nil {
					doc.Problems = append(doc.Problems, err.Error())
				}
				if jerr := g.writeJSON(doc); jerr != nil {
					return jerr
				}
				return err
			}
			if len(todo) == 0 {
				if cerr != nil || g.json() {
					return report(cerr)
				}
				fmt.Fprintf(g.stdout, "%s: nothing to roll back, the %d devices of the apply of %s are on their prior drivers.\n", h.Root(), len(j.Devices), when)
				return nil
			}
			if !g.json() {
				fmt.Fprintf(g.stdout, "%s: the apply of %s moved %d devices; %d are not back yet (now → before the apply):\n", h.Root(), when, len(j.Devices), len(todo))
				doc.WriteDevices(g.stdout)
			}
			if cerr != nil {
				return report(cerr)
			}
			if c.dryRun {
				if g.json() {
					return report(nil)
				}
				fmt.Fprintln(g.stdout, "\ndry run: nothing was changed.")
				return nil
			}
			held := bind.HeldDevices(inv, todo)
			if len(held) > 0 {
				return bind.ExplainHeld(&bind.HeldError{Held: held})
			}
			if err := c.proceed(g, fmt.Sprintf("Restore %s?", plural.S(len(todo), "device"))); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			// Locks first, then the journal, the drivers and the holders read again:
			// another apply or a guest's hook may have run during the question.
			lock, err := bind.TakeLock(h, lockWait)
			if err != nil {
				return report(err)
			}
			defer lock.Unlock()
			res, err := bind.RollbackShown(ctx, lock, h, k, j, todo, sels, scope, c.options(g))
			var stale *bind.StaleError
			if errors.As(err, &stale) {
				err = fmt.Errorf("%w; run gpusplit rollback again", err)
			}
			err = flagWays(err)
			if res != nil {
				for _, a := range res.Restored {
					doc.Restored = append(doc.Restored, a.String())
				}
			}
			if err != nil {
				return report(err)
			}
			if g.json() {
				return report(nil)
			}
			fmt.Fprintf(g.stdout, "restored %s.\n", plural.S(len(res.Restored), "device"))
			return nil
		},
	}
	c.register(cmd)
	cmd.Flags().BoolVar(&force, "force", false, "roll back a journal of another host name, machine or boot, or with a device gone (never a bad driver name, a device whose ids changed, or one that is not a GPU or of a GPU's group)")
	return cmd
}
