package inventory

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// VF is an SR-IOV virtual function of a GPU, enabled, with what NVIDIA's vGPU manager
// says of it on kernels since 6.8: there a vGPU is a VF given a type, passed to a VM
// whole (qemu-server's mdev=nvidia-N), and the manager's files are the VF's, not the
// GPU's.
type VF struct {
	*pci.Device
	// VGPU says the VF has the vGPU manager's nvidia/ directory (Proxmox's lspci then
	// marks it "nvidia", and takes mdev=nvidia-N on it).
	VGPU bool
	// VGPUType is the type the VF carries: nvidia/current_vgpu_type, 0 for none.
	VGPUType int
	// Creatable are the types the VF can take now, given what its siblings carry:
	// nvidia/creatable_vgpu_types, "ID : name" lines under a header line.
	Creatable []VGPUType
}

// VGPUType is a vGPU type of NVIDIA's vGPU manager: the id qemu-server's
// mdev=nvidia-<ID> names, and its name ("NVIDIA RTX PRO 6000 Blackwell DC-24Q").
type VGPUType struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// maxVGPUTypes bounds the types read of one VF: NVIDIA's boards list a few dozen.
const maxVGPUTypes = 256

// virtFns reads the enabled virtual functions of a GPU (pci.Device.VirtFns), those the
// tree has, with the vGPU manager's files of each; what cannot be read is a warning.
func (inv *Inventory) virtFns(g *pci.Device) []VF {
	var out []VF
	for _, a := range g.VirtFns {
		d := inv.Tree.Lookup(a)
		if d == nil {
			inv.Warnings = append(inv.Warnings, fmt.Sprintf("%s: virtual function %s is not among the PCI devices; left out", g.Address, a))
			continue
		}
		vf := VF{Device: d, VGPU: inv.h.IsDir(d.Path + "/nvidia")}
		if vf.VGPU {
			var err error
			if vf.VGPUType, err = currentVGPUType(inv.h, d.Path); err != nil {
				inv.Warnings = append(inv.Warnings, fmt.Sprintf("%s: %v; its vGPU type taken as none", a, err))
			}
			if vf.Creatable, err = creatableVGPUTypes(inv.h, d.Path); err != nil {
				inv.Warnings = append(inv.Warnings, fmt.Sprintf("%s: %v; the vGPU types after that line left out", a, err))
			}
		}
		out = append(out, vf)
	}
	return out
}

// currentVGPUType reads nvidia/current_vgpu_type: the type id, 0 for none.
func currentVGPUType(h *host.Host, dir string) (int, error) {
	s, err := h.ReadString(dir + "/nvidia/current_vgpu_type")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("nvidia/current_vgpu_type holds %q, not a vGPU type id", s)
	}
	return n, nil
}

// creatableVGPUTypes reads nvidia/creatable_vgpu_types, as pve-common's get_mdev_types
// does: a header line starting "ID", then "<id> : <name>" lines.
func creatableVGPUTypes(h *host.Host, dir string) ([]VGPUType, error) {
	s, err := h.ReadString(dir + "/nvidia/creatable_vgpu_types")
	if err != nil {
		return nil, err
	}
	return ParseVGPUTypes(s)
}

// ParseVGPUTypes reads the lines of nvidia/creatable_vgpu_types: the header ("ID    :
// vGPU Name") and empty lines are skipped; the others must read "<id> : <name>".
func ParseVGPUTypes(s string) ([]VGPUType, error) {
	var out []VGPUType
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "ID") {
			continue
		}
		id, name, ok := strings.Cut(line, ":")
		n, err := strconv.Atoi(strings.TrimSpace(id))
		if !ok || err != nil || n <= 0 {
			return out, fmt.Errorf("nvidia/creatable_vgpu_types: %q is not \"<id> : <name>\"", line)
		}
		if len(out) == maxVGPUTypes {
			return out, fmt.Errorf("nvidia/creatable_vgpu_types lists more than %d types", maxVGPUTypes)
		}
		out = append(out, VGPUType{ID: n, Name: strings.TrimSpace(name)})
	}
	return out, nil
}
