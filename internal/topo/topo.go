// Package topo computes how GPUs (and RDMA NICs) are connected, from the PCI tree alone:
// the relations nvidia-smi topo -m prints (X, PIX, PXB, PHB, NODE, SYS), with CPU and
// NUMA affinity. It works whatever driver the GPUs are bound to, or none.
package topo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Relation is how two devices are connected, named as nvidia-smi names it.
type Relation string

// The relations, from nearest to farthest. NVLink (NV#) cannot be seen from sysfs: two
// GPUs joined by NVLink show their PCIe relation.
const (
	Self Relation = "X"    // the device itself
	PIX  Relation = "PIX"  // through at most one PCIe bridge (one switch)
	PXB  Relation = "PXB"  // through several PCIe bridges, not the host bridge
	PHB  Relation = "PHB"  // through a PCIe host bridge (the CPU's root complex)
	NODE Relation = "NODE" // between host bridges of one NUMA node
	SYS  Relation = "SYS"  // across the interconnect between NUMA nodes
)

// Rank orders relations from nearest (0) to farthest.
func (r Relation) Rank() int {
	return slices.Index([]Relation{Self, PIX, PXB, PHB, NODE, SYS}, r)
}

// Relate returns the relation between two devices. numaNodes is the number of NUMA nodes
// of the machine: when the kernel reports no NUMA node for a device (numa_node -1) and
// the machine has a single node, the device is taken to be on that node, so two host
// bridges are on the same node.
func Relate(a, b *pci.Device, numaNodes int) Relation {
	if a.Address == b.Address {
		return Self
	}
	if a.HostBridge != b.HostBridge {
		switch {
		case a.NUMANode >= 0 && a.NUMANode == b.NUMANode:
			return NODE
		case (a.NUMANode < 0 || b.NUMANode < 0) && numaNodes <= 1:
			return NODE
		}
		return SYS
	}
	common := 0
	for common < len(a.Parents) && common < len(b.Parents) && a.Parents[common] == b.Parents[common] {
		common++
	}
	if common == 0 {
		// Different root ports, or devices on the root bus itself.
		return PHB
	}
	if len(a.Parents)-common <= 1 && len(b.Parents)-common <= 1 {
		return PIX
	}
	return PXB
}

// NIC is an RDMA-capable network device, which nvidia-smi lists beside the GPUs.
type NIC struct {
	Name   string      // an entry of the device's infiniband/ directory in sysfs: "mlx5_0"
	Device *pci.Device // the function under /sys/bus/pci/devices that has it
}

// NICs returns the PCI devices that have an RDMA port (an infiniband/ directory in
// sysfs), one entry per port name, sorted by name as nvidia-smi numbers them.
func NICs(h *host.Host, t *pci.Tree) []NIC {
	var out []NIC
	for _, d := range t.Devices {
		names, err := h.ReadDir(d.Path + "/infiniband")
		if err != nil {
			continue
		}
		for _, n := range names {
			out = append(out, NIC{Name: n, Device: d})
		}
	}
	slices.SortFunc(out, func(a, b NIC) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// NUMANodes counts the NUMA nodes the kernel shows under /sys/devices/system/node. A
// kernel without NUMA support shows none; that counts as one node.
func NUMANodes(h *host.Host) int {
	names, err := h.ReadDir("/sys/devices/system/node")
	if err != nil {
		return 1
	}
	n := 0
	for _, name := range names {
		if id, ok := strings.CutPrefix(name, "node"); ok {
			if _, err := strconv.Atoi(id); err == nil {
				n++
			}
		}
	}
	return max(n, 1)
}

// Matrix holds the relation of every pair among the GPUs and NICs.
type Matrix struct {
	GPUs  []*pci.Device // rows and columns, in PCI address order
	NICs  []NIC         // after the GPUs
	Cells [][]Relation  // [row][column], GPUs then NICs
	// GPUNUMAIDs are, in the order of GPUs, the NUMA nodes of the GPUs' own memory, from
	// /proc/driver/nvidia/gpus/<address>/numa_status (ReadGPUNUMAIDs), -1 where none is
	// stated; nil until read, all unknown.
	GPUNUMAIDs []int
	// Holders name, by GPU address, what holds each GPU open, as inventory's HELD BY
	// does (holders.Holder.Short), for the pictures; nil when they were not looked up.
	Holders map[pci.Address][]string
	// Split is the planned split the pictures show; nil for none.
	Split *Split
}

// NVIDIANUMAStatus is where the nvidia driver says which NUMA node a GPU's memory is, on
// the machines where that memory is a node of its own (Grace Hopper and Grace Blackwell,
// POWER9 with NVLink): the directory is named by the GPU's address.
const NVIDIANUMAStatus = "/proc/driver/nvidia/gpus/%s/numa_status"

// ReadGPUNUMAIDs fills GPUNUMAIDs from the nvidia driver's numa_status files, which is
// what nvidia-smi prints as GPU NUMA ID: the node of the GPU's memory, not the node of
// the CPUs near it (NUMA Affinity). A GPU without the file (any GPU of a machine whose
// GPU memory is no NUMA node, any GPU not on the nvidia driver) has none.
func (m *Matrix) ReadGPUNUMAIDs(h *host.Host) {
	m.GPUNUMAIDs = make([]int, len(m.GPUs))
	for i, g := range m.GPUs {
		m.GPUNUMAIDs[i] = -1
		s, err := h.ReadString(fmt.Sprintf(NVIDIANUMAStatus, g.Address))
		if err != nil {
			continue
		}
		if n, ok := ParseNUMAStatus(s); ok {
			m.GPUNUMAIDs[i] = n
		}
	}
}

// maxNUMANode bounds the node numbers believed, against garbage: a kernel has at most
// 1 << NODES_SHIFT nodes, and builds with NODES_SHIFT of 10 at most on x86 and arm64 (8 by
// default on POWER, whose GPUs' nodes are numbered down from 255).
const maxNUMANode = 1 << 16

// ParseNUMAStatus reads the node from a numa_status file, as nv_procfs_read_numa_status
// in the driver's kernel-open/nvidia/nv-procfs.c writes it:
//
//	Node:      255
//	Status:    online
//	Address:   40000000000
//	Size:      3f0000000
//
// (Address and Size only once the GPU has been opened). The node is taken whatever the
// status says of its memory being online, as the node is the GPU's all the same, except
// where the status says the GPU is no NUMA node ("disabled") or is not one the driver
// knows ("invalid"), or the node is -1 (none).
func ParseNUMAStatus(s string) (int, bool) {
	node, status := "", ""
	for _, line := range strings.Split(s, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "Node":
			node = strings.TrimSpace(value)
		case "Status":
			status = strings.TrimSpace(value)
		}
	}
	switch status {
	case "offline", "online_in_progress", "online", "online_failed", "offline_in_progress", "offline_failed":
	default:
		return -1, false
	}
	n, err := strconv.Atoi(node)
	if err != nil || n < 0 || n >= maxNUMANode {
		return -1, false
	}
	return n, true
}

// GPUNUMAID returns GPU i's NUMA ID as nvidia-smi prints it: the number, or N/A.
func (m *Matrix) GPUNUMAID(i int) string {
	if i < 0 || i >= len(m.GPUNUMAIDs) || m.GPUNUMAIDs[i] < 0 {
		return "N/A"
	}
	return strconv.Itoa(m.GPUNUMAIDs[i])
}

// Build computes the matrix. GPUs are put in PCI address order.
func Build(gpus []*pci.Device, nics []NIC, numaNodes int) *Matrix {
	gpus = slices.Clone(gpus)
	slices.SortFunc(gpus, func(a, b *pci.Device) int { return a.Address.Compare(b.Address) })
	m := &Matrix{GPUs: gpus, NICs: nics}
	all := m.devices()
	m.Cells = make([][]Relation, len(all))
	for i, a := range all {
		m.Cells[i] = make([]Relation, len(all))
		for j, b := range all {
			m.Cells[i][j] = Relate(a, b, numaNodes)
			if i == j {
				m.Cells[i][j] = Self // two ports of one NIC are distinct columns
			}
		}
	}
	return m
}

func (m *Matrix) devices() []*pci.Device {
	all := slices.Clone(m.GPUs)
	for _, n := range m.NICs {
		all = append(all, n.Device)
	}
	return all
}

// Labels returns the row and column labels: GPU0…, then NIC0….
func (m *Matrix) Labels() []string {
	var out []string
	for i := range m.GPUs {
		out = append(out, fmt.Sprintf("GPU%d", i))
	}
	for i := range m.NICs {
		out = append(out, fmt.Sprintf("NIC%d", i))
	}
	return out
}

// Flat reports whether the matrix shows nothing of the real topology: two or more GPUs,
// every pair PHB, and no NUMA information. This is how a VM guest looks when its GPUs
// sit on root ports of its one host bridge.
func (m *Matrix) Flat() bool {
	if len(m.GPUs) < 2 {
		return false
	}
	for i, g := range m.GPUs {
		if g.NUMANode >= 0 {
			return false
		}
		for j := range m.GPUs {
			if i != j && m.Cells[i][j] != PHB {
				return false
			}
		}
	}
	return true
}
