package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/pve"
)

func newPVEHook(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "Make gpusplit hook a guest's hookscript, take it away, or show it",
		Long: `gpusplit hook moves a VM's GPUs at its start and stop (see gpusplit hook --help); Proxmox
runs it as the guest's hookscript, a file in a storage's snippets/ directory, as root, at
every start and stop.

install writes the snippet into a storage of this node that has the snippets content type
(--storage names one; read from /etc/pve/storage.cfg) and sets hookscript: in the guest's
config under Proxmox's locks. The snippet runs the installed gpusplit (--binary, checked
as persist install checks the boot unit's). A guest that has a hookscript already keeps
it: gpusplit's own snippet for that guest (gpusplit-hook-ID, which says the guest it was
made for) runs gpusplit hook and then the old script, in every phase but a pre-start that
gpusplit refused; remove puts the old one back. remove takes gpusplit's hookscript away
and deletes the snippet file once no guest on any node names it (a clone's config names
its original's). show says what the guest has.

Snippets are per node: the guest's config is the cluster's, but a snippet on a storage
that is not shared (dir: local) is on this node alone. install and show name the other
nodes where the guest may start (migration, HA, replication) and the snippet must be
installed too; run install there, or use a shared storage. install and remove print
what they would do, then ask (--yes: they do not ask; --dry-run: they stop there).`,
	}
	cmd.AddCommand(newPVEHookChange(g, "install"), newPVEHookChange(g, "remove"), newPVEHookShow(g))
	return cmd
}

// guestFlags are --vm and --ct: the guest a command is about.
type guestFlags struct{ vm, ct int }

func (f *guestFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.vm, "vm", 0, "the VM")
	cmd.Flags().IntVar(&f.ct, "ct", 0, "the container")
}

func (f *guestFlags) guest(g *globals) (string, int, error) {
	switch {
	case f.vm != 0 && f.ct != 0:
		return "", 0, errors.New("--vm and --ct name two guests; give one")
	case f.vm != 0:
		return pve.QEMU, f.vm, nil
	case f.ct != 0:
		return pve.LXC, f.ct, nil
	}
	h, err := g.host()
	if err != nil {
		return "", 0, err
	}
	return "", 0, fmt.Errorf("--vm ID or --ct ID names the guest; %s; %s", pve.GuestChoice(h, pve.QEMU), pve.GuestChoice(h, pve.LXC))
}

func newPVEHookShow(g *globals) *cobra.Command {
	var gf guestFlags
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Say whether a guest's hookscript is gpusplit's, what it chains, and where else it must be",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, id, err := gf.guest(g)
			if err != nil {
				return err
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			doc, err := pve.ShowHook(h, kind, id)
			if err != nil {
				return err
			}
			if g.json() {
				return g.writeJSON(doc)
			}
			doc.WriteShow(g.stdout)
			return nil
		},
	}
	gf.register(cmd)
	return cmd
}

func newPVEHookChange(g *globals, verb string) *cobra.Command {
	var gf guestFlags
	var storage, binary, deadline string
	var w writeFlags
	short := map[string]string{
		"install": "Make gpusplit hook the guest's hookscript, chaining one it has (shows the diff, then asks)",
		"remove":  "Take gpusplit hook away from the guest, putting back a hookscript it chained (shows the diff, then asks)",
	}[verb]
	cmd := &cobra.Command{
		Use:   verb,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, id, err := gf.guest(g)
			if err != nil {
				return err
			}
			if err := w.check(); err != nil {
				return err
			}
			var d time.Duration
			if deadline != "" {
				if d, err = time.ParseDuration(deadline); err != nil || d <= 0 || d > pve.MaxHookDeadline {
					return fmt.Errorf("--deadline %q: give a duration above 0 and at most %s, such as 5m", deadline, pve.MaxHookDeadline)
				}
			}
			if w.writing() {
				if err := needRoot(g, "pve hook "+verb, "it writes /etc/pve and a storage's snippets", pve.WriteDirs...); err != nil {
					return err
				}
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			o := pve.HookOptions{Storage: storage, Binary: binary, Deadline: d, Command: "pve hook " + verb}
			change := pve.RemoveHook
			if verb == "install" {
				change = pve.InstallHook
			}
			// The check, shown; then, asked, the write of what was shown.
			doc, err := hookChange(g, h, change, kind, id, o)
			if doc == nil {
				return err
			}
			stop := err != nil || w.dryRun || (doc.Diff == "" && doc.Removed == "")
			if w.showsCheck(g, stop) {
				if jerr := showHook(g, h, doc, pve.HookText{Install: verb == "install", DryRun: w.dryRun}); jerr != nil {
					return jerr
				}
			}
			if stop {
				return stopped(err, doc.Problems)
			}
			if err := w.proceed(g, fmt.Sprintf("Change %s %d's hookscript?", doc.Kind, id)); err != nil {
				return err
			}
			o.Apply, o.Shown = true, doc
			if doc, err = hookChange(g, h, change, kind, id, o); doc == nil {
				return err
			}
			if jerr := showHook(g, h, doc, pve.HookText{Install: verb == "install", Written: err == nil}); jerr != nil {
				return jerr
			}
			return err
		},
	}
	gf.register(cmd)
	if verb == "install" {
		cmd.Flags().StringVar(&storage, "storage", "", "the storage for the snippet (default: the one the guest's gpusplit snippet is on, else the first of this node with the snippets content type)")
		cmd.Flags().StringVar(&binary, "binary", "", "the gpusplit the snippet runs, as the host sees it (default "+persist.DefaultBinary+"): root's, writable by root alone, in directories only root can change")
		cmd.Flags().StringVar(&deadline, "deadline", "", "pass gpusplit hook --deadline DURATION: a bound on each phase (at most 30m; default: none passed)")
	}
	w.register(cmd)
	return cmd
}

// hookChange runs an install or remove, and words its refusals with the flags.
func hookChange(g *globals, h *host.Host, change func(*host.Host, string, int, pve.HookOptions) (*pve.HookReport, error), kind string, id int, o pve.HookOptions) (*pve.HookReport, error) {
	doc, err := change(h, kind, id, o)
	var sc *pve.StorageChangeError
	var refused *pve.BinaryRefusedError
	switch {
	case errors.As(err, &refused):
		return nil, fmt.Errorf("%s; nothing was changed", refused.Message(binaryAdvice))
	case errors.As(err, &sc):
		return nil, fmt.Errorf("%s's hookscript %s is missing on this node: install writes it again on storage %s, as the config (every node's) names it; --storage %s would change it for every node", sc.Guest, sc.Hookscript, sc.Storage, sc.Named)
	case doc == nil:
		return nil, err
	}
	if doc.Refused != nil {
		doc.Problems = append(doc.Problems, doc.Refused.Message(binaryAdvice))
	}
	return doc, pveErr(err)
}

// showHook prints an install or remove: its check, or what it wrote (t.Written); or
// JSON.
func showHook(g *globals, h *host.Host, doc *pve.HookReport, t pve.HookText) error {
	if g.json() {
		return g.writeJSON(doc)
	}
	t.Backups = rootedPath(h, pve.BackupDir)
	doc.WriteText(g.stdout, t)
	if doc.Binary != nil {
		g.warn(doc.Binary.Notes)
	}
	return nil
}
