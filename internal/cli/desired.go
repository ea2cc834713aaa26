package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/split"
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

// source is the split these flags give, with the command line's --devices.
func (d *desiredFlags) source(g *globals) split.Source {
	src := split.Source{VFIO: d.vfio, Config: d.config, Devices: g.devices, AllowShared: d.allowShared, AtRest: d.atRest, Warn: g.warn, Word: flagWays}
	if d.set != nil && d.set("proxmox") {
		src.Proxmox = &d.proxmox
	}
	if d.set != nil && d.set("persist") {
		src.Persist = &d.persist
	}
	return src
}

// load plans the desired state on h (split.Load); the hook's, which plans it itself,
// only reads it (split.LoadDesired).
func (d *desiredFlags) load(g *globals, h *host.Host, load func(*host.Host, split.Source) (*split.Planned, error)) (*split.Planned, error) {
	if len(d.vfio) > 0 && d.config != "" {
		return nil, errors.New("--vfio and --config both say what the split is; use one of them")
	}
	pl, err := load(h, d.source(g))
	return pl, desiredErr(err)
}

// plan opens the host and plans the desired state on it.
func (d *desiredFlags) plan(g *globals) (*split.Planned, error) {
	h, err := g.host()
	if err != nil {
		return nil, err
	}
	return d.load(g, h, split.Load)
}

// desiredErr words an error of split.Load with the flag that answers it.
func desiredErr(err error) error {
	switch {
	case errors.Is(err, split.ErrNoDesired):
		return fmt.Errorf("no desired state: give --vfio SELECTOR, or write %s (gpusplit help split.toml shows how)", plan.DefaultConfig)
	case errors.Is(err, plan.ErrNoSelector):
		return errors.New("--vfio needs a selector")
	}
	return err
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
