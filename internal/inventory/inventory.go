// Package inventory gathers what gpusplit knows about a host's GPUs: the PCI devices,
// which of them count as GPUs with their companion functions, the nvidia driver's device
// minors, and the processes that hold each GPU open.
package inventory

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pciids"
	"github.com/gpusplit/gpusplit/internal/proc"
)

// Inventory is a host's GPUs and the PCI tree they were found in.
type Inventory struct {
	Root     string
	Tree     *pci.Tree
	GPUs     []GPU
	Warnings []string
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

// GPU is a GPU with what the nvidia driver and the process table say of it.
type GPU struct {
	pci.GPU
	// Minor is N of /dev/nvidiaN when the nvidia driver drives the GPU, else -1.
	Minor int
	// Nodes are the device nodes through which the GPU is used: /dev/nvidiaN for the
	// nvidia driver; /dev/vfio/<group> and /dev/vfio/devices/vfioN for vfio-pci.
	Nodes   []string
	Holders []proc.Process
}

// Build scans h. sels chooses which devices count as GPUs (none: the default rule).
func Build(h *host.Host, sels []pci.Selector) (*Inventory, error) {
	tree, err := pci.Scan(h, pciids.Default())
	if err != nil {
		return nil, err
	}
	gpus, err := pci.GPUs(tree, sels)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{Root: h.Root(), Tree: tree, Warnings: tree.Warnings}
	byNode := map[string][]int{}
	for i, g := range gpus {
		ig := GPU{GPU: g, Minor: -1}
		if g.Driver == "nvidia" {
			minor, err := NvidiaMinor(h, g.Address)
			if err != nil {
				inv.Warnings = append(inv.Warnings, fmt.Sprintf("%s: %v; /dev/nvidiaN unknown", g.Address, err))
			} else {
				ig.Minor = minor
				ig.Nodes = append(ig.Nodes, fmt.Sprintf("/dev/nvidia%d", minor))
			}
		}
		if g.Driver == "vfio-pci" && g.IOMMUGroup >= 0 {
			ig.Nodes = append(ig.Nodes, fmt.Sprintf("/dev/vfio/%d", g.IOMMUGroup))
		}
		if cdevs, err := h.ReadDir(g.Path + "/vfio-dev"); err == nil {
			for _, c := range cdevs {
				ig.Nodes = append(ig.Nodes, "/dev/vfio/devices/"+c)
			}
		}
		for _, n := range ig.Nodes {
			byNode[n] = append(byNode[n], i)
		}
		inv.GPUs = append(inv.GPUs, ig)
	}
	if len(byNode) > 0 {
		scan, err := proc.OpenFiles(h, func(p string) bool { return len(byNode[p]) > 0 })
		if err != nil {
			inv.Warnings = append(inv.Warnings, fmt.Sprintf("processes: %v; holders unknown", err))
		} else {
			for _, p := range scan.Processes {
				held := map[int]bool{}
				for _, f := range p.Files {
					for _, i := range byNode[f] {
						held[i] = true
					}
				}
				for i := range inv.GPUs {
					if held[i] {
						inv.GPUs[i].Holders = append(inv.GPUs[i].Holders, p)
					}
				}
			}
			if scan.Unreadable > 0 {
				inv.Warnings = append(inv.Warnings, fmt.Sprintf("the open files of %d processes could not be read; run as root to see every holder", scan.Unreadable))
			}
		}
	}
	return inv, nil
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
