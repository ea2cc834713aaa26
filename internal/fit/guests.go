package fit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// GuestKind says whether a guest is a container or a VM.
type GuestKind int

const (
	Container GuestKind = iota
	VM
)

// Guest names a Proxmox container or VM.
type Guest struct {
	Kind GuestKind
	ID   int
}

func (g Guest) String() string {
	if g.Kind == VM {
		return fmt.Sprintf("VM %d", g.ID)
	}
	return fmt.Sprintf("container %d", g.ID)
}

// ContainerGPUs are the GPUs a container's config passes through, given the paths its
// devN entries and lxc.mount.entry lines name: those with a device node (/dev/nvidiaN,
// its DRI nodes) at one of the paths, or inside a directory one of them names.
func ContainerGPUs(inv *inventory.Inventory, paths []string) []inventory.GPU {
	var out []inventory.GPU
	for _, gpu := range inv.GPUs {
		if slices.ContainsFunc(gpu.Nodes, func(n string) bool {
			return slices.ContainsFunc(paths, func(p string) bool { return n == p || strings.HasPrefix(n, p+"/") })
		}) {
			out = append(out, gpu)
		}
	}
	return out
}

// GuestNow is what a guest has now, as its Proxmox config says: the caller reads it.
type GuestNow struct {
	GPUs []inventory.GPU
	// Notes are what reading the config found worth saying (a VM's layout).
	Notes []string
	// NoClique is set for a VM without one gpudirect clique for its GPUs: its driver
	// gives them no peer access.
	NoClique bool
}

// GPUsAt are the GPUs of inv at the addresses, in the addresses' order: a VM's, from the
// host addresses qemu-server will give it.
func GPUsAt(inv *inventory.Inventory, addrs []pci.Address) []inventory.GPU {
	var out []inventory.GPU
	for _, a := range addrs {
		for _, gpu := range inv.GPUs {
			if gpu.Address == a {
				out = append(out, gpu)
			}
		}
	}
	return out
}

// AfterSplit are the GPUs guest keeps once the desired state d, planned as p, is
// reached: those of the groups that name the guest, on the driver the guest needs
// (nvidia for a container, vfio-pci for a VM); for a guest no group names, those of now
// that stay on that driver. from says which, for the report.
func AfterSplit(inv *inventory.Inventory, p *plan.Plan, d plan.Desired, g Guest, now []inventory.GPU) (gpus []inventory.GPU, from string) {
	want := "nvidia"
	if g.Kind == VM {
		want = plan.VFIO
	}
	end := EndDrivers(inv, p)
	var groups []string
	for _, t := range d.Targets {
		ids := t.Containers
		if g.Kind == VM {
			ids = t.VMs
		}
		if slices.Contains(ids, g.ID) {
			groups = append(groups, t.Name)
		}
	}
	target := map[pci.Address]string{}
	for _, m := range append(slices.Clone(p.Moves), p.InPlace...) {
		if m.Role == plan.RoleGPU {
			target[m.Device] = m.Target
		}
	}
	if len(groups) == 0 {
		for _, gpu := range now {
			if end[gpu.Address] == want {
				gpus = append(gpus, gpu)
			}
		}
		return gpus, fmt.Sprintf("no group names %s: the GPUs it has now that stay on %s", g, want)
	}
	for _, gpu := range inv.GPUs {
		if slices.Contains(groups, target[gpu.Address]) && end[gpu.Address] == want {
			gpus = append(gpus, gpu)
		}
	}
	return gpus, fmt.Sprintf("group %s", strings.Join(quoted(groups), ", "))
}

func quoted(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

// EndDrivers says, for every GPU, the driver it ends on once p is applied: a move's
// target (the kernel's choice being the vendor's driver, nvidia for NVIDIA GPUs), else
// the driver it has now.
func EndDrivers(inv *inventory.Inventory, p *plan.Plan) map[pci.Address]string {
	out := map[pci.Address]string{}
	for _, gpu := range inv.GPUs {
		out[gpu.Address] = gpu.Driver
	}
	for _, m := range append(slices.Clone(p.Moves), p.InPlace...) {
		if _, ok := out[m.Device]; !ok {
			continue
		}
		to := m.To
		if to == plan.Default {
			to = vendorDriver(inv, m.Device)
		}
		out[m.Device] = to
	}
	return out
}

func vendorDriver(inv *inventory.Inventory, a pci.Address) string {
	if d := inv.Tree.Lookup(a); d != nil {
		switch d.VendorID {
		case 0x10de:
			return "nvidia"
		case 0x1002:
			return "amdgpu"
		}
	}
	return ""
}

// UnknownGPUError is a GPU whose memory nothing gives: no override, no figure of the
// CUDA driver, not in the table.
type UnknownGPUError struct {
	Address        pci.Address
	Vendor, Device uint16
	Name           string
}

func (e *UnknownGPUError) Error() string {
	return fmt.Sprintf("%s is a %04x:%04x (%s), which gpusplit's table of GPUs does not know", e.Address, e.Vendor, e.Device, e.Name)
}

// Memory gives each GPU its memory: override when above 0 (--gpu-memory), else what the
// CUDA driver measured of it (measured, by address: the GPUs it drives), else the
// table's figure by PCI id. A GPU none of them knows is an *UnknownGPUError.
func Memory(gpus []inventory.GPU, override int64, measured map[pci.Address]int64) ([]GPU, error) {
	var out []GPU
	for _, g := range gpus {
		x := GPU{Address: g.Address, Name: g.DeviceName, NUMANode: g.NUMANode}
		if x.Name == "" {
			x.Name = fmt.Sprintf("%04x:%04x", g.VendorID, g.DeviceID)
		}
		switch k, ok := Lookup(g.VendorID, g.DeviceID); {
		case override > 0:
			x.Memory, x.MemoryFrom = override, "--gpu-memory"
		case measured[g.Address] > 0:
			x.Memory, x.MemoryFrom = measured[g.Address], "the CUDA driver (cuDeviceTotalMem)"
			if ok {
				x.Name = k.Name
			}
		case ok:
			x.Memory, x.MemoryFrom = k.Bytes, k.Describe()
			x.Name = k.Name
		default:
			return nil, &UnknownGPUError{g.Address, g.VendorID, g.DeviceID, x.Name}
		}
		out = append(out, x)
	}
	return out, nil
}
