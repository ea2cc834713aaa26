package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/doctor"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

func newPVEP2PClique(g *globals) *cobra.Command {
	var vmid, clique int
	var w writeFlags
	var p2pFile string
	cmd := &cobra.Command{
		Use:   "p2p-clique",
		Short: "Let the NVIDIA driver in a VM use peer access between its GPUs (x-nv-gpudirect-clique; shows the diff, then asks)",
		Long: `Put a VM's passed-through GPUs into one gpudirect clique: QEMU's x-nv-gpudirect-clique
property of vfio-pci tells the NVIDIA driver in the guest which GPUs may use peer access to
each other, which it cannot tell from the flat PCIe tree a VM has. The property is set on
Proxmox's own hostpci devices without replacing them (args: -set
device.hostpciN.x-nv-gpudirect-clique=N), or on the vfio-pci devices of gpusplit's
vm-layout.

Refused when the host's evidence says peer copies are unsafe (IOMMU faults naming GPUs,
SEV-SNP forcing translation, a saved p2p run that found corruption: --p2p FILE), and for
entries that pass several functions (a whole slot, GPU and HDMI audio): qemu-server names
those hostpciN.0, hostpciN.1, which QEMU's -set cannot reach.

It prints the diff, then asks (--yes: it does not ask; --dry-run: it stops there), and
writes it under Proxmox's lock, with a backup. It takes effect at the VM's next start. In the guest, check it with
nvidia-smi topo -p2p r, or gpusplit p2p; undo it by removing the -set options (or the
property) from args, or with the backup. docs/vm-topology.md has the details.`,
		Example: `  gpusplit --demo pve p2p-clique --vm 131
  sudo gpusplit pve p2p-clique --vm 131 --p2p /root/p2p.json --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(); err != nil {
				return err
			}
			if vmid == 0 {
				h, err := g.host()
				if err != nil {
					return err
				}
				return fmt.Errorf("--vm names the VM whose GPUs go into the clique; %s", pve.GuestChoice(h, pve.QEMU))
			}
			if w.writing() {
				if err := needRoot(g, "pve p2p-clique", "it writes /etc/pve and takes Proxmox's locks", pve.WriteDirs...); err != nil {
					return err
				}
			}
			h, inv, err := g.inventory()
			if err != nil {
				return err
			}
			doc, err := doctor.PlanClique(h, inv, vmid, clique, p2pFile, time.Now())
			if err != nil {
				return p2pFileAdvice(err, p2pFile, vmid)
			}
			return writeGuest(g, h, &w, "pve p2p-clique", doc.Edit, &doc.GuestWrite, doc, func() { doc.WriteText(g.stdout) })
		},
	}
	f := cmd.Flags()
	f.IntVar(&vmid, "vm", 0, "the VM whose GPUs go into the clique")
	f.IntVar(&clique, "clique", 0, fmt.Sprintf("the clique id, 0 to %d (VMs never share one: it only names GPUs within a VM)", vmlayout.MaxClique))
	f.StringVar(&p2pFile, "p2p", "", "a gpusplit p2p result saved on this host (p2p --save): a corrupt pair of the VM's GPUs refuses the clique")
	w.register(cmd)
	return cmd
}
