package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/split"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// desiredFlags are the flags that say what the split should be: plan, apply and status
// share them.
type desiredFlags struct {
	vfio        []string
	config      string
	allowShared bool
	// atRest plans the pools as at boot, when no VM holds them: persist's view.
	atRest bool
	// proxmox and persist turn the split's parts on or off, when their flags are given
	// (set); otherwise the file or the node decides (plan.Defaults).
	proxmox, persist bool
	set              func(name string) bool
}

func (d *desiredFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&d.vfio, "vfio", nil, "GPUs to pass to vfio-pci, as selectors (repeatable; see 'gpusplit help selectors'); the others go to, or stay on, their vendor's driver")
	f.StringVar(&d.config, "config", "", "the desired state file (default "+plan.DefaultConfig+" of the host, when no --vfio is given)")
	f.BoolVar(&d.allowShared, "allow-shared-groups", false, "pass through IOMMU groups that hold devices no group selects (they go to vfio-pci too)")
	f.BoolVar(&d.proxmox, "proxmox", false, "include Proxmox's mappings, containers, VMs and the pools' hookscripts in the split (default: on for a Proxmox node, or split.toml's sync_proxmox)")
	f.BoolVar(&d.persist, "persist", false, "include the boot files that keep the split (default: on for a Proxmox node, or split.toml's persist)")
	d.set = func(name string) bool { return f.Changed(name) }
}

// load returns the desired state, and the inventory it is planned against.
func (d *desiredFlags) load(g *globals, h *host.Host) (plan.Desired, *inventory.Inventory, error) {
	if len(d.vfio) > 0 && d.config != "" {
		return plan.Desired{}, nil, errors.New("--vfio and --config both say what the split is; use one of them")
	}
	devices := g.devices
	var desired plan.Desired
	var file *plan.File
	var fileErr error
	if len(d.vfio) > 0 {
		choices, err := plan.ParseChoices(d.vfio)
		switch {
		case errors.Is(err, plan.ErrNoSelector):
			return plan.Desired{}, nil, errors.New("--vfio needs a selector")
		case err != nil:
			return plan.Desired{}, nil, fmt.Errorf("--vfio: %w", err)
		}
		desired = plan.ForVFIO(choices)
		if err := desired.ResolveMappings(pve.MappingLookup(h)); err != nil {
			return plan.Desired{}, nil, err
		}
	} else {
		name, data, err := d.read(h)
		if err != nil {
			return plan.Desired{}, nil, err
		}
		// A pool's GPU that a running VM holds belongs on vfio-pci until it stops.
		holding := func() (map[pci.Address]int, error) { return vmlayout.Reservations(h, time.Now()) }
		if d.atRest {
			holding = nil
		}
		desired, file, err = plan.FromFile(name, data, holding)
		// A file that breaks its rules is still checked against the host below, so
		// that one run names every mistake; its devices, if they are what it broke,
		// are left for that error to name.
		var invalid *plan.InvalidFileError
		if errors.As(err, &invalid) {
			file, fileErr = invalid.File, err
		} else if err != nil {
			return plan.Desired{}, nil, err
		}
		if _, err := pci.ParseSelectors(file.Devices); devices == "" && err == nil {
			devices = file.Devices
		}
	}
	desired.AllowSharedGroups = desired.AllowSharedGroups || d.allowShared
	names := pve.NewNames(h)
	plan.Defaults(&desired, file, names.Proxmox)
	if d.set != nil && d.set("proxmox") {
		desired.SyncProxmox = d.proxmox
	}
	if d.set != nil && d.set("persist") {
		desired.Persist = d.persist
	}
	sels, err := parseSelectors(h, devices)
	if err != nil {
		return plan.Desired{}, nil, errors.Join(fileErr, fmt.Errorf("devices: %w", err))
	}
	inv, err := inventory.Build(h, sels)
	if err != nil {
		return plan.Desired{}, nil, errors.Join(fileErr, err)
	}
	g.warn(inv.Warnings)
	// Every name the file gives must exist before anything is planned: a driver name
	// that matches no driver would leave the GPUs without one, and the functions that
	// should follow them behind.
	if file != nil {
		if err := errors.Join(fileErr, file.Check(inv, names)); err != nil {
			return plan.Desired{}, nil, err
		}
		if err := desired.ResolveMappings(names.Mappings); err != nil {
			return plan.Desired{}, nil, err
		}
	}
	return desired, inv, nil
}

// planned is a desired state planned on a host.
type planned struct {
	h       *host.Host
	inv     *inventory.Inventory
	desired plan.Desired
	plan    *plan.Plan
}

// plan opens the host and plans the desired state on it.
func (d *desiredFlags) plan(g *globals) (*planned, error) {
	h, err := g.host()
	if err != nil {
		return nil, err
	}
	desired, inv, err := d.load(g, h)
	if err != nil {
		return nil, err
	}
	p, err := plan.Make(inv, desired)
	if err != nil {
		return nil, err
	}
	return &planned{h: h, inv: inv, desired: desired, plan: p}, nil
}

// read returns the desired state file: --config from this machine, or the default file
// of the host (so a snapshot carries its own).
func (d *desiredFlags) read(h *host.Host) (string, []byte, error) {
	if d.config != "" {
		data, err := os.ReadFile(d.config)
		if err != nil {
			return "", nil, fmt.Errorf("--config: %w", err)
		}
		return d.config, data, nil
	}
	data, err := h.ReadFile(plan.DefaultConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, fmt.Errorf("no desired state: give --vfio SELECTOR, or write %s (gpusplit help split.toml shows how)", plan.DefaultConfig)
	}
	if err != nil {
		return "", nil, err
	}
	return plan.DefaultConfig, data, nil
}

// change works out the whole change of a planned split (split.Make): the drivers, and,
// as the desired state asks, Proxmox's files, the pools' hookscripts and the boot files.
func (d *desiredFlags) change(g *globals, pl *planned, command string) (*split.Change, error) {
	o := split.Options{Command: command, Boot: persist.BootOptions{Config: d.config}}
	if len(d.vfio) > 0 {
		o.Config = &persist.File{Path: plan.DefaultConfig, Mode: 0o644, Content: persist.VFIOConfig(g.devices, d.vfio, d.allowShared)}
	}
	if len(pl.desired.Holding) > 0 && pl.desired.Persist {
		// The boot files pin the pools' resting drivers, whatever VM holds them now.
		atRest := pl.desired
		atRest.Holding = nil
		p, err := plan.Make(pl.inv, atRest)
		if err != nil {
			return nil, err
		}
		o.AtRest = p
	}
	return split.Make(pl.h, pl.inv, pl.plan, pl.desired, o)
}

// next is the command that carries out the split as these flags give it: apply, with
// the flags that say what the split is and which host it is on.
func (d *desiredFlags) next(g *globals) string {
	args := []string{"gpusplit"}
	switch {
	case g.demo:
		args = append(args, "--demo")
	case g.root != "/":
		args = append(args, "--root", argQuote(g.root))
	default:
		args = append([]string{"sudo"}, args...)
	}
	if g.devices != "" {
		args = append(args, "--devices", argQuote(g.devices))
	}
	args = append(args, "apply")
	for _, v := range d.vfio {
		args = append(args, "--vfio", argQuote(v))
	}
	if d.config != "" {
		args = append(args, "--config", argQuote(d.config))
	}
	if d.allowShared {
		args = append(args, "--allow-shared-groups")
	}
	for _, name := range []string{"proxmox", "persist"} {
		if d.set != nil && d.set(name) {
			v := map[string]bool{"proxmox": d.proxmox, "persist": d.persist}[name]
			args = append(args, fmt.Sprintf("--%s=%t", name, v))
		}
	}
	return strings.Join(args, " ")
}

// argQuote quotes s for a POSIX shell when it needs it.
func argQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == ',' || r == '=' || r == '+' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
