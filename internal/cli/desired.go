package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/drivers"
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
		if desired, file, err = plan.FromFile(name, data, holding); err != nil {
			return plan.Desired{}, nil, err
		}
		if devices == "" {
			devices = file.Devices
		}
	}
	desired.AllowSharedGroups = desired.AllowSharedGroups || d.allowShared
	names := newHostNames(h)
	plan.Defaults(&desired, file, names.proxmox)
	if d.set != nil && d.set("proxmox") {
		desired.SyncProxmox = d.proxmox
	}
	if d.set != nil && d.set("persist") {
		desired.Persist = d.persist
	}
	sels, err := parseSelectors(h, devices)
	if err != nil {
		return plan.Desired{}, nil, fmt.Errorf("devices: %w", err)
	}
	inv, err := inventory.Build(h, sels)
	if err != nil {
		return plan.Desired{}, nil, err
	}
	g.warn(inv.Warnings)
	// Every name the file gives must exist before anything is planned: a driver name
	// that matches no driver would leave the GPUs without one, and the functions that
	// should follow them behind.
	if file != nil {
		if err := file.Check(inv, names); err != nil {
			return plan.Desired{}, nil, err
		}
		if err := desired.ResolveMappings(names.mappings); err != nil {
			return plan.Desired{}, nil, err
		}
	}
	return desired, inv, nil
}

// hostNames answers plan.File.Check from the host: drivers from its sysfs and modules,
// guests from Proxmox's files of this node.
type hostNames struct {
	h *host.Host
	// proxmox is false where /etc/pve/nodes is missing: not a Proxmox host, or one whose
	// cluster file system is not mounted yet (a boot-time apply before pve-cluster
	// starts), where guests cannot be looked up and are not needed to move GPUs.
	proxmox bool
	node    string
	nodeErr error
	// mappings reads pci.cfg for the mapping: selectors, once and only if one is given.
	mappings pci.MappingLookup
}

func newHostNames(h *host.Host) hostNames {
	n := hostNames{h: h, proxmox: h.IsDir(pveNodes), mappings: pve.MappingLookup(h)}
	if n.proxmox {
		n.node, n.nodeErr = pve.NodeName(h)
	}
	return n
}

const pveNodes = "/etc/pve/nodes"

func (n hostNames) Driver(name string) error { return drivers.Check(n.h, name) }

func (n hostNames) Mapping(name string) ([]string, error) { return n.mappings(name) }

// guestKind is what a guest id of split.toml names: where its config lives, and the
// key that lists it.
type guestKind struct{ dir, noun, key string }

var (
	containerKind = guestKind{pve.LXC, "container", "containers"}
	vmKind        = guestKind{pve.QEMU, "VM", "vms"}
)

func (n hostNames) Container(id int) error { return n.guest(containerKind, vmKind, id) }

func (n hostNames) VM(id int) error { return n.guest(vmKind, containerKind, id) }

// guest finds the config of guest id of this node, and when it is missing says where
// the id is instead: the other kind of guest, or a guest of another node.
func (n hostNames) guest(kind, other guestKind, id int) error {
	if !n.proxmox {
		return nil
	}
	if n.nodeErr != nil {
		return n.nodeErr
	}
	conf := func(node string, k guestKind) string {
		return fmt.Sprintf("%s/%s/%s/%d.conf", pveNodes, node, k.dir, id)
	}
	p := conf(n.node, kind)
	if n.h.Exists(p) {
		return nil
	}
	if n.h.Exists(conf(n.node, other)) {
		return fmt.Errorf("%d is a %s of node %s, not a %s: list it under %s", id, other.noun, n.node, kind.noun, other.key)
	}
	nodes, _ := n.h.ReadDir(pveNodes)
	for _, node := range nodes {
		if node != n.node && (n.h.Exists(conf(node, kind)) || n.h.Exists(conf(node, other))) {
			return fmt.Errorf("guest %d is on node %s, not on this node %s: gpusplit changes only this node's guests; migrate it here first, or remove it from the file", id, node, n.node)
		}
	}
	return fmt.Errorf("no %s %d on this node %s (no %s): correct the id, or create the %s first", kind.noun, id, n.node, p, kind.noun)
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
