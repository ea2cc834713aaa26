package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/topo"
)

func newInventory(g *globals) *cobra.Command {
	var long bool
	cmd := &cobra.Command{
		Use:   "inventory",
		Short: "List the GPUs: where they sit, what drives them, who holds them",
		Long: `List the GPUs with their companion functions (HDMI audio, USB-C), NUMA node and
local CPUs, IOMMU group and its other members, host bridge and root port, driver,
/dev/nvidiaN, PCIe link (current and maximum), BARs, and what uses each GPU and its
functions: processes holding their device nodes open (/dev/nvidia*, /dev/vfio/*,
/dev/dri/*) with the Proxmox container or VM they belong to, file systems mounted from
their disks, swap, LVM, md and ZFS on them, network interfaces that are up, and running
Proxmox guests whose config passes them through; a VM entry with driver=keep, and
SR-IOV virtual functions enabled, hold a GPU too (rebinding it would destroy them).
A GPU's enabled virtual functions are shown under it, with the vGPU types of NVIDIA's
vGPU manager (kernels since 6.8).

Everything comes from sysfs and procfs, so GPUs bound to vfio-pci or to no driver are
listed as well as those on nvidia.`,
		Example: `  gpusplit --demo inventory
  gpusplit --demo inventory --long
  gpusplit inventory -o json | jq '.gpus[] | {address, numa_node, driver}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, inv, err := g.inventoryOfGPUs()
			if err != nil {
				return err
			}
			numa := topo.NUMANodes(h)
			if g.json() {
				return g.writeJSON(inv.Report(numa))
			}
			if long {
				return inv.WriteLong(g.stdout, numa)
			}
			return inv.WriteTable(g.stdout, numa, g.width())
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "one block per GPU with every detail (BARs, ids, group members)")
	return cmd
}

// model is the name users know of a device (inventory.Model).
func model(d *pci.Device) string { return inventory.Model(d) }

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
