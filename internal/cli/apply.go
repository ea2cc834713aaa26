package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/split"
)

// changeFlags are the flags of the commands that change bindings: apply and rollback.
type changeFlags struct {
	writeFlags
	parallel      int
	unbindTimeout time.Duration
}

func (c *changeFlags) register(cmd *cobra.Command) {
	c.writeFlags.register(cmd)
	f := cmd.Flags()
	f.IntVar(&c.parallel, "parallel", 4, "how many IOMMU groups to move at once")
	f.DurationVar(&c.unbindTimeout, "unbind-timeout", 15*time.Second, "give up on an unbind that does not return (the device is in use) after this long")
}

func (c *changeFlags) options(g *globals) bind.Options {
	return bind.Options{UnbindTimeout: c.unbindTimeout, Parallel: c.parallel, Progress: progress(g)}
}

// progress prints each device's steps to standard error as they happen.
func progress(g *globals) func(bind.Event) {
	var mu sync.Mutex
	return func(e bind.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Step {
		case bind.StepDone:
			fmt.Fprintf(g.stderr, "  %s  %s → %s  ok (%.2f s)\n", e.Device, orNone(e.From), toText(e.To), e.Elapsed.Seconds())
		case bind.StepFailed:
			fmt.Fprintf(g.stderr, "  %s  %s → %s  FAILED: %v\n", e.Device, orNone(e.From), toText(e.To), e.Err)
		case bind.StepRestored:
			fmt.Fprintf(g.stderr, "  %s  restored to %s\n", e.Device, orNone(e.To))
		}
	}
}

// signalContext is cancelled by Ctrl-C: no new device starts moving, and what moved is
// put back.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

func newApply(g *globals) *cobra.Command {
	var d desiredFlags
	var c changeFlags
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Move the GPUs to their drivers: checks, journal, verification, rollback on failure",
		Long: `Carry out the plan (see gpusplit plan): move each device by PCI address with
driver_override, unbind and drivers_probe, never new_id or vfio-pci.ids, so identical
GPUs are told apart.

Before the first change it refuses, changing nothing, when a device to move is in use (a
process holds it open, a file system on it is mounted, swap, LVM, md or ZFS is on it, its
network interface is up, a running VM or container is given it: each is named with the way
to release it), when a target driver is neither loaded nor loadable, or when another
gpusplit is running. It writes a journal of
the prior state to ` + bind.JournalPath + ` (gpusplit rollback undoes the apply), loads the
modules it needs, moves independent IOMMU groups at once, gives up on an unbind that does
not return, verifies each device (its driver, and /dev/vfio/<group> for vfio-pci), and if
any step fails puts back every device it changed and says so.

On a terminal it asks before changing anything; --yes skips the question and is needed
without a terminal.

It runs only on a live kernel (no --root, or a root whose /sys and /proc are the
kernel's own mounts): under --root of a directory copy or a snapshot it refuses, and
--dry-run shows there what it would do. Under --demo it runs on the demo's scratch copy,
through a simulated kernel that changes the copy alone (gpusplit demo --help).`,
		Example: `  sudo gpusplit apply --vfio numa:1
  sudo gpusplit apply --config /etc/gpusplit/split.toml --yes
  gpusplit --demo apply --vfio numa:1 --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.check(); err != nil {
				return err
			}
			if !c.dryRun {
				if err := needRoot(g, "apply", "it rebinds PCI devices through /sys and keeps its journal in "+bind.StateDir); err != nil {
					return err
				}
			}
			out, err := split.Run(split.Request{
				Plan:   func() (*split.Planned, error) { return d.plan(g) },
				Kernel: openKernel, DryRun: c.dryRun,
				Show: func(pl *split.Planned, ch *split.Change, ask bool) error {
					if ask && g.json() {
						return nil // the JSON is the result alone
					}
					if err := showChange(g, pl, ch, ""); err != nil || !ask {
						return err
					}
					fmt.Fprintln(g.stdout)
					return nil
				},
				Confirm:  func() error { return c.proceed(g, "Make this change?") },
				Context:  signalContext,
				LockWait: lockWait, Bind: c.options(g), Command: "apply",
				Services: func(h *host.Host) hook.Services { return hookServices(g, h) },
				Logf: func(format string, a ...any) {
					if !g.json() {
						fmt.Fprintf(g.stdout, format+"\n", a...)
					}
				},
			})
			if out != nil && out.Refused != nil {
				fmt.Fprintf(g.stderr, "note: without --dry-run this is refused: %v\n", out.Refused)
			}
			switch {
			case out == nil || out.Result == nil:
				if err == nil && c.dryRun && !out.Change.Empty() && !g.json() {
					fmt.Fprintln(g.stdout, "\ndry run: nothing was changed; without --dry-run apply makes this change.")
				}
				return err
			case g.json():
				if jerr := g.writeJSON(out.Result.Report(err)); jerr != nil {
					return jerr
				}
				return err
			case err != nil:
				return err
			}
			pl := out.Planned
			out.Result.WriteText(g.stdout, pl.H.Root(), rootedPath(pl.H, pve.BackupDir))
			if !pl.Desired.Persist {
				fmt.Fprintln(g.stdout, "To keep this split across reboots: gpusplit persist install (see gpusplit persist --help).")
			}
			return nil
		},
	}
	d.register(cmd)
	c.register(cmd)
	return cmd
}

// showChange prints the whole change, or its JSON, with the command that follows.
func showChange(g *globals, pl *split.Planned, ch *split.Change, next string) error {
	if g.json() {
		doc := planJSON(pl.Inv.Root, pl.Plan)
		rep := ch.Parts(next)
		doc.Parts = &rep
		return g.writeJSON(doc)
	}
	return writeChange(g.stdout, pl, ch, g.width())
}

// lockWait is how long a command run by hand waits for the driver lock, held by another
// run or a guest's hook (seconds, as a rule), before it gives up.
const lockWait = 30 * time.Second

// lockedHost opens the host and takes its driver lock, for a command that holds it from
// its first read of the host to its end (docs/handoff.md, "Locks").
func (g *globals) lockedHost() (*host.Host, *bind.Lock, error) {
	h, err := g.host()
	if err != nil {
		return nil, nil, err
	}
	lock, err := bind.TakeLock(h, lockWait)
	if err != nil {
		return nil, nil, err
	}
	return h, lock, nil
}

// openKernel is the kernel apply and rollback change: the running one behind h, or an
// error saying why h is not one (a snapshot, a directory copy); for a simulated host
// (the demo's scratch copy) the simulated kernel, which edits the copy alone. Tests of
// this package replace it with a fake kernel over a fixture tree; nothing on the
// command line can turn the check off.
var openKernel = func(h *host.Host) (bind.Kernel, error) {
	if h.Simulated() {
		k, err := bind.OpenSim(h)
		if err != nil {
			return nil, err
		}
		return k, nil
	}
	k, err := bind.Live(h)
	var notLive *bind.NotLiveError
	if errors.As(err, &notLive) {
		return nil, fmt.Errorf("%w (no --root, or --root /); --dry-run shows here what they would do, and pve and persist edit the files of a copy", err)
	}
	return k, err
}

var errSnapshot = errors.New("it is a snapshot, which cannot be changed; run on the host itself")
