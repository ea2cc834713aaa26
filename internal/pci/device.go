package pci

import (
	"fmt"

	"github.com/gpusplit/gpusplit/internal/cpuset"
)

// Device is one PCI function as sysfs shows it.
type Device struct {
	Address        Address    // the directory's name under /sys/bus/pci/devices
	VendorID       uint16     // vendor
	DeviceID       uint16     // device
	SubVendorID    uint16     // subsystem_vendor
	SubDeviceID    uint16     // subsystem_device
	Class          uint32     // class: 24 bits, class, subclass, programming interface
	Revision       uint8      // revision
	Driver         string     // the driver link's target's name; "" when no driver is bound
	DriverOverride string     // driver_override; "" when unset ("(null)" in sysfs)
	IOMMUGroup     int        // the iommu_group link's target's name; -1 when the device has none
	NUMANode       int        // numa_node; -1 when unknown, as sysfs writes it
	LocalCPUs      cpuset.Set // local_cpulist
	Link           Link       // current_link_speed, current_link_width, max_link_speed, max_link_width
	BARs           []BAR      // resource: its lines 0-5 and the ROM's, 6
	// HostBridge is the root complex the device hangs off; Parents are the bridges
	// between it and the device, from the root port down. A device on the root bus
	// (QEMU i440fx, integrated devices) has no parents.
	HostBridge HostBridge
	Parents    []Address
	// PhysFn is the physical function of an SR-IOV virtual function: the physfn link.
	PhysFn *Address
	// TotalVFs is how many SR-IOV virtual functions a physical function can have
	// (sriov_totalvfs; 0 for a device without SR-IOV), NumVFs how many are enabled
	// (sriov_numvfs), and VirtFns those enabled, in the order of their virtfnN links.
	TotalVFs int
	NumVFs   int
	VirtFns  []Address
	// Path is the device's directory under /sys/devices, links resolved: the
	// /sys/bus/pci/devices link's target.
	Path string

	// Names from the pci.ids database; "" when unknown.
	VendorName string
	DeviceName string
	ClassName  string
}

// IsBridge reports whether the device is a PCI-to-PCI bridge: a root port or a switch port.
func (d *Device) IsBridge() bool { return d.Class>>8 == 0x0604 || d.Class>>8 == 0x0609 }

// IsDisplay reports whether the device is a display controller (VGA, 3D, other).
func (d *Device) IsDisplay() bool { return d.Class>>16 == 0x03 }

// ID returns "vendor:device" as lspci -n prints it: "10de:2bb1".
func (d *Device) ID() string { return fmt.Sprintf("%04x:%04x", d.VendorID, d.DeviceID) }

// SubsystemID returns "subvendor:subdevice": "10de:204b".
func (d *Device) SubsystemID() string { return fmt.Sprintf("%04x:%04x", d.SubVendorID, d.SubDeviceID) }

// RootPort returns the first bridge below the host bridge, if any.
func (d *Device) RootPort() (Address, bool) {
	if len(d.Parents) == 0 {
		return Address{}, false
	}
	return d.Parents[0], true
}

// Name returns the most specific name known: the device name, or the vendor and the
// numeric id, or the numeric id alone.
func (d *Device) Name() string {
	switch {
	case d.DeviceName != "":
		return d.DeviceName
	case d.VendorName != "":
		return fmt.Sprintf("%s device %04x", d.VendorName, d.DeviceID)
	}
	return d.ID()
}
