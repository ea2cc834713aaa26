package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
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
      nvidia-persistenced, and fails loudly when the host is not in that state.

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
	cmd.Flags().StringVar(&f.binary, "binary", "", "the gpusplit the boot unit runs (default: this executable on the live host, /usr/local/bin/gpusplit otherwise)")
}

// files computes the boot-time files for the desired state.
func (f *persistFlags) files(g *globals, h *host.Host) ([]persist.File, string, error) {
	desired, inv, err := f.load(g, h)
	if err != nil {
		return nil, "", err
	}
	p, err := plan.Make(inv, desired)
	if err != nil {
		return nil, "", err
	}
	ids := map[pci.Address][2]uint16{}
	for _, d := range inv.Tree.Devices {
		ids[d.Address] = [2]uint16{d.VendorID, d.DeviceID}
	}
	pins := persist.Pins(p, ids)
	if len(pins) == 0 {
		return nil, "", fmt.Errorf("the desired state pins no device to a driver: nothing to persist")
	}
	config := plan.DefaultConfig
	if f.config != "" {
		// The unit names the file by its absolute path.
		if config, err = filepath.Abs(f.config); err != nil {
			return nil, "", err
		}
	}
	binary := f.binary
	if binary == "" {
		binary = "/usr/local/bin/gpusplit"
		if exe, err := os.Executable(); err == nil && h.Root() == "/" && !g.demo {
			binary = exe
		}
	}
	files, err := persist.Files(pins, persist.Options{Binary: binary, Config: config})
	return files, config, err
}

func newPersistShow(g *globals) *cobra.Command {
	var f persistFlags
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the boot-time files install would write, and whether they are installed",
		Example: `  gpusplit --demo persist show --vfio numa:1
  gpusplit persist show`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.host()
			if err != nil {
				return err
			}
			files, _, err := f.files(g, h)
			if err != nil {
				return err
			}
			installed := map[string]string{}
			for _, i := range persist.Installed(h) {
				installed[i.Path] = i.Content
			}
			for _, file := range files {
				state := "not installed"
				if c, ok := installed[file.Path]; ok {
					state = "installed, different"
					if c == file.Content {
						state = "installed"
					}
				}
				fmt.Fprintf(g.stdout, "==> %s (%s) <==\n%s\n", file.Path, state, file.Content)
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func newPersistInstall(g *globals) *cobra.Command {
	var f persistFlags
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Write the udev rule, modprobe.d hook and systemd unit, and enable the unit",
		Example: `  sudo gpusplit persist install
  sudo gpusplit persist install --vfio numa:1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.host()
			if err != nil {
				return err
			}
			files, config, err := f.files(g, h)
			if err != nil {
				return err
			}
			if len(f.vfio) > 0 {
				files = append([]persist.File{{Path: config, Mode: 0o644, Content: configFromFlags(g.devices, f.vfio, f.allowShared)}}, files...)
			}
			if dryRun {
				for _, file := range files {
					fmt.Fprintf(g.stdout, "==> %s <==\n%s\n", file.Path, file.Content)
				}
				fmt.Fprintln(g.stdout, "dry run: nothing was written.")
				return nil
			}
			if !h.Writable() {
				return fmt.Errorf("cannot install into %s: %w", h.Root(), errSnapshot)
			}
			changes, err := persist.Install(h, files)
			for _, c := range changes {
				fmt.Fprintf(g.stdout, "%-10s %s\n", c.Action, c.Path)
			}
			if err != nil {
				return err
			}
			runAll(g, h, [][]string{{"systemctl", "daemon-reload"}, {"systemctl", "enable", "gpusplit.service"}, {"udevadm", "control", "--reload"}})
			initramfsAdvice(g, h)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the files, write nothing")
	return cmd
}

func newPersistRemove(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "remove",
		Short: "Disable the unit and remove the udev rule, modprobe.d hook and unit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.host()
			if err != nil {
				return err
			}
			if !h.Writable() {
				return fmt.Errorf("cannot remove from %s: %w", h.Root(), errSnapshot)
			}
			runAll(g, h, [][]string{{"systemctl", "disable", "gpusplit.service"}})
			changes, err := persist.Remove(h)
			for _, c := range changes {
				fmt.Fprintf(g.stdout, "%-10s %s\n", c.Action, c.Path)
			}
			if err != nil {
				return err
			}
			runAll(g, h, [][]string{{"systemctl", "daemon-reload"}, {"udevadm", "control", "--reload"}})
			fmt.Fprintf(g.stdout, "The desired state %s is kept; the drivers bound now stay as they are.\n", plan.DefaultConfig)
			initramfsAdvice(g, h)
			return nil
		},
	}
}

// configFromFlags writes the desired state that --vfio (and --devices) describe.
func configFromFlags(devices string, vfio []string, allowShared bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by gpusplit persist install --vfio %s\n", strings.Join(vfio, " --vfio "))
	b.WriteString("# The GPUs of the group go to vfio-pci; the others to, or stay on, their vendor's driver.\n")
	if devices != "" {
		fmt.Fprintf(&b, "devices = %s\n", strconv.Quote(devices))
	}
	if allowShared {
		b.WriteString("allow_shared_groups = true\n")
	}
	b.WriteString("\n[[group]]\nname = \"vfio\"\nselect = [")
	for i, v := range vfio {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(v))
	}
	b.WriteString("]\ndriver = \"vfio-pci\"\n")
	return b.String()
}

// runAll runs system commands on the live host; under --root it says what it skipped.
func runAll(g *globals, h *host.Host, cmds [][]string) {
	for _, c := range cmds {
		if h.Root() != "/" {
			fmt.Fprintf(g.stdout, "not run under --root %s: %s\n", h.Root(), strings.Join(c, " "))
			continue
		}
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			fmt.Fprintf(g.stderr, "warning: %s: %v %s\n", strings.Join(c, " "), err, strings.TrimSpace(string(out)))
		}
	}
}

// initramfsAdvice says to rebuild the initramfs when a GPU driver or vfio-pci is in it.
func initramfsAdvice(g *globals, h *host.Host) {
	b, err := h.ReadFile("/etc/initramfs-tools/modules")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "vfio") || strings.HasPrefix(line, "nvidia") || strings.HasPrefix(line, "amdgpu") {
			fmt.Fprintf(g.stdout, "/etc/initramfs-tools/modules loads %s early: rebuild the initramfs so it has the same hook: update-initramfs -u -k all\n", line)
			return
		}
	}
}
