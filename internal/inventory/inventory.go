// Package inventory gathers what gpusplit knows about a host's GPUs: the PCI devices,
// which of them count as GPUs with their companion functions, the nvidia driver's device
// minors, and what uses each device that would move with a GPU (package holders).
package inventory

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pciids"
)

// Inventory is a host's GPUs and the PCI tree they were found in.
type Inventory struct {
	Root     string
	Tree     *pci.Tree
	GPUs     []GPU
	Warnings []string
	// Holders are the users of every device that moves with a GPU: the GPUs, their
	// functions and the other endpoints of their IOMMU groups. A device without users
	// is absent.
	Holders map[pci.Address][]holders.Holder
	// Unreadable counts the processes whose open files could not be read when the
	// holders were looked for (other users', without root): the holders among them are
	// not in Holders.
	Unreadable int

	h       *host.Host
	checked map[pci.Address]bool
}

// HoldersOf returns the users of a device: what makes a move of it refused. A device of
// the tree that Build did not check (one a journal names, no longer counted as a GPU) is
// checked now.
func (inv *Inventory) HoldersOf(a pci.Address) []holders.Holder {
	if !inv.checked[a] && inv.h != nil && inv.Tree != nil {
		if d := inv.Tree.Lookup(a); d != nil {
			inv.check([]*pci.Device{d})
		}
	}
	return inv.Holders[a]
}

// Devices returns the GPUs' PCI devices (function 0 of each), in inventory order: what
// the topology matrix and the checks take.
func (inv *Inventory) Devices() []*pci.Device {
	out := make([]*pci.Device, 0, len(inv.GPUs))
	for _, g := range inv.GPUs {
		out = append(out, g.Device)
	}
	return out
}

// Strangers are the devices that share g's IOMMU group without being g or one of its
// functions: they would have to move with it.
func (inv *Inventory) Strangers(g GPU) []*pci.Device {
	own := map[pci.Address]bool{g.Address: true}
	for _, f := range g.Functions {
		own[f.Address] = true
	}
	var out []*pci.Device
	for _, m := range inv.Tree.Group(g.IOMMUGroup) {
		if !own[m.Address] {
			out = append(out, m)
		}
	}
	return out
}

// GPU is a GPU with what the nvidia driver and the machine say of it.
type GPU struct {
	pci.GPU
	// Minor is N of /dev/nvidiaN when the nvidia driver drives the GPU, else -1: the
	// "Device Minor" line of /proc/driver/nvidia/gpus/<address>/information.
	Minor int
	// Nodes are the device nodes through which the GPU is used: /dev/nvidiaN for the
	// nvidia driver; /dev/vfio/<group> and /dev/vfio/devices/vfioN for vfio-pci; the
	// DRM nodes of its driver (/dev/dri/cardN, /dev/dri/renderDN).
	Nodes []string
	// Holders are the GPU's own users (those of its functions and group members are in
	// Inventory.Holders).
	Holders []holders.Holder
	// VFs are its SR-IOV virtual functions that are enabled (pci.Device.VirtFns).
	VFs []VF
}

// Build scans h. sels chooses which devices count as GPUs (none: the default rule).
func Build(h *host.Host, sels []pci.Selector) (*Inventory, error) {
	return build(h, sels, nil, true)
}

// BuildGPUs is Build for a command that shows the GPUs alone (inventory, topo): only
// the devices that move with a GPU (its functions, the other devices of its IOMMU
// group) are read in full, the others briefly (pci.ScanFor). The GPUs are chosen from
// what the brief read gives, which is all that choosing them looks at.
func BuildGPUs(h *host.Host, sels []pci.Selector) (*Inventory, error) {
	return build(h, sels, gpusInFull(sels), true)
}

// BuildTopology is BuildGPUs for a command that shows where the GPUs sit and nothing
// of who uses them (topo): it does not look for holders, which on a host of hundreds
// of processes costs more than the scan. HoldersOf still finds a device's.
func BuildTopology(h *host.Host, sels []pci.Selector) (*Inventory, error) {
	return build(h, sels, gpusInFull(sels), false)
}

// gpusInFull picks the devices that move with a GPU, for pci.ScanFor.
func gpusInFull(sels []pci.Selector) func(*pci.Tree) []*pci.Device {
	return func(t *pci.Tree) []*pci.Device {
		gpus, err := pci.GPUs(t, sels)
		if err != nil {
			return t.Devices // the same error comes again from the full tree
		}
		var out []*pci.Device
		for _, g := range gpus {
			out = append(out, t.Slot(g.Address)...)
			out = append(out, t.Group(g.IOMMUGroup)...)
		}
		return out
	}
}

func build(h *host.Host, sels []pci.Selector, detail func(*pci.Tree) []*pci.Device, withHolders bool) (*Inventory, error) {
	tree, err := pci.ScanFor(h, pciids.Default(), detail)
	if err != nil {
		return nil, err
	}
	gpus, err := pci.GPUs(tree, sels)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{Root: h.Root(), Tree: tree, Warnings: tree.Warnings, Holders: map[pci.Address][]holders.Holder{}, h: h, checked: map[pci.Address]bool{}}
	// Every device that moves with a GPU is checked for users: the GPU, its functions,
	// the other endpoints of its IOMMU group.
	var devs []*pci.Device
	for _, g := range gpus {
		ig := GPU{GPU: g}
		ig.Minor, ig.Nodes = inv.nodes(g.Device)
		ig.VFs = inv.virtFns(g.Device)
		inv.GPUs = append(inv.GPUs, ig)
		devs = append(devs, g.Device)
	}
	for _, g := range inv.GPUs {
		devs = append(devs, g.Functions...)
		devs = append(devs, tree.Group(g.IOMMUGroup)...)
		for _, vf := range g.VFs {
			devs = append(devs, vf.Device) // what uses them, in the same pass
		}
	}
	if !withHolders {
		return inv, nil
	}
	inv.check(devs)
	for i := range inv.GPUs {
		inv.GPUs[i].Holders = inv.Holders[inv.GPUs[i].Address]
	}
	return inv, nil
}

// check looks for the users of devs (bridges never move, and are left out) not checked
// yet, in one pass over the machine's processes, mounts and guests.
func (inv *Inventory) check(devs []*pci.Device) {
	gpuNodes := map[pci.Address][]string{}
	for _, g := range inv.GPUs {
		gpuNodes[g.Address] = g.Nodes
	}
	var todo []holders.Device
	for _, d := range devs {
		if inv.checked[d.Address] || d.IsBridge() {
			continue
		}
		inv.checked[d.Address] = true
		nodes, isGPU := gpuNodes[d.Address]
		if !isGPU {
			_, nodes = inv.nodes(d)
		}
		todo = append(todo, holders.Device{Address: d.Address, Path: d.Path, Driver: d.Driver, Nodes: nodes, VirtFns: d.VirtFns})
	}
	found := holders.Find(inv.h, todo)
	maps.Copy(inv.Holders, found.Holders)
	inv.Warnings = append(inv.Warnings, found.Warnings...)
	// Each pass looks through every process again (none, when the devices have no
	// nodes): the most it could not read is how many may hide a holder.
	inv.Unreadable = max(inv.Unreadable, found.Unreadable)
}

// nodes returns a device's nvidia minor (-1 without one) and its device nodes.
func (inv *Inventory) nodes(d *pci.Device) (int, []string) {
	h := inv.h
	minor := -1
	var nodes []string
	if d.Driver == "nvidia" {
		m, err := NvidiaMinor(h, d.Address)
		if err != nil {
			inv.Warnings = append(inv.Warnings, fmt.Sprintf("%s: %v; /dev/nvidiaN unknown", d.Address, err))
		} else {
			minor = m
			nodes = append(nodes, fmt.Sprintf("/dev/nvidia%d", m))
		}
	}
	if d.Driver == "vfio-pci" && d.IOMMUGroup >= 0 {
		nodes = append(nodes, fmt.Sprintf("/dev/vfio/%d", d.IOMMUGroup))
	}
	if cdevs, err := h.ReadDir(d.Path + "/vfio-dev"); err == nil {
		for _, c := range cdevs {
			nodes = append(nodes, "/dev/vfio/devices/"+c)
		}
	}
	return minor, append(nodes, holders.DeviceNodes(h, d.Path)...)
}

// NvidiaMinor reads the device minor (N of /dev/nvidiaN) of a GPU from the nvidia
// driver's /proc/driver/nvidia/gpus/<address>/information.
func NvidiaMinor(h *host.Host, a pci.Address) (int, error) {
	text, err := h.ReadString("/proc/driver/nvidia/gpus/" + a.String() + "/information")
	if err != nil {
		return -1, err
	}
	for _, line := range strings.Split(text, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "Device Minor" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 0 || n > 253 {
			return -1, fmt.Errorf("nvidia information file: Device Minor %q is not a minor number", strings.TrimSpace(val))
		}
		return n, nil
	}
	return -1, fmt.Errorf("nvidia information file has no Device Minor line")
}
