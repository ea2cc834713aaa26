package split

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/demo"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
)

// runRig is apply's run of --vfio numa:1 on a demo copy, through the simulated kernel,
// counting what Run shows and asks.
type runRig struct {
	dir            string
	shown, asked   []bool // each Show's ask; each Confirm
	confirm        func() error
	kernelErr      error
	contextsMade   int
	lastShownMoves int
	// proxmox, when not nil, turns Proxmox's part of the split on or off.
	proxmox *bool
}

func newRunRig(t *testing.T, o demo.Options) *runRig {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	if _, err := demo.Make(dir, o); err != nil {
		t.Fatal(err)
	}
	return &runRig{dir: dir}
}

func (r *runRig) request(t *testing.T, dryRun bool) Request {
	return Request{
		Plan: func() (*Planned, error) {
			h, err := demo.Open(r.dir)
			if err != nil {
				return nil, err
			}
			return Load(h, Source{VFIO: []string{"numa:1"}, Proxmox: r.proxmox, Persist: r.proxmox})
		},
		Kernel: func(h *host.Host) (bind.Kernel, error) {
			if r.kernelErr != nil {
				return nil, r.kernelErr
			}
			return bind.OpenSim(h)
		},
		DryRun: dryRun,
		Show: func(pl *Planned, c *Change, ask bool) error {
			r.shown = append(r.shown, ask)
			r.lastShownMoves = len(pl.Plan.Moves)
			return nil
		},
		Confirm: func() error {
			r.asked = append(r.asked, true)
			if r.confirm != nil {
				return r.confirm()
			}
			return nil
		},
		Context: func() (context.Context, context.CancelFunc) {
			r.contextsMade++
			return context.WithCancel(context.Background())
		},
		LockWait: time.Second,
		Bind:     bind.Options{UnbindTimeout: 2 * time.Second, Parallel: 2},
		Services: func(h *host.Host) hook.Services { return hook.Simulated(h, nil) },
		Command:  "test",
	}
}

// drivers are the drivers of the NUMA-1 GPUs' functions on the copy, as the simulated
// kernel shows them.
func (r *runRig) drivers(t *testing.T) string {
	t.Helper()
	h, err := demo.Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Load(h, Source{VFIO: []string{"numa:1"}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := bind.OpenSim(h)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range pl.Plan.Moves {
		d, _ := k.Driver(m.Device)
		out = append(out, m.Device.String()+"="+d)
	}
	return strings.Join(out, " ")
}

// A dry run shows the change and ends, asking nothing; on a host that cannot be changed
// it says why a real run would be refused, and a real run refuses before showing.
func TestRunDryRun(t *testing.T) {
	r := newRunRig(t, demo.Options{})
	before := r.drivers(t)
	out, err := Run(r.request(t, true))
	if err != nil || out.Result != nil || out.Refused != nil || out.Change.Empty() {
		t.Fatalf("dry run: %v %+v", err, out)
	}
	if len(r.shown) != 1 || r.shown[0] || r.lastShownMoves != 8 || len(r.asked) != 0 || r.contextsMade != 0 {
		t.Errorf("dry run: shown %v (%d moves), asked %d, contexts %d", r.shown, r.lastShownMoves, len(r.asked), r.contextsMade)
	}
	r.kernelErr = errors.New("it is a snapshot")
	if out, err = Run(r.request(t, true)); err != nil || out.Refused != r.kernelErr {
		t.Errorf("dry run on a copy: %v %+v", err, out)
	}
	r.shown = nil
	if _, err = Run(r.request(t, false)); err == nil || err.Error() != "nothing was changed: it is a snapshot" || len(r.shown) != 0 {
		t.Errorf("a run on a copy: %v, shown %v", err, r.shown)
	}
	if got := r.drivers(t); got != before {
		t.Errorf("the drivers changed:\n%s", got)
	}
}

// A held GPU stops the run before anything is asked, every reason listed; a dry run
// says the same as a dry run's.
func TestRunStops(t *testing.T) {
	r := newRunRig(t, demo.Options{Held: true})
	var stop *StopError
	if _, err := Run(r.request(t, true)); !errors.As(err, &stop) || !stop.DryRun || len(stop.Stops) == 0 {
		t.Fatalf("dry run: %v", err)
	}
	r.shown = nil
	if _, err := Run(r.request(t, false)); !errors.As(err, &stop) || stop.DryRun || len(r.shown) != 0 || len(r.asked) != 0 {
		t.Fatalf("run: %v, shown %v, asked %d", err, r.shown, len(r.asked))
	}
}

// The change is shown for the question, then asked; not confirmed, nothing changes; a
// host that changed during the question is refused; confirmed, the change is made, and
// a second run finds nothing to do and asks nothing.
func TestRunAsksThenApplies(t *testing.T) {
	r := newRunRig(t, demo.Options{})
	before := r.drivers(t)
	no := errors.New("not confirmed")
	r.confirm = func() error { return no }
	if out, err := Run(r.request(t, false)); err != no || out.Result != nil || len(r.shown) != 1 || !r.shown[0] || len(r.asked) != 1 || r.contextsMade != 0 {
		t.Fatalf("not confirmed: %v, shown %v, asked %d, contexts %d", err, r.shown, len(r.asked), r.contextsMade)
	}

	// A guest's config changes between the question and the lock.
	vm := filepath.Join(r.dir, "etc/pve/nodes/kpro6/qemu-server/131.conf")
	r.confirm = func() error {
		b, err := os.ReadFile(vm)
		if err != nil {
			return err
		}
		return os.WriteFile(vm, append([]byte("description: changed\n"), b...), 0o640)
	}
	_, err := Run(r.request(t, false))
	if err == nil || !strings.HasPrefix(err.Error(), "nothing was changed: the host changed since the change was shown:\n  /etc/pve/qemu-server/131.conf changed") {
		t.Fatalf("a host changed during the question: %v", err)
	}
	if got := r.drivers(t); got != before {
		t.Fatalf("the drivers changed:\n%s", got)
	}

	r.confirm, r.shown, r.asked, r.contextsMade = nil, nil, nil, 0
	out, err := Run(r.request(t, false))
	if err != nil || out.Result == nil || out.Result.Drivers == nil || len(out.Result.Drivers.Moved) != 8 || out.Result.Proxmox == nil || !out.Result.Proxmox.Applied {
		t.Fatalf("confirmed: %v %+v", err, out)
	}
	if r.contextsMade != 1 || len(r.shown) != 1 || !r.shown[0] || len(r.asked) != 1 {
		t.Errorf("confirmed: shown %v, asked %d, contexts %d", r.shown, len(r.asked), r.contextsMade)
	}
	if got := r.drivers(t); got == before || strings.Contains(got, "=nvidia") {
		t.Errorf("the drivers after the run:\n%s", got)
	}
	rep := out.Result.Report(nil)
	if len(rep.Moved) != 8 || !slices.Contains(rep.Moved, "0000:81:00.0") || len(rep.Restored) != 0 || len(rep.Unrestored) != 0 || rep.Error != "" ||
		rep.Proxmox != out.Result.Proxmox || len(rep.Boot) == 0 || rep.RolledBack || rep.Seconds <= 0 {
		t.Errorf("the JSON report: %+v", rep)
	}

	r.shown, r.asked = nil, nil
	out, err = Run(r.request(t, false))
	if err != nil || !out.Change.Empty() || out.Result != nil || len(r.shown) != 1 || r.shown[0] || len(r.asked) != 0 {
		t.Errorf("again: %v, shown %v, asked %d", err, r.shown, len(r.asked))
	}
}
