package cli

import "github.com/spf13/cobra"

// selectorsTopic is a help topic, not a command: gpusplit help selectors.
var selectorsTopic = &cobra.Command{
	Use:   "selectors",
	Short: "How to choose devices: addresses, slots, GPU numbers, ids, classes, mappings, numa:N, group:N, count:N",
	Long: `Selectors choose devices, in --devices (which devices count as GPUs), in --vfio and
in split.toml's select lists. Several selectors are separated by commas.

Selectors that name devices pick among all the PCI devices of the host:
  0000:81:00.0     a PCI address (81:00.0 for domain 0000; upper case is accepted, and
                   so is nvidia-smi's bus id, 00000000:81:00.0)
  0000:81:00       a slot, as Proxmox writes it in pci.cfg and hostpci lines (81:00 for
                   domain 0000): all its functions
  GPU4, gpu:4      the GPU that inventory and topo label 4 (the GPUs in address order;
                   in --devices, as numbered without --devices)
  10de:2bb1        vendor:device, as lspci -nn shows it
  class:0x0300     a PCI class prefix of 2, 4 or 6 hex digits (0x03: any display controller)
  mapping:pro6000  the devices of this node in the Proxmox PCI mapping pro6000
                   (/etc/pve/mapping/pci.cfg; gpusplit pve mappings lists them)

Selectors that narrow keep part of that choice:
  numa:1           the devices on NUMA node 1
  group:42         the devices in IOMMU group 42
  count:4          any 4, packed onto as few NUMA nodes as possible (the lowest node
                   that has 4, else the fullest nodes first)

Narrowing selectors of one kind add up (numa:0,numa:1 is both nodes); different kinds
narrow each other (numa:1,group:42), and count: applies last.

Without a naming selector, the choice starts from the GPUs: NVIDIA (10de) and AMD
(1002) display controllers, never a BMC's VGA such as ASPEED, never an SR-IOV virtual
function. So --devices numa:1 is the GPUs on NUMA node 1, --devices 8086:10d3 counts
every 8086:10d3 device as a GPU, and --devices 8086:10d3,numa:0 only those on node 0.

A selector that matches nothing is an error that says what there is to choose from.`,
}
