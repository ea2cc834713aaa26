package nccl

import (
	"errors"
	"fmt"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/topo"
)

// ErrNoGPU is returned for an inventory without GPUs: there is no topology to write.
var ErrNoGPU = errors.New("no GPU found")

// HostTopology is the topology of a host's GPUs and RDMA NICs, as NCCL detects it, with
// warnings (a GPU NCCL does not use, what FromHost could not read) and notes (a host
// that looks like a VM, whose file says only that its GPUs share one host bridge).
func HostTopology(h *host.Host, inv *inventory.Inventory, opt Options) (x *Node, warnings, notes []string, err error) {
	if len(inv.GPUs) == 0 {
		return nil, nil, nil, ErrNoGPU
	}
	devs := inv.Devices()
	for _, d := range devs {
		if d.VendorID != pci.VendorNVIDIA {
			warnings = append(warnings, fmt.Sprintf("%s is not an NVIDIA GPU: NCCL does not use it (RCCL reads a version 2 file of its own)", d.Address))
		}
	}
	for _, n := range topo.NICs(h, inv.Tree) {
		devs = append(devs, n.Device)
	}
	x, more, err := FromHost(h, inv.Tree, devs, opt)
	if err != nil {
		return nil, nil, nil, err
	}
	warnings = append(warnings, more...)
	if m := topo.Build(inv.Devices(), nil, topo.NUMANodes(h)); m.Flat() && len(inv.GPUs) > 1 {
		notes = append(notes, "this looks like a VM: every GPU is on one host bridge with no NUMA node, so this file says only that; on the Proxmox host, gpusplit nccl-topo --vm ID writes the manifest that describes the real hardware")
	}
	return x, warnings, notes, nil
}
