package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/split"
)

// hookServices are the host's daemons and device nodes as the hooks change them: the
// system's, or for a simulated host (the demo's scratch copy) stand-ins that run nothing
// and say on standard error what they would run. Tests replace it.
var hookServices = func(g *globals, h *host.Host) hook.Services {
	if h.Simulated() {
		return hook.Simulated(h, func(line string) { fmt.Fprintln(g.stderr, line) })
	}
	return hook.System()
}

func newHook(g *globals) *cobra.Command {
	var deadline time.Duration
	var force bool
	cmd := &cobra.Command{
		Use:   "hook VMID PHASE | hook release ADDRESS",
		Short: "The Proxmox hookscript entry point: GPUs follow a VM at its start and stop",
		Long: `Called by Proxmox as a guest's hookscript (hookscript: <storage>:snippets/<file>) with the
guest's id and the phase: pre-start, post-start, pre-stop or post-stop.

For a VM, at pre-start it works out which host devices qemu-server will give the VM (the
mapping's choice, with the other VMs' reservations, as nccl-topo --vm predicts it), checks
every holder as apply does, stops nvidia-persistenced (when systemd runs it) while GPUs
leave nvidia, and moves the GPUs and their IOMMU groups to vfio-pci, keeping what each
was on in a journal of the VM's own (never apply's, which rollback reads). A held GPU
refuses the start: the exit status is not 0 and the message, which Proxmox shows in the
task log, names the holder and how to release it. At post-stop it gives the devices back,
unless another running VM now holds them: a pool's (a [[pool]] of split.toml) to the
pool's resting driver, the others to the drivers they had before the start. Then each
GPU back on nvidia gets its /dev/nvidiaN (nvidia-modprobe -c N), and the containers of
its group or pool get devN entries for the minors the driver gave, which can differ
from the ones they had, written under Proxmox's locks as pve sync writes them.

For a container, at pre-start it checks that the GPUs of its devN entries (/dev/nvidiaN)
are on nvidia, that no running VM holds them, and that no running VM holds a GPU of
its pools; it refuses the start otherwise, naming the VM. The other phases do nothing.

Each device gets one line on standard output (the task log) and in the system journal.
A phase takes gpusplit's driver lock before it reads the host, so two guests starting at
once take turns, and a start during an apply waits for it; it waits at most half its
deadline. The whole phase ends by its deadline (--deadline, 3 minutes by default): past
it no device starts moving, what moved is put back, and the hook fails. systemctl and
nvidia-modprobe are run from /usr/sbin, /usr/bin, /sbin or /bin, never through $PATH, each
for 30 seconds at most. docs/handoff.md explains the phases and their failure modes.

At post-stop each GPU is checked before it goes back (its config space answers, its link is
up at the width it had at the start) and after (its driver took it, /dev/nvidiaN exists):
one that fails is quarantined, stays on vfio-pci, and no container is given it; status and
doctor name it with the evidence. gpusplit hook release ADDRESS checks it again and ends the
quarantine (--force: though it still fails); the VM's post-stop, run again, or apply then
gives it back (docs/health.md).`,
		Example: `  gpusplit hook 131 pre-start
  gpusplit hook 131 post-stop
  gpusplit hook --deadline 5m 131 pre-start
  gpusplit hook release 0000:81:00.0`,
		Args: exactArgs(2, "hook needs VMID PHASE (e.g. gpusplit hook 131 pre-start) or release ADDRESS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "release" {
				return runHookRelease(g, args[1], force)
			}
			if force {
				return fmt.Errorf("--force is for gpusplit hook release ADDRESS, not for a phase")
			}
			vmid, err := strconv.Atoi(args[0])
			if err != nil || vmid < 100 {
				return fmt.Errorf("%q is not a Proxmox guest id (100 and up)", args[0])
			}
			phase := args[1]
			if phase == hook.PreStart || phase == hook.PostStop {
				if err := needRoot(g, "hook", "it rebinds PCI devices through /sys"); err != nil {
					return err
				}
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			sels, err := g.selectors(h)
			if err != nil {
				return err
			}
			conf := hook.Config{
				H:         h,
				Kernel:    openKernel,
				Selectors: sels,
				Split: func(h *host.Host) (plan.Desired, *inventory.Inventory, error) {
					var d desiredFlags
					pl, err := d.load(g, h, split.LoadDesired)
					if err != nil {
						return plan.Desired{}, nil, err
					}
					return pl.Desired, pl.Inv, nil
				},
				// The hook has no flags for these: apply's defaults.
				Options:  bind.Options{UnbindTimeout: 15 * time.Second, Parallel: 4},
				Deadline: deadline,
				Services: hookServices(g, h),
			}
			if !g.json() {
				conf.Say = func(line string) { fmt.Fprintln(g.stdout, line) }
			}
			ctx, stop := signalContext()
			defer stop()
			report, err := hook.Run(ctx, conf, vmid, phase)
			if err == nil && g.json() {
				return g.writeJSON(report)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "with release: end the quarantine though the GPU still fails its check")
	cmd.Flags().DurationVar(&deadline, "deadline", hook.DefaultDeadline, "end the phase by then: past it no device starts moving, what moved is put back, and the hook fails (at most 30m)")
	return cmd
}
