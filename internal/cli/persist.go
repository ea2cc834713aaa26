package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/split"
)

func newPersist(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "persist install|remove|show",
		Short: "Make the split survive reboots: udev rule, modprobe.d hook, systemd unit",
		Long: `Make the split survive reboots with three pieces:

  ` + persist.UdevRule + `  pins each device's driver_override by PCI address
      when the kernel adds it, if its vendor and device ids still match (a card moved
      to another slot is not captured);
  ` + persist.Modprobe + ` and ` + persist.PinScript + `  set the same
      overrides before nvidia (or amdgpu) loads, since a GPU driver binds every device
      it matches the moment it loads, and load vfio-pci first;
  ` + persist.Unit + `  runs "gpusplit apply" with the desired state early in
      boot, before Proxmox starts guests (pve-guests.service) and before
      nvidia-persistenced, and fails loudly when the host is not in that state;
      with sync_proxmox (on by default on a Proxmox node) it also waits for
      pve-cluster.service, which mounts /etc/pve.

The unit runs the installed gpusplit, ` + persist.DefaultBinary + ` (a packaged build
names its own), or --binary PATH; never the file that happened to run install. Since
it runs as root at every boot, install refuses (nothing written; --dry-run says why) a
binary that is missing, not a regular executable file, not owned by root, writable by
group or others, or reached through a directory or link that is not root's or that
group or others can write (sticky directories such as /tmp excepted). These rules have
no override: install -o root -g root -m 0755 gpusplit ` + persist.DefaultBinary + `
satisfies them. A binary under /tmp, /var/tmp, /dev/shm, /run, /home or /root, or a
link leading there, is refused too, unless --binary names that path itself: then it is
allowed with a warning. "persist show" says which binary the unit runs and what the
check found. Under --root, the binary is looked for in that root.

The desired state is ` + plan.DefaultConfig + ` (or --config); with --vfio, install also
writes that file. If nvidia or vfio-pci is in the initramfs (listed in
/etc/initramfs-tools/modules, or in a dracut config), rebuild it after install and remove
(update-initramfs -u -k all), so the hook is there too.`,
	}
	cmd.AddCommand(newPersistShow(g), newPersistInstall(g), newPersistRemove(g))
	return cmd
}

// persistFlags are what install and show share.
type persistFlags struct {
	desiredFlags
	binary string
}

func (f *persistFlags) register(cmd *cobra.Command) {
	f.desiredFlags.register(cmd)
	cmd.Flags().StringVar(&f.binary, "binary", "", "the gpusplit the boot unit runs, as the host sees it (default "+persist.DefaultBinary+"): root's, writable by root alone, in directories only root can change")
}

// files computes the boot-time files for the desired state, and checks the binary.
func (f *persistFlags) files(g *globals, h *host.Host) (*persist.Boot, error) {
	// The files are for the next boot, when no VM holds a pool: they pin its resting
	// driver, whatever VM runs now.
	f.atRest = true
	pl, err := f.load(g, h, split.Load)
	if err != nil {
		return nil, err
	}
	return persist.PlanBoot(h, pl.Plan, pl.Inv.Tree, persist.BootOptions{Config: f.config, Binary: f.binary, SyncProxmox: pl.Desired.SyncProxmox, Word: flagWays})
}

func newPersistShow(g *globals) *cobra.Command {
	var f persistFlags
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the boot-time files install would write, whether they are installed, and the binary the unit runs",
		Example: `  gpusplit --demo persist show --vfio numa:1
  gpusplit persist show
  gpusplit persist show --binary /usr/bin/gpusplit -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.host()
			if err != nil {
				return err
			}
			bf, err := f.files(g, h)
			if err != nil {
				return err
			}
			out := persist.ShowReport{Binary: bf.Report(), Files: persist.FileStates(h, bf.Files)}
			if g.json() {
				return g.writeJSON(out)
			}
			out.WriteText(g.stdout, bf)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func newPersistInstall(g *globals) *cobra.Command {
	var f persistFlags
	var w writeFlags
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Write the udev rule, modprobe.d hook and systemd unit, and enable the unit (shows them, then asks)",
		Example: `  sudo gpusplit persist install
  sudo gpusplit persist install --vfio numa:1 --yes
  sudo gpusplit persist install --binary /usr/bin/gpusplit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(); err != nil {
				return err
			}
			if w.writing() {
				if err := needRoot(g, "persist install", "it writes /etc/udev, /etc/modprobe.d, /etc/systemd and /usr/lib/gpusplit", persist.Dirs()...); err != nil {
					return err
				}
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			bf, err := f.files(g, h)
			if err != nil {
				return err
			}
			files := bf.Files
			if len(f.vfio) > 0 {
				files = append([]persist.File{{Path: bf.Config, Mode: 0o644, Content: persist.VFIOConfig(g.devices, f.vfio, f.allowShared)}}, files...)
			}
			// The check, shown: the files, the binary, every reason to stop.
			doc, err := bf.InstallBoot(h, files, true, g.persistStep(h))
			stop := err != nil || w.dryRun
			if w.showsCheck(g, stop) {
				if g.json() {
					if jerr := g.writeJSON(doc); jerr != nil {
						return jerr
					}
				} else {
					bf.WriteDryRun(g.stdout, files)
					if err == nil && w.dryRun {
						fmt.Fprintln(g.stdout, "dry run: nothing was written.")
					}
				}
			}
			if stop {
				return err
			}
			if err := w.proceed(g, "Install these files?"); err != nil {
				return err
			}
			doc, err = bf.InstallBoot(h, files, false, g.persistStep(h))
			switch {
			case g.json():
				if jerr := g.writeJSON(doc); jerr != nil {
					return jerr
				}
			case err == nil:
				printNotes(g, doc.Notes)
			}
			return err
		},
	}
	f.register(cmd)
	w.register(cmd)
	return cmd
}

func newPersistRemove(g *globals) *cobra.Command {
	var w writeFlags
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Disable the unit and remove the udev rule, modprobe.d hook and unit (shows them, then asks)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(); err != nil {
				return err
			}
			if w.writing() {
				if err := needRoot(g, "persist remove", "it removes files from /etc and disables a systemd unit", persist.Dirs()...); err != nil {
					return err
				}
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			// The check, shown: the files that go.
			doc := persist.RemoveCheck(h)
			stop := len(doc.Problems) > 0 || w.dryRun || len(doc.Files) == 0
			if w.showsCheck(g, stop) {
				if g.json() {
					if jerr := g.writeJSON(doc); jerr != nil {
						return jerr
					}
				} else {
					doc.WriteRemoval(g.stdout)
				}
			}
			if len(doc.Problems) > 0 {
				return fmt.Errorf("nothing was removed: %s", strings.Join(doc.Problems, "; "))
			}
			if w.dryRun || len(doc.Files) == 0 {
				if w.dryRun && !g.json() && len(doc.Files) > 0 {
					fmt.Fprintln(g.stdout, "dry run: nothing was removed; without --dry-run the unit is disabled and these files removed.")
				}
				return nil
			}
			if err := w.proceed(g, "Disable the unit and remove these files?"); err != nil {
				return err
			}
			doc, err = persist.Uninstall(h, g.persistStep(h))
			if g.json() {
				if jerr := g.writeJSON(doc); jerr != nil {
					return jerr
				}
				return err
			}
			if err != nil {
				return err
			}
			printNotes(g, doc.Notes)
			return nil
		},
	}
	w.register(cmd)
	return cmd
}

// persistStep prints what persist install or remove does as it does it.
func (g *globals) persistStep(h *host.Host) func(persist.Step) {
	return persist.StepWriter(g.stdout, g.stderr, h.Root(), g.json())
}

func printNotes(g *globals, notes []string) {
	for _, n := range notes {
		fmt.Fprintln(g.stdout, n)
	}
}
