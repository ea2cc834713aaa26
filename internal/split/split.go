// Package split holds the whole change that a desired state asks of a host, in its
// parts: the drivers of the GPUs (plan), Proxmox's mappings, containers and VMs (pve),
// the hookscripts that the pools' VMs need (pve), and the boot files that keep the
// split (persist). plan shows a Change, apply makes it as one transaction (Apply), and
// status reports the drift of each part (Drift).
package split

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// Options say how the parts beside the drivers are worked out.
type Options struct {
	// Boot says which binary the boot unit runs and which desired state file it applies.
	Boot persist.BootOptions
	// Config is the desired state file that the boot files carry, when the split comes
	// from --vfio rather than from a file: the unit applies it at every boot. nil when
	// the split comes from a file.
	Config *persist.File
	// AtRest is the split planned as at boot, when no VM holds a pool: what the boot
	// files pin. nil when it is the drivers' plan (no pool is held now).
	AtRest *plan.Plan
	// Command names what writes, for Proxmox's backups.
	Command string
	// Word words each reason to stop with the caller's way out (Source.Word); nil
	// leaves them as they are.
	Word func(error) error
}

// Change is everything a desired state asks of a host now. A part the desired state
// leaves out is nil.
type Change struct {
	Desired plan.Desired
	Drivers *plan.Plan
	// Proxmox is the sync of Proxmox's files (sync_proxmox).
	Proxmox *pve.SyncReport
	// Hooks are the pools' VMs that lack gpusplit's hookscript, with the change that
	// installs it (sync_proxmox, for a desired state with pools).
	Hooks []*pve.HookReport
	// Boot is the boot files (persist): BootFiles are what install writes, the desired
	// state file first when Options.Config gives one, with their state on the host.
	Boot      *persist.Boot
	BootFiles []persist.File
	BootState []persist.FileReport
	// Notes are what to know that stops nothing.
	Notes []string
	// Stops are every reason apply would stop before the first change, by part.
	Stops []error
	word  func(error) error // Options.Word
}

// Stop is a reason apply would stop, and the part it belongs to.
type Stop struct {
	Part string // drivers, proxmox, hooks, boot
	Err  error
}

func (s *Stop) Error() string { return s.Part + ": " + s.Err.Error() }
func (s *Stop) Unwrap() error { return s.Err }

func (c *Change) stop(part string, err error) {
	if err != nil {
		c.Stops = append(c.Stops, c.newStop(part, err))
	}
}

// newStop is err, a reason to stop, of part, worded as the caller asked (Options.Word).
func (c *Change) newStop(part string, err error) *Stop {
	if c.word != nil {
		err = c.word(err)
	}
	return &Stop{Part: part, Err: err}
}

// Make works out the change on a host as it is now, writing nothing: each part, and
// every reason apply would stop before it changes anything. The kernel's own checks (a
// driver that cannot be loaded) are apply's, which has the kernel.
func Make(h *host.Host, inv *inventory.Inventory, p *plan.Plan, d plan.Desired, o Options) (*Change, error) {
	c := &Change{Desired: d, Drivers: p, word: o.Word}
	c.stop("drivers", held(p))
	c.stop("drivers", bind.Quarantined(h, p))
	if d.SyncProxmox {
		rep, err := pve.RunSync(h, inv, p, d, pve.SyncOptions{}, pve.SyncMode{Command: o.Command})
		switch {
		case rep == nil:
			c.stop("proxmox", fmt.Errorf("the sync cannot be worked out: %w", err))
		case errors.Is(err, pve.ErrWouldStop):
			for _, pr := range rep.Problems {
				c.stop("proxmox", errors.New(pr))
			}
		}
		c.Proxmox = rep
		c.hooks(h, d, o)
	}
	if d.Persist {
		c.boot(h, inv, p, o)
	}
	return c, nil
}

// held is why apply refuses to move the devices in use, with how to release each holder
// once (a container holding four GPUs is one line).
func held(p *plan.Plan) error {
	if bind.Held(p) == nil {
		return nil
	}
	var lines, devices []string
	seen := map[string]bool{}
	for _, m := range p.Moves {
		if len(m.Holders) > 0 {
			devices = append(devices, m.Device.String())
			lines = append(lines, bind.ReleaseLines(m.Holders, seen)...)
		}
	}
	return fmt.Errorf("in use: %s; release what holds %s, then run again:\n%s", strings.Join(devices, ", "), plural.N(len(devices), "it", "them")[2:], strings.Join(lines, "\n"))
}

// hooks works out the hookscript of each pool's VM that lacks gpusplit's: without it the
// pool's GPUs do not follow the VM.
func (c *Change) hooks(h *host.Host, d plan.Desired, o Options) {
	var vms []int
	for _, t := range d.Targets {
		if t.Pool {
			vms = append(vms, t.VMs...)
		}
	}
	slices.Sort(vms)
	for _, id := range slices.Compact(vms) {
		now, err := pve.ShowHook(h, pve.QEMU, id)
		if err != nil {
			c.stop("hooks", err)
			continue
		}
		if pve.IsHookVolume(now.Hookscript) && now.SnippetState == "present" {
			continue
		}
		rep, err := pve.InstallHook(h, pve.QEMU, id, pve.HookOptions{Command: o.Command})
		switch {
		case rep == nil:
			c.stop("hooks", err)
			continue
		case rep.Refused != nil:
			c.stop("hooks", rep.Refused)
		case errors.Is(err, pve.ErrWouldStop):
			for _, pr := range rep.Problems {
				c.stop("hooks", errors.New(pr))
			}
		}
		c.Hooks = append(c.Hooks, rep)
	}
}

// boot works out the boot files, and what would stop their install.
func (c *Change) boot(h *host.Host, inv *inventory.Inventory, p *plan.Plan, o Options) {
	atRest := o.AtRest
	if atRest == nil {
		atRest = p
	}
	o.Boot.SyncProxmox = c.Desired.SyncProxmox
	bf, err := persist.PlanBoot(h, atRest, inv.Tree, o.Boot)
	if errors.Is(err, persist.ErrNothingToPin) {
		c.Notes = append(c.Notes, "boot files: the split pins no device to a driver, so there is nothing to keep across reboots")
		return
	}
	if err != nil {
		c.stop("boot", err)
		return
	}
	c.Boot = bf
	c.BootFiles = bf.Files
	if o.Config != nil {
		c.BootFiles = append([]persist.File{*o.Config}, c.BootFiles...)
		c.stop("boot", ownConfig(h, *o.Config))
	}
	c.BootState = persist.FileStates(h, c.BootFiles)
	for _, e := range bf.InstallStops(h) {
		if errors.Is(e, host.ErrReadOnly) {
			// A snapshot: like Proxmox's locks, the permissions are the host's to check.
			c.Notes = append(c.Notes, fmt.Sprintf("boot files: %s is a snapshot; whether they can be written is checked on the host itself", h.Root()))
			continue
		}
		c.stop("boot", e)
	}
}

// ownConfig refuses to replace a desired state file that a person wrote: a choice of
// GPUs on the command line writes the file the boot unit applies only where there is
// none, or one such a choice wrote before.
func ownConfig(h *host.Host, f persist.File) error {
	b, err := h.ReadFile(f.Path)
	if err != nil || string(b) == f.Content || persist.FromVFIO(string(b)) {
		return nil
	}
	return &ConfigExistsError{Path: f.Path}
}

// ConfigExistsError is a desired state file, not written for a choice of GPUs on the
// command line, that a split from such a choice would replace.
type ConfigExistsError struct{ Path string }

func (e *ConfigExistsError) Error() string { return e.Message("the choice of GPUs given") }

// Message names the choice as the command line took it (its flag).
func (e *ConfigExistsError) Message(choice string) string {
	return fmt.Sprintf("%s says what the split is, and %s says otherwise: the boot unit applies that file, which %s would replace", e.Path, choice, choice)
}

// Empty says the host is as the desired state asks, in every part.
func (c *Change) Empty() bool { return len(c.Drift()) == 0 }

// Drift lists, part by part, what is not as the desired state asks: the devices on
// another driver, the Proxmox files and hookscripts that differ, the boot files missing
// or different. Empty when the host is in sync.
func (c *Change) Drift() []PartDrift {
	var out []PartDrift
	if n := len(c.Drivers.Moves); n > 0 {
		d := PartDrift{Part: "drivers"}
		for _, m := range c.Drivers.Moves {
			d.Items = append(d.Items, m.Device.String())
		}
		out = append(out, d)
	}
	if c.Proxmox != nil && len(c.Proxmox.Changes) > 0 {
		d := PartDrift{Part: "proxmox"}
		for _, ch := range c.Proxmox.Changes {
			d.Items = append(d.Items, ch.Path)
		}
		out = append(out, d)
	}
	if len(c.Hooks) > 0 {
		d := PartDrift{Part: "hooks"}
		for _, r := range c.Hooks {
			d.Items = append(d.Items, fmt.Sprintf("VM %d", r.Guest))
		}
		out = append(out, d)
	}
	d := PartDrift{Part: "boot"}
	for _, f := range c.BootState {
		if f.State != "installed" {
			d.Items = append(d.Items, f.Path)
		}
	}
	if len(d.Items) > 0 {
		out = append(out, d)
	}
	return out
}

// PartDrift is what differs in one part: device addresses, file paths or guests.
type PartDrift struct {
	Part  string   `json:"part"`
	Items []string `json:"items"`
}

// Changed says how the change worked out again under the lock (now) departs from the
// one that was shown: the drivers' plan.Changed, and any Proxmox file, hookscript or
// boot file whose change is not the one shown. Empty when the shown change is still the
// one to make.
func Changed(shown, now *Change) []string {
	out := plan.Changed(shown.Drivers, now.Drivers)
	diffs := func(c *Change) map[string]string {
		m := map[string]string{}
		if c.Proxmox != nil {
			for _, ch := range c.Proxmox.Changes {
				m[ch.Path] = ch.Diff
			}
		}
		for _, h := range c.Hooks {
			m[fmt.Sprintf("the hookscript of VM %d", h.Guest)] = h.Diff
		}
		for _, f := range c.BootState {
			m[f.Path] = f.State + "\x00" + f.Content
		}
		return m
	}
	was, is := diffs(shown), diffs(now)
	for _, k := range slices.Sorted(maps.Keys(is)) {
		if was[k] != is[k] {
			out = append(out, k+" changed since the change was shown")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(was)) {
		if _, ok := is[k]; !ok {
			out = append(out, k+" no longer needs to change")
		}
	}
	return out
}

// StopError is apply refusing before its first change, with every reason.
type StopError struct {
	Stops  []error
	DryRun bool
}

func (e *StopError) Error() string {
	var b strings.Builder
	if e.DryRun {
		b.WriteString("dry run: nothing was changed, and apply would stop:")
	} else {
		b.WriteString("nothing was changed:")
	}
	for _, s := range e.Stops {
		b.WriteString("\n  " + strings.ReplaceAll(s.Error(), "\n", "\n    "))
	}
	return b.String()
}

func (e *StopError) Unwrap() []error { return e.Stops }
