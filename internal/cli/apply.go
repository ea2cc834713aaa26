package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// changeFlags are the flags of the commands that change bindings: apply and rollback.
type changeFlags struct {
	dryRun        bool
	yes           bool
	parallel      int
	unbindTimeout time.Duration
}

func (c *changeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&c.dryRun, "dry-run", false, "print what would change, and change nothing")
	f.BoolVarP(&c.yes, "yes", "y", false, "do not ask for confirmation (needed when not on a terminal)")
	f.IntVar(&c.parallel, "parallel", 4, "how many IOMMU groups to move at once")
	f.DurationVar(&c.unbindTimeout, "unbind-timeout", 15*time.Second, "give up on an unbind that does not return (the device is in use) after this long")
}

func (c *changeFlags) options(g *globals) bind.Options {
	return bind.Options{UnbindTimeout: c.unbindTimeout, Parallel: c.parallel, Progress: progress(g)}
}

// confirm asks before the first change on a terminal; without one, --yes is required.
func (c *changeFlags) confirm(g *globals, question string) error {
	if c.yes {
		return nil
	}
	if !g.terminal {
		return errors.New("nothing was changed: standard input is not a terminal, so there is no one to ask; pass --yes to go ahead")
	}
	fmt.Fprintf(g.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(g.stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return errors.New("nothing was changed: not confirmed")
	}
	return nil
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
--dry-run shows there what it would do.`,
		Example: `  sudo gpusplit apply --vfio numa:1
  sudo gpusplit apply --config /etc/gpusplit/split.toml --yes
  gpusplit --demo apply --vfio numa:1 --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !c.dryRun {
				if err := needRoot(g, "apply", "it rebinds PCI devices through /sys and keeps its journal in "+bind.StateDir); err != nil {
					return err
				}
			}
			pl, err := d.plan(g)
			if err != nil {
				return err
			}
			h, inv, p := pl.h, pl.inv, pl.plan
			k, kerr := openKernel(h)
			if c.dryRun && kerr != nil && !p.Empty() {
				// The plan is worth seeing on a copy; the note says the host itself is needed.
				fmt.Fprintf(g.stderr, "note: without --dry-run this is refused: %v\n", kerr)
			}
			if c.dryRun || p.Empty() {
				if g.json() {
					if err := g.writeJSON(planJSON(inv.Root, p)); err != nil {
						return err
					}
				} else {
					if err := writePlan(g.stdout, inv.Root, p); err != nil {
						return err
					}
					if c.dryRun && !p.Empty() {
						fmt.Fprintln(g.stdout, "\ndry run: nothing was changed.")
					}
				}
				if c.dryRun && !p.Empty() {
					// Every reason the real run would stop: held devices, and Proxmox.
					return errors.Join(bind.ExplainHeld(bind.Held(p)), bind.Quarantined(h, p), proxmoxPreflight(g, pl))
				}
				return nil
			}
			if kerr != nil {
				return fmt.Errorf("nothing was changed: %w", kerr)
			}
			if err := bind.Check(k, p); err != nil {
				return bind.ExplainHeld(err)
			}
			if err := bind.Quarantined(h, p); err != nil {
				return err
			}
			if !g.json() {
				if err := writePlan(g.stdout, inv.Root, p); err != nil {
					return err
				}
				fmt.Fprintln(g.stdout)
			}
			if err := proxmoxPreflight(g, pl); err != nil {
				return err
			}
			if err := c.confirm(g, fmt.Sprintf("Move %s?", plural.S(len(p.Moves), "device"))); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			// Locks first, then everything read again: the host may have changed during
			// the question (a guest started, another run moved a GPU).
			lock, err := bind.TakeLock(h, lockWait)
			if err != nil {
				return err
			}
			defer lock.Unlock()
			if pl, err = d.plan(g); err != nil {
				return fmt.Errorf("nothing was changed: %w", err)
			}
			if changed := plan.Changed(p, pl.plan); len(changed) > 0 {
				return fmt.Errorf("nothing was changed: the host changed since the plan was shown:\n  %s\nrun gpusplit apply again to see the plan as things are now", strings.Join(changed, "\n  "))
			}
			inv, p = pl.inv, pl.plan
			if err := bind.Check(k, p); err != nil {
				return bind.ExplainHeld(err)
			}
			if err := bind.Quarantined(h, p); err != nil {
				return err
			}
			res, err := bind.Apply(ctx, lock, k, p, c.options(g))
			if g.json() && (err != nil || !pl.desired.SyncProxmox) {
				if jerr := g.writeJSON(resultJSON(res, err)); jerr != nil {
					return jerr
				}
			}
			if err != nil {
				return bind.ExplainFailure(bind.ExplainHeld(err), res)
			}
			if !g.json() {
				fmt.Fprintf(g.stdout, "moved %s; the prior state is in %s (gpusplit rollback undoes it).\n", plural.S(len(res.Moved), "device"), bind.JournalPath)
				fmt.Fprintln(g.stdout, "To keep this split across reboots: gpusplit persist install (see gpusplit persist --help).")
			}
			if pl.desired.SyncProxmox {
				// Only now that the GPUs moved: the minors of GPUs back on nvidia exist.
				after, err := d.plan(g)
				if err != nil {
					return fmt.Errorf("the GPUs moved, but Proxmox was not synced: %w", err)
				}
				// The containers' devN entries need the nodes of the GPUs back on nvidia.
				back := map[pci.Address]bool{}
				for _, m := range p.Moves {
					back[m.Device] = m.Role == plan.RoleGPU && m.To == "nvidia"
				}
				logf := func(format string, a ...any) {
					if !g.json() {
						fmt.Fprintf(g.stdout, format+"\n", a...)
					}
				}
				if err := hook.MakeDeviceNodes(ctx, h, hookServices(), after.inv, back, logf); err != nil {
					return undoMove(ctx, g, lock, k, inv, c, res.Journal, err)
				}
				if !g.json() {
					if err := syncProxmox(g, after, pve.SyncOptions{}, syncMode{apply: true, command: "apply (sync_proxmox)"}); err != nil {
						return undoMove(ctx, g, lock, k, inv, c, res.Journal, err)
					}
					return nil
				}
				doc, serr := runSync(after, pve.SyncOptions{}, syncMode{apply: true, command: "apply (sync_proxmox)"})
				result := resultJSON(res, nil)
				result.Proxmox = doc
				if serr != nil {
					serr = undoMove(ctx, g, lock, k, inv, c, res.Journal, serr)
					result.RolledBack = true
				}
				if jerr := g.writeJSON(result); jerr != nil {
					return jerr
				}
				return serr
			}
			return nil
		},
	}
	d.register(cmd)
	c.register(cmd)
	return cmd
}

// undoMove puts the GPUs back after the Proxmox sync that follows the move failed (a lock
// taken, or a file changed, after the check before the move): with every Proxmox file as
// it was, the GPUs on their old drivers is the state that goes with it. It undoes the
// journal the move wrote, as it returned it, under the lock the move ran under: the file
// is not read again. The error says what happened to both.
func undoMove(ctx context.Context, g *globals, lock *bind.Lock, k bind.Kernel, inv *inventory.Inventory, c changeFlags, j *bind.Journal, syncErr error) error {
	_, err := bind.Rollback(ctx, lock, k, j, bind.Scope{Movable: bind.Movable(inv)}, nil, c.options(g))
	if err != nil {
		return fmt.Errorf("the GPUs moved, but Proxmox was not synced: %w\nputting the GPUs back failed too: %v\ngpusplit rollback puts them back, gpusplit pve sync --apply retries the sync", syncErr, err)
	}
	return fmt.Errorf("Proxmox was not synced, so the GPUs were put back on their drivers: %w", syncErr)
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
// error saying why h is not one (a snapshot, a directory copy). Tests of this package
// replace it with a fake kernel over a fixture tree; nothing on the command line can
// turn the check off.
var openKernel = func(h *host.Host) (bind.Kernel, error) { return bind.Live(h) }

var errSnapshot = errors.New("it is a snapshot, which cannot be changed; run on the host itself")

type resultDoc struct {
	Seconds    float64           `json:"seconds"` // from the first change to the end
	Moved      []string          `json:"moved"`
	Restored   []string          `json:"restored"`
	Unrestored map[string]string `json:"unrestored"`
	Error      string            `json:"error"`
	// Proxmox is the sync that followed, when the desired state asks for one.
	Proxmox *syncDoc `json:"proxmox,omitempty"`
	// RolledBack: the sync failed, and the devices were put back (or that was tried:
	// the error says whether it worked).
	RolledBack bool `json:"rolled_back,omitempty"`
}

func resultJSON(res *bind.Result, err error) resultDoc {
	doc := resultDoc{Moved: []string{}, Restored: []string{}, Unrestored: map[string]string{}}
	if res != nil {
		doc.Seconds = res.Elapsed.Seconds()
		for _, m := range res.Moved {
			doc.Moved = append(doc.Moved, m.Device.String())
		}
		for _, a := range res.Restored {
			doc.Restored = append(doc.Restored, a.String())
		}
		for a, e := range res.Unrestored {
			doc.Unrestored[a.String()] = e.Error()
		}
	}
	if err != nil {
		doc.Error = err.Error()
	}
	return doc
}
