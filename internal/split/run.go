package split

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// Request is what Run needs: how to plan the split, show it and ask, and how to move
// the drivers.
type Request struct {
	// Plan opens the host and plans the desired state on it (Load): at first, again
	// under the driver lock, and once the drivers moved (Tx.Replan).
	Plan func() (*Planned, error)
	// Kernel opens the kernel the drivers move through; an error says why the host is
	// not one that can be changed (a snapshot, a directory copy).
	Kernel func(*host.Host) (bind.Kernel, error)
	// DryRun stops once the change is shown.
	DryRun bool
	// Show prints the change: a dry run's, one with nothing to change, or, with ask, the
	// one Confirm asks about.
	Show func(pl *Planned, c *Change, ask bool) error
	// Confirm asks whether to make the change, once it is shown and nothing stops it;
	// an error ends the run with nothing changed.
	Confirm func() error
	// Context is the change's, made once it is confirmed (so that an interrupt during
	// the question ends the process as usual): its cancellation puts back what moved.
	Context func() (context.Context, context.CancelFunc)
	// LockWait is how long to wait for the driver lock.
	LockWait time.Duration
	Bind     bind.Options
	// Services are the host's, for the device nodes and systemctl.
	Services func(*host.Host) hook.Services
	// Command names what writes, for Proxmox's backups.
	Command string
	Logf    func(format string, a ...any)
}

// Outcome is how far Run went.
type Outcome struct {
	// Planned and Change are the split as last worked out.
	Planned *Planned
	Change  *Change
	// Refused is why a run that is not a dry run would be refused on this host (a
	// snapshot, a directory copy): set for a dry run of a change, which notes it.
	Refused error
	// Result is what Apply did; nil when the run stopped before it.
	Result *Result
}

// Run is apply: it plans the split and works out its whole change, collects every
// reason to stop (Change.Stops, and a driver the kernel lacks), and shows the change;
// a dry run, or a change with nothing to do, ends there. Otherwise it asks, takes the
// driver lock, plans again and refuses a change that is no longer the one shown
// (Changed) or that now stops, and makes it (Apply).
func Run(r Request) (*Outcome, error) {
	pl, err := r.Plan()
	if err != nil {
		return nil, err
	}
	ch, err := pl.Change(r.Command)
	if err != nil {
		return nil, err
	}
	out := &Outcome{Planned: pl, Change: ch}
	k, kerr := r.Kernel(pl.H)
	stops := ch.Stops
	if kerr == nil && !pl.Plan.Empty() {
		if err := bind.Check(k, pl.Plan); err != nil && bind.Held(pl.Plan) == nil {
			stops = append(stops, ch.newStop("drivers", err))
		}
	}
	if r.DryRun || ch.Empty() {
		if err := r.Show(pl, ch, false); err != nil || ch.Empty() {
			return out, err
		}
		// The change is worth seeing on a copy; the caller notes that the host itself
		// is needed.
		out.Refused = kerr
		if len(stops) > 0 {
			return out, &StopError{Stops: stops, DryRun: true}
		}
		return out, nil
	}
	if kerr != nil {
		return out, fmt.Errorf("nothing was changed: %w", kerr)
	}
	if len(stops) > 0 {
		return out, &StopError{Stops: stops}
	}
	if err := r.Show(pl, ch, true); err != nil {
		return out, err
	}
	if err := r.Confirm(); err != nil {
		return out, err
	}
	ctx, stop := r.Context()
	defer stop()
	// Locks first, then everything read again: the host may have changed during the
	// question (a guest started, another run moved a GPU).
	lock, err := bind.TakeLock(pl.H, r.LockWait)
	if err != nil {
		return out, err
	}
	defer lock.Unlock()
	shown := ch
	if pl, err = r.Plan(); err != nil {
		return out, fmt.Errorf("nothing was changed: %w", err)
	}
	if ch, err = pl.Change(r.Command); err != nil {
		return out, fmt.Errorf("nothing was changed: %w", err)
	}
	out.Planned, out.Change = pl, ch
	if changed := Changed(shown, ch); len(changed) > 0 {
		return out, fmt.Errorf("nothing was changed: the host changed since the change was shown:\n  %s\nrun gpusplit apply again to see the change as things are now", strings.Join(changed, "\n  "))
	}
	if len(ch.Stops) > 0 {
		return out, &StopError{Stops: ch.Stops}
	}
	if err := bind.Check(k, pl.Plan); err != nil {
		return out, bind.ExplainHeld(err)
	}
	out.Result, err = Apply(ctx, ch, Tx{
		H: pl.H, Lock: lock, Kernel: k, Inv: pl.Inv, Bind: r.Bind, Services: r.Services(pl.H), Command: r.Command, Logf: r.Logf,
		Replan: func() (*inventory.Inventory, *plan.Plan, error) {
			after, err := r.Plan()
			if err != nil {
				return nil, nil, err
			}
			return after.Inv, after.Plan, nil
		},
	})
	return out, err
}
