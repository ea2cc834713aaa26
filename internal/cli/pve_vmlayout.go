package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

func newPVEVMLayout(g *globals) *cobra.Command {
	var vmid int
	var w writeFlags
	cmd := &cobra.Command{
		Use:   "vm-layout",
		Short: "Give a VM a PCIe layout that carries the host's NUMA nodes (shows the diff, then asks)",
		Long: `Move a VM's GPUs out of its hostpciN entries into an args line that rebuilds the host's
layout inside the guest: a pxb-pcie expander bridge for each host bridge holding its GPUs,
on the guest NUMA node bound to that host node, with a PCIe root port per GPU behind it.
The guest kernel then puts each GPU on its NUMA node, and nvidia-smi topo -m and NCCL see
NODE and SYS where they saw PHB everywhere. The VM gets numa: 1 and a guest node bound to
each host node of its GPUs (numaN: …,hostnodes=,policy=bind) unless it has them.

It prints the diff of the VM's config, then asks (--yes: it does not ask; --dry-run: it
stops there), and writes it under Proxmox's lock, with a backup, replacing the file
atomically.

Trade-offs: the GPUs leave Proxmox's hostpci handling. Proxmox no longer binds them to
vfio-pci or reserves them at start (gpusplit apply and persist must keep them on
vfio-pci), the VM's PCI mapping no longer applies (the args name host addresses), the
VM cannot be live-migrated, and the args line uses QEMU options that a Proxmox upgrade
can change: after an upgrade start the VM and check gpusplit topo inside.
docs/vm-topology.md has the details.`,
		Example: `  gpusplit --demo pve vm-layout --vm 131
  sudo gpusplit pve vm-layout --vm 131 --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if vmid == 0 {
				h, err := g.host()
				if err != nil {
					return err
				}
				return fmt.Errorf("--vm names the VM to lay out; %s", pve.GuestChoice(h, pve.QEMU))
			}
			if err := w.check(); err != nil {
				return err
			}
			if w.writing() {
				if err := needRoot(g, "pve vm-layout", "it writes /etc/pve and takes Proxmox's locks", pve.WriteDirs...); err != nil {
					return err
				}
			}
			h, inv, err := g.inventory()
			if err != nil {
				return err
			}
			doc, err := vmlayout.PlanLayout(h, inv.Tree, vmid, time.Now())
			switch {
			case err != nil:
				return err
			case doc.LaidOut && g.json():
				return g.writeJSON(doc)
			case doc.LaidOut:
				doc.WriteText(g.stdout)
				return nil
			}
			return writeGuest(g, h, &w, "pve vm-layout", doc.Edit, &doc.GuestWrite, doc, func() { doc.WriteText(g.stdout) })
		},
	}
	f := cmd.Flags()
	f.IntVar(&vmid, "vm", 0, "the VM to lay out")
	w.register(cmd)
	return cmd
}
