// Package vmlayout knows where a Proxmox VM's passed-through devices land inside the
// guest, and how to give the guest a PCIe layout that carries the host's NUMA nodes.
//
// On the host, Predict reads a VM's configuration and works out, with qemu-server's own
// rules, which host device each hostpciN gets and at which slot the guest sees it; the
// result is a Manifest. Inside the guest, Match finds the manifest's devices by that slot
// and their ids, so that a topology file can name the guest's bus ids while describing
// the host's NUMA nodes and links. Layout writes the QEMU arguments that put the GPUs
// behind pxb-pcie expander bridges, one per host NUMA node.
package vmlayout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
)

// ManifestVersion is the version of the manifest format this package writes and reads.
const ManifestVersion = 1

// Manifest describes the devices a VM passes through, as the guest will see them and as
// they are on the host.
type Manifest struct {
	Version int      `json:"version"`
	VMID    int      `json:"vmid"`
	Node    string   `json:"node"`    // the Proxmox node the VM runs on
	Machine string   `json:"machine"` // q35 or i440fx
	Devices []Device `json:"devices"`
	// GuestNUMA are the guest's NUMA nodes that are bound to exactly one host node
	// (numaN: …,hostnodes=H).
	GuestNUMA []GuestNode `json:"guest_numa"`
	// P2P is the host's evidence on peer-to-peer between the VM's GPUs (nccl-topo
	// --vm adds it); Verdict reads it.
	P2P   *HostP2P `json:"p2p,omitempty"`
	Notes []string `json:"notes"`
}

// Device is one PCI function passed through.
type Device struct {
	Hostpci string `json:"hostpci"` // the VM's key: hostpci0
	// GuestPath is where the guest finds the function: the device.function of each hop
	// from the root bus, "1c.0/00.0" for a function behind the root port at 00:1c.0.
	// Bus numbers are left out, since the guest's firmware assigns them.
	GuestPath string `json:"guest_path"`
	// Vendor and Device are the ids the guest sees: the host's, unless the entry
	// overrides them (vendor-id=, device-id=), when HostVendor and HostDevice keep the
	// host's. SubVendor and SubDevice are set only when overridden.
	Vendor      string      `json:"vendor"` // "10de"
	Device      string      `json:"device"` // "2bb1"
	HostVendor  string      `json:"host_vendor,omitempty"`
	HostDevice  string      `json:"host_device,omitempty"`
	SubVendor   string      `json:"sub_vendor,omitempty"`
	SubDevice   string      `json:"sub_device,omitempty"`
	Class       string      `json:"class"` // "0x030000", as sysfs writes it
	HostAddress pci.Address `json:"host_address"`
	HostNUMA    int         `json:"host_numa"` // -1 when unknown
	// LinkSpeed and LinkWidth are the host link as NCCL reads it: the slower and
	// narrower of the device's and its port's maximum.
	LinkSpeed string `json:"link_speed"`
	LinkWidth int    `json:"link_width"`
	Mapping   string `json:"mapping,omitempty"`
	// VGPU is the NVIDIA vGPU type of a virtual function passed as a vGPU
	// (mdev=nvidia-N, kernels since 6.8), and PhysFn the GPU it is part of; HostNUMA and
	// the link are the GPU's.
	// Clique is the x-nv-gpudirect-clique the VM's args give the entry, if any.
	Clique *int   `json:"clique,omitempty"`
	VGPU   string `json:"vgpu,omitempty"`
	PhysFn string `json:"physfn,omitempty"`
	// Choice says how the host device was found: "fixed" (the entry names one
	// device), "reserved" (Proxmox has reserved it for the running VM) or "predicted"
	// (the first free device of a mapping, as Proxmox picks at start).
	Choice string `json:"choice"`
	// Keep says the entry has driver=keep: qemu-server neither resets the device nor
	// binds it to vfio-pci at the VM's start (PVE::QemuServer::PCI, prepare_pci_device),
	// and the hook leaves it on its driver too. Not in the manifest, which is the guest's.
	Keep bool `json:"-"`
}

// GuestNode binds a guest NUMA node to the host node holding its memory.
type GuestNode struct {
	Guest int    `json:"guest"`
	Host  int    `json:"host"`
	CPUs  string `json:"cpus"` // the guest's vCPUs on it: "0-31"
}

// IsGPU says whether the function is a display controller.
func (d Device) IsGPU() bool { return strings.HasPrefix(d.Class, "0x03") }

// IsNIC says whether the function is a network controller (Ethernet, InfiniBand).
func (d Device) IsNIC() bool { return strings.HasPrefix(d.Class, "0x02") }

// GuestNode returns the guest NUMA node bound to a host node.
func (m *Manifest) GuestNode(host int) (GuestNode, bool) {
	for _, g := range m.GuestNUMA {
		if g.Host == host {
			return g, true
		}
	}
	return GuestNode{}, false
}

// Marshal is the manifest's file, as ParseManifest reads it: indented JSON for a person
// to read before copying it into the guest, with <, > and & left as they are.
func (m *Manifest) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ParseManifest reads a manifest, refusing one of another version or without devices.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a gpusplit VM manifest: %w", err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("manifest version %d; this gpusplit reads version %d: write it again with this version on the host", m.Version, ManifestVersion)
	}
	if len(m.Devices) == 0 {
		return nil, fmt.Errorf("the manifest of VM %d lists no devices", m.VMID)
	}
	for _, d := range m.Devices {
		if _, err := parsePath(d.GuestPath); err != nil {
			return nil, fmt.Errorf("%s: guest_path %q: %w", d.Hostpci, d.GuestPath, err)
		}
	}
	return &m, nil
}

// parsePath reads a guest path "1c.0/00.0" into its hops.
func parsePath(s string) ([][2]uint8, error) {
	var hops [][2]uint8
	for _, part := range strings.Split(s, "/") {
		var dev, fn uint8
		if n, err := fmt.Sscanf(part, "%02x.%1x", &dev, &fn); err != nil || n != 2 || dev > 31 || fn > 7 || len(part) != 4 {
			return nil, fmt.Errorf("%q is not a device.function such as 1c.0", part)
		}
		hops = append(hops, [2]uint8{dev, fn})
	}
	return hops, nil
}
