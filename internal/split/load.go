package split

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// Source is where a desired split comes from, as a command gives it: the choices of
// GPUs for vfio-pci, or a desired state file, and what overrides the file.
type Source struct {
	// VFIO are the choices of GPUs to pass to vfio-pci, each a list of selectors; the
	// split comes from a file when there are none.
	VFIO []string
	// Config is the desired state file on this machine; "" is the host's own
	// (plan.DefaultConfig), so that a snapshot carries its own.
	Config string
	// Devices says which devices count as GPUs; "" is the file's devices, else the
	// default rule.
	Devices string
	// AllowShared lets a group passed through take along devices nobody selected.
	AllowShared bool
	// AtRest plans the pools as at boot, when no VM holds them: persist's view.
	AtRest bool
	// Proxmox and Persist turn those parts of the split on or off when not nil; else
	// the file or the node decides (plan.Defaults).
	Proxmox, Persist *bool
	// Warn is given the inventory's warnings each time the host is read; nil drops them.
	Warn func([]string)
	// Word gives a reason to stop the way out the caller has for it (the command
	// line's flags), so that the change shows it as the run's error says it; nil
	// leaves it as it is.
	Word func(error) error
}

// ErrNoDesired is a host without a desired state file, where none was given.
var ErrNoDesired = errors.New("no desired state")

// Planned is a desired state planned on a host.
type Planned struct {
	H       *host.Host
	Inv     *inventory.Inventory
	Desired plan.Desired
	Plan    *plan.Plan
	// File is the desired state file the split comes from, Name its name; nil for VFIO.
	File *plan.File
	Name string
	// Source is what the split was loaded from, for the change it asks (Change).
	Source Source
}

// Load reads the desired state (LoadDesired) and plans the split on h.
func Load(h *host.Host, src Source) (*Planned, error) {
	pl, err := LoadDesired(h, src)
	if err != nil {
		return nil, err
	}
	if pl.Plan, err = plan.Make(pl.Inv, pl.Desired); err != nil {
		return nil, err
	}
	return pl, nil
}

// LoadDesired reads the desired state from src, builds h's inventory with the devices
// that count as GPUs and checks every name the file gives (drivers, guests, mappings);
// it plans nothing (Plan is nil). A pool's GPU that a running VM holds belongs on
// vfio-pci until it stops, unless src.AtRest.
func LoadDesired(h *host.Host, src Source) (*Planned, error) {
	pl := &Planned{H: h, Source: src}
	devices := src.Devices
	var fileErr error // the file's own mistakes, reported with the names it lacks
	if len(src.VFIO) > 0 {
		choices, err := plan.ParseChoices(src.VFIO)
		if err != nil {
			return nil, &plan.InputError{Input: "vfio", Err: err}
		}
		pl.Desired = plan.ForVFIO(choices)
		if err := pl.Desired.ResolveMappings(pve.MappingLookup(h)); err != nil {
			return nil, err
		}
	} else {
		name, data, err := ReadConfig(h, src.Config)
		if err != nil {
			return nil, err
		}
		holding := func() (map[pci.Address]int, error) { return vmlayout.Reservations(h, time.Now()) }
		if src.AtRest {
			holding = nil
		}
		pl.Desired, pl.File, err = plan.FromFile(name, data, holding)
		// A file that breaks its rules is still checked against the host below, so
		// that one run names every mistake; its devices, if they are what it broke,
		// are left for that error to name.
		var invalid *plan.InvalidFileError
		if errors.As(err, &invalid) {
			pl.File, fileErr = invalid.File, err
		} else if err != nil {
			return nil, err
		}
		pl.Name = name
		if _, err := pci.ParseSelectors(pl.File.Devices); devices == "" && err == nil {
			devices = pl.File.Devices
		}
	}
	pl.Desired.AllowSharedGroups = pl.Desired.AllowSharedGroups || src.AllowShared
	names := pve.NewNames(h)
	plan.Defaults(&pl.Desired, pl.File, names.Proxmox)
	if src.Proxmox != nil {
		pl.Desired.SyncProxmox = *src.Proxmox
	}
	if src.Persist != nil {
		pl.Desired.Persist = *src.Persist
	}
	sels, err := pci.ParseSelectors(devices)
	if err == nil {
		sels, err = pci.ResolveMappings(sels, pve.MappingLookup(h))
	}
	if err != nil {
		return nil, errors.Join(fileErr, fmt.Errorf("devices: %w", err))
	}
	if pl.Inv, err = inventory.Build(h, sels); err != nil {
		return nil, errors.Join(fileErr, err)
	}
	if src.Warn != nil {
		src.Warn(pl.Inv.Warnings)
	}
	// Every name the file gives must exist before anything is planned: a driver name
	// that matches no driver would leave the GPUs without one, and the functions that
	// should follow them behind.
	if pl.File != nil {
		if err := errors.Join(fileErr, pl.File.Check(pl.Inv, names)); err != nil {
			return nil, err
		}
		if err := pl.Desired.ResolveMappings(names.Mappings); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// ReadConfig returns the desired state file: config from this machine, or, with config
// "", the host's own (ErrNoDesired when it has none).
func ReadConfig(h *host.Host, config string) (string, []byte, error) {
	if config != "" {
		data, err := os.ReadFile(config)
		if err != nil {
			return "", nil, &plan.InputError{Input: "config", Err: err}
		}
		return config, data, nil
	}
	data, err := h.ReadFile(plan.DefaultConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, ErrNoDesired
	}
	if err != nil {
		return "", nil, err
	}
	return plan.DefaultConfig, data, nil
}

// Change works out the whole change of the planned split (Make): the drivers, and, as
// the desired state asks, Proxmox's files, the pools' hookscripts and the boot files.
// command names what writes, for Proxmox's backups.
func (pl *Planned) Change(command string) (*Change, error) {
	src := pl.Source
	o := Options{Command: command, Boot: persist.BootOptions{Config: src.Config, Word: src.Word}, Word: src.Word}
	if len(src.VFIO) > 0 {
		o.Config = &persist.File{Path: plan.DefaultConfig, Mode: 0o644, Content: persist.VFIOConfig(src.Devices, src.VFIO, src.AllowShared)}
	}
	if len(pl.Desired.Holding) > 0 && pl.Desired.Persist {
		// The boot files pin the pools' resting drivers, whatever VM holds them now.
		atRest := pl.Desired
		atRest.Holding = nil
		p, err := plan.Make(pl.Inv, atRest)
		if err != nil {
			return nil, err
		}
		o.AtRest = p
	}
	return Make(pl.H, pl.Inv, pl.Plan, pl.Desired, o)
}
