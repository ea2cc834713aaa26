package inventory

import (
	"fmt"

	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Report is the JSON form of inventory. Field names are part of gpusplit's interface:
// see docs/json.md.
type Report struct {
	Host      string      `json:"host"`
	NUMANodes int         `json:"numa_nodes"`
	GPUs      []GPUReport `json:"gpus"`
	Warnings  []string    `json:"warnings"`
}

// DeviceReport is a PCI function: ids as hex strings, names, driver, IOMMU group.
type DeviceReport struct {
	Address         pci.Address `json:"address"`
	Vendor          string      `json:"vendor"`
	Device          string      `json:"device"`
	SubsystemVendor string      `json:"subsystem_vendor"`
	SubsystemDevice string      `json:"subsystem_device"`
	Class           string      `json:"class"`
	Revision        string      `json:"revision"`
	VendorName      string      `json:"vendor_name"`
	DeviceName      string      `json:"device_name"`
	ClassName       string      `json:"class_name"`
	Driver          string      `json:"driver"`
	DriverOverride  string      `json:"driver_override"`
	IOMMUGroup      int         `json:"iommu_group"`
}

// GPUReport is a GPU with its place in the topology, its BARs, functions and holders.
type GPUReport struct {
	Index int `json:"index"`
	DeviceReport
	NUMANode     int              `json:"numa_node"`
	CPUAffinity  string           `json:"cpu_affinity"`
	GroupMembers []pci.Address    `json:"iommu_group_members"`
	HostBridge   pci.HostBridge   `json:"host_bridge"`
	RootPort     *pci.Address     `json:"root_port"`
	Parents      []pci.Address    `json:"parents"`
	Link         pci.Link         `json:"link"`
	BARs         []BARReport      `json:"bars"`
	Minor        *int             `json:"minor"`
	DeviceNodes  []string         `json:"device_nodes"`
	Functions    []FunctionReport `json:"functions"`
	Holders      []HolderReport   `json:"holders"`
	SysfsPath    string           `json:"sysfs_path"`
	// SRIOV is null for a GPU without SR-IOV (no sriov_totalvfs, or 0).
	SRIOV *SRIOVReport `json:"sriov"`
}

// SRIOVReport is what a GPU's SR-IOV capability offers, and the virtual functions it
// has enabled.
type SRIOVReport struct {
	TotalVFs int        `json:"total_vfs"` // sriov_totalvfs
	NumVFs   int        `json:"num_vfs"`   // sriov_numvfs
	VFs      []VFReport `json:"vfs"`
}

// VFReport is an enabled virtual function: its ids and driver, and the vGPU of NVIDIA's
// vGPU manager (kernels since 6.8).
type VFReport struct {
	DeviceReport
	// VGPU says the VF has the manager's nvidia/ directory; VGPUType is the type it
	// carries (nvidia/current_vgpu_type, 0 for none), null without the directory.
	VGPU               bool           `json:"vgpu"`
	VGPUType           *int           `json:"vgpu_type"`
	CreatableVGPUTypes []VGPUType     `json:"creatable_vgpu_types"`
	Holders            []HolderReport `json:"holders"`
}

// BARReport carries addresses and flags as hex strings: they can exceed what a JSON
// number holds exactly in many parsers (2^53).
type BARReport struct {
	Name         string `json:"name"`
	Index        int    `json:"index"`
	Start        string `json:"start"`
	Size         uint64 `json:"size"`
	Flags        string `json:"flags"`
	IO           bool   `json:"io"`
	Is64Bit      bool   `json:"is_64bit"`
	Prefetchable bool   `json:"prefetchable"`
	Unassigned   bool   `json:"unassigned"`
}

// FunctionReport is a GPU's companion function and its holders.
type FunctionReport struct {
	DeviceReport
	Holders []HolderReport `json:"holders"`
}

// HolderReport is what uses a device (holders.Holder).
type HolderReport struct {
	Kind      holders.Kind `json:"kind"`
	What      string       `json:"what"`
	Name      string       `json:"name"`
	Block     *string      `json:"block_device"`
	Release   string       `json:"release"`
	PID       *int         `json:"pid"`
	Command   string       `json:"command"`
	Cmdline   []string     `json:"cmdline"`
	Container *int         `json:"container"`
	VM        *int         `json:"vm"`
	Files     []string     `json:"files"`
}

func deviceReport(d *pci.Device) DeviceReport {
	return DeviceReport{
		Address:         d.Address,
		Vendor:          fmt.Sprintf("%04x", d.VendorID),
		Device:          fmt.Sprintf("%04x", d.DeviceID),
		SubsystemVendor: fmt.Sprintf("%04x", d.SubVendorID),
		SubsystemDevice: fmt.Sprintf("%04x", d.SubDeviceID),
		Class:           fmt.Sprintf("%06x", d.Class),
		Revision:        fmt.Sprintf("%02x", d.Revision),
		VendorName:      d.VendorName,
		DeviceName:      d.DeviceName,
		ClassName:       d.ClassName,
		Driver:          d.Driver,
		DriverOverride:  d.DriverOverride,
		IOMMUGroup:      d.IOMMUGroup,
	}
}

// Report is the inventory's JSON form, with the host's count of NUMA nodes.
func (inv *Inventory) Report(numa int) Report {
	doc := Report{Host: inv.Root, NUMANodes: numa, GPUs: []GPUReport{}, Warnings: inv.Warnings}
	if doc.Warnings == nil {
		doc.Warnings = []string{}
	}
	for i, gp := range inv.GPUs {
		j := GPUReport{
			Index:        i,
			DeviceReport: deviceReport(gp.Device),
			NUMANode:     gp.NUMANode,
			CPUAffinity:  gp.LocalCPUs.String(),
			GroupMembers: []pci.Address{},
			HostBridge:   gp.HostBridge,
			Parents:      append([]pci.Address{}, gp.Parents...),
			Link:         gp.Link,
			BARs:         []BARReport{},
			DeviceNodes:  append([]string{}, gp.Nodes...),
			Functions:    []FunctionReport{},
			Holders:      []HolderReport{},
			SysfsPath:    gp.Path,
		}
		if rp, ok := gp.RootPort(); ok {
			j.RootPort = &rp
		}
		if gp.Minor >= 0 {
			m := gp.Minor
			j.Minor = &m
		}
		for _, m := range inv.Tree.Group(gp.IOMMUGroup) {
			j.GroupMembers = append(j.GroupMembers, m.Address)
		}
		for _, b := range gp.BARs {
			j.BARs = append(j.BARs, BARReport{
				Name: b.Name(), Index: b.Index, Start: fmt.Sprintf("0x%x", b.Start), Size: b.Size,
				Flags: fmt.Sprintf("0x%x", b.Flags), IO: b.IO, Is64Bit: b.Is64Bit, Prefetchable: b.Prefetchable, Unassigned: b.Unassigned,
			})
		}
		for _, f := range gp.Functions {
			j.Functions = append(j.Functions, FunctionReport{DeviceReport: deviceReport(f), Holders: HolderReports(inv.HoldersOf(f.Address))})
		}
		j.Holders = HolderReports(gp.Holders)
		j.SRIOV = inv.sriovReport(gp)
		doc.GPUs = append(doc.GPUs, j)
	}
	return doc
}

// HolderReports is the JSON form of a device's holders: [] when none.
func HolderReports(hs []holders.Holder) []HolderReport {
	out := []HolderReport{}
	for _, h := range hs {
		out = append(out, holderReport(h))
	}
	return out
}

func holderReport(h holders.Holder) HolderReport {
	j := HolderReport{Kind: h.Kind, What: h.String(), Name: h.Name, Release: h.Release, Command: h.Command,
		Cmdline: append([]string{}, h.Cmdline...), Files: append([]string{}, h.Files...)}
	if h.Kind == holders.KindProcess {
		pid := h.PID
		j.PID = &pid
	}
	if h.Block != "" {
		b := h.Block
		j.Block = &b
	}
	if h.Container > 0 {
		ct := h.Container
		j.Container = &ct
	}
	if h.VM > 0 {
		vm := h.VM
		j.VM = &vm
	}
	return j
}

func (inv *Inventory) sriovReport(gp GPU) *SRIOVReport {
	if gp.TotalVFs == 0 && len(gp.VFs) == 0 {
		return nil
	}
	r := &SRIOVReport{TotalVFs: gp.TotalVFs, NumVFs: gp.NumVFs, VFs: []VFReport{}}
	for _, vf := range gp.VFs {
		j := VFReport{DeviceReport: deviceReport(vf.Device), VGPU: vf.VGPU, CreatableVGPUTypes: append([]VGPUType{}, vf.Creatable...), Holders: HolderReports(inv.HoldersOf(vf.Address))}
		if vf.VGPU {
			t := vf.VGPUType
			j.VGPUType = &t
		}
		r.VFs = append(r.VFs, j)
	}
	return r
}
