// Package hook runs the phases of a Proxmox guest's hookscript: a VM's GPUs move to
// vfio-pci at its pre-start and back at its post-stop, and a container's pre-start is
// refused while a running VM holds its GPUs (docs/handoff.md).
//
// A hook runs as root, unattended, at every start and stop of every guest that uses it,
// and Proxmox gives it no time limit. So a phase takes the driver lock (bind.TakeLock)
// before it reads anything it acts on, waiting for another run a bounded time; reads
// the host again under it; keeps its journal of its own (bind.HookJournalDir), never
// apply's; runs the host's commands by absolute path, each with a timeout; and ends by
// its deadline: past it, it stops moving devices, puts back what it moved, and fails.
package hook

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// The phases Proxmox calls a hookscript with.
const (
	PreStart  = "pre-start"
	PostStart = "post-start"
	PreStop   = "pre-stop"
	PostStop  = "post-stop"
)

// Phases are the phases, in the order of a guest's life.
var Phases = []string{PreStart, PostStart, PreStop, PostStop}

// DefaultDeadline bounds one phase when Config.Deadline is 0: long enough for eight GPUs
// to leave nvidia one group at a time with an unbind timeout to spare, short enough that
// a start that cannot go ahead is refused while someone still looks at it.
const DefaultDeadline = 3 * time.Minute

// MaxDeadline is the longest deadline a phase may be given.
const MaxDeadline = 30 * time.Minute

// lockShare is the part of the deadline a phase waits for the driver lock: the rest is
// for its own work.
const lockShare = 2

// Persistenced is the NVIDIA daemon that holds every GPU it knew at its start and never
// learns of GPUs bound later.
const Persistenced = "nvidia-persistenced"

// Config is what a phase works with.
type Config struct {
	H *host.Host
	// Kernel opens the kernel behind H; it refuses a host that is a copy (--root of a
	// directory or snapshot), where nothing may be changed.
	Kernel func(*host.Host) (bind.Kernel, error)
	// Selectors are the GPUs (--devices); nil for the default.
	Selectors []pci.Selector
	// Split loads split.toml with the inventory it was checked against; it is called
	// only where the host has the file.
	Split func(*host.Host) (plan.Desired, *inventory.Inventory, error)
	// Options tune the moves (unbind timeout, parallel groups); Progress and Journal
	// are the hook's own.
	Options bind.Options
	// Deadline bounds the phase, from the call to the end; DefaultDeadline when 0.
	Deadline time.Duration
	// Services runs the host's daemons and device nodes; System() on a host.
	Services Services
	// Say receives each line as it is written, for the task log; may be nil.
	Say func(line string)
	// Now is the time reservations are judged at; time.Now when nil.
	Now func() time.Time
}

// Report is what a phase did: hook -o json (docs/json.md).
type Report struct {
	Guest int      `json:"guest"`
	Kind  string   `json:"kind"` // "vm" or "container"
	Phase string   `json:"phase"`
	Lines []string `json:"lines"`
}

// Run runs one phase of guest vmid. Every line it writes goes to c.Say, the system
// journal and the report, which is returned whether the phase failed or not.
func Run(ctx context.Context, c Config, vmid int, phase string) (*Report, error) {
	if !slices.Contains(Phases, phase) {
		return nil, fmt.Errorf("phase %q: Proxmox calls a hookscript with pre-start, post-start, pre-stop or post-stop", phase)
	}
	if c.Deadline == 0 {
		c.Deadline = DefaultDeadline
	}
	if c.Deadline < 0 || c.Deadline > MaxDeadline {
		return nil, fmt.Errorf("deadline %s: give a duration above 0 and up to %s", c.Deadline, MaxDeadline)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	kind := ""
	switch {
	case c.H.Exists(pve.GuestPath(pve.QEMU, vmid)):
		kind = pve.QEMU
	case c.H.Exists(pve.GuestPath(pve.LXC, vmid)):
		kind = pve.LXC
	default:
		return nil, fmt.Errorf("no guest %d on this node: neither %s nor %s exists", vmid, pve.GuestPath(pve.QEMU, vmid), pve.GuestPath(pve.LXC, vmid))
	}
	r := &run{c: c, vmid: vmid, report: &Report{Guest: vmid, Kind: map[string]string{pve.QEMU: "vm", pve.LXC: "container"}[kind], Phase: phase, Lines: []string{}}}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.Deadline)
	defer cancel()
	var err error
	switch {
	case kind == pve.QEMU && phase == PreStart:
		err = r.locked(ctx, r.vmStart)
	case kind == pve.QEMU && phase == PostStop:
		err = r.locked(ctx, r.vmStop)
	case kind == pve.LXC && phase == PreStart:
		err = r.ctStart(ctx)
	default:
		r.logf("nothing to do at %s", phase)
		return r.report, nil
	}
	rec := HandOff{Guest: vmid, Kind: r.report.Kind, Phase: phase, Result: ResultOK, Start: start}
	if err != nil {
		rec.Result = ResultFailed
		rec.Error, _, _ = strings.Cut(err.Error(), "\n")
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		rec.Result = ResultDeadline
		err = &DeadlineError{Err: err, Deadline: c.Deadline}
	}
	rec.Seconds = time.Since(start).Seconds()
	// The metrics read the record (HandOffs); the phase's own outcome does not hang on it.
	if rerr := recordHandOff(c.H, rec); rerr != nil {
		r.logf("the record of this hand-off could not be written: %v", rerr)
	}
	return r.report, err
}

// run is one phase of one guest.
type run struct {
	c      Config
	vmid   int
	mu     sync.Mutex // guards report: lines come from bind's progress too
	report *Report
}

// logf writes one line to Say, which the task log shows, to the report, and to the system
// journal, where the phases run from qmeventd (post-stop after a shutdown from inside the
// guest) are seen.
func (r *run) logf(format string, a ...any) {
	line := fmt.Sprintf("gpusplit hook %d: ", r.vmid) + fmt.Sprintf(format, a...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.Lines = append(r.report.Lines, line)
	if r.c.Say != nil {
		r.c.Say(line)
	}
	toJournal(r.c.H, line)
}

// locked runs f holding the driver lock: every read f makes of the host is made under
// it. It waits for another run (apply, another guest's hook) up to half the deadline.
func (r *run) locked(ctx context.Context, f func(context.Context, *bind.Lock) error) error {
	wait := r.c.Deadline / lockShare
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d))
	}
	lock, err := bind.TakeLock(r.c.H, wait)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	return f(ctx, lock)
}

// journalPath is where the VM's start keeps what it moved, for its stop.
func (r *run) journalPath() string {
	return fmt.Sprintf("%s/vm-%d.json", bind.HookJournalDir, r.vmid)
}

func (r *run) inventory() (*inventory.Inventory, error) {
	return inventory.Build(r.c.H, r.c.Selectors)
}

func (r *run) options() bind.Options {
	o := r.c.Options
	o.Progress = r.progress
	o.Journal = r.journalPath()
	return o
}

func (r *run) progress(e bind.Event) {
	switch e.Step {
	case bind.StepDone:
		r.logf("%s  %s → %s  ok (%.2f s)", e.Device, onText(e.From), toText(e.To), e.Elapsed.Seconds())
	case bind.StepFailed:
		r.logf("%s  %s → %s  FAILED: %v", e.Device, onText(e.From), toText(e.To), e.Err)
	case bind.StepRestored:
		r.logf("%s  restored to %s", e.Device, onText(e.To))
	}
}

// removeJournal takes the VM's journal away: nothing of its start is left to give back.
func (r *run) removeJournal() error {
	p, err := r.c.H.OSPath(r.journalPath())
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// readJournal reads the VM's journal; an error wrapping fs.ErrNotExist where there is none.
func (r *run) readJournal() (*bind.Journal, error) {
	j, err := bind.ReadJournalAt(r.c.H, r.journalPath())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: give the devices back with gpusplit apply, then remove %s", err, r.journalPath())
	}
	return j, err
}

func onText(d string) string {
	if d == "" {
		return "(none)"
	}
	return d
}

func toText(to string) string {
	if to == plan.Default {
		return "(default)"
	}
	return to
}

// toJournal sends a line to the systemd journal through its native socket, when the host
// has one; a hook must not fail for want of a journal.
func toJournal(h *host.Host, line string) {
	if h.Root() != "/" {
		return
	}
	c, err := net.Dial("unixgram", "/run/systemd/journal/socket")
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "SYSLOG_IDENTIFIER=gpusplit\nPRIORITY=6\nMESSAGE=%s\n", strings.ReplaceAll(line, "\n", " "))
}

// vmGPUs are the VM's host devices that are GPUs of the inventory (function 0 of their
// slot): the plan moves their functions and IOMMU groups with them.
func vmGPUs(inv *inventory.Inventory, devices []pci.Address) []pci.Address {
	var out []pci.Address
	for _, d := range devices {
		for _, gp := range inv.GPUs {
			if gp.Address == d && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// addressChoices selects each address as a choice of its own.
func addressChoices(addrs []pci.Address) [][]pci.Selector {
	var out [][]pci.Selector
	for _, a := range addrs {
		sels, err := pci.ParseSelectors(a.String())
		if err == nil {
			out = append(out, sels)
		}
	}
	return out
}

func fromNvidia(p *plan.Plan) bool {
	return slices.ContainsFunc(p.Moves, func(m plan.Move) bool { return m.From == "nvidia" })
}

// minorText is a GPU's /dev/nvidiaN.
func minorText(minor int) string { return "/dev/nvidia" + strconv.Itoa(minor) }

// DeadlineError is a phase that failed past its deadline: what failed, and the deadline.
// The command line says how to set another.
type DeadlineError struct {
	Err      error
	Deadline time.Duration
}

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("%v\nthe hook's deadline of %s passed", e.Err, e.Deadline)
}

func (e *DeadlineError) Unwrap() error { return e.Err }
