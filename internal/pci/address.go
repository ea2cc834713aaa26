// Package pci scans the PCI devices of a host from sysfs: identity, driver, IOMMU group,
// NUMA node, link, BARs and the chain of bridges from the host bridge down; and selects
// the devices that count as GPUs, with the companion functions of their slots.
package pci

import (
	"fmt"
	"strconv"
	"strings"
)

// Address is a PCI function address: domain, bus, device (slot) and function.
// It is parsed and validated once; sysfs paths are only built from an Address.
type Address struct {
	Domain   uint32
	Bus      uint8
	Device   uint8 // 0–31
	Function uint8 // 0–7
}

// ParseAddress parses "0000:81:00.0" (the form sysfs uses), also in upper case, with a
// domain of 4 to 8 hex digits (Intel VMD domains have 5), or "81:00.0" for domain 0.
func ParseAddress(s string) (Address, error) {
	bad := func(why string) (Address, error) {
		return Address{}, fmt.Errorf("invalid PCI address %q: %s (want DDDD:BB:SS.F, such as 0000:81:00.0)", s, why)
	}
	parts := strings.Split(s, ":")
	var domain uint64
	switch len(parts) {
	case 3:
		if len(parts[0]) < 4 || len(parts[0]) > 8 {
			return bad("the domain must have 4 to 8 hex digits")
		}
		d, err := strconv.ParseUint(parts[0], 16, 32)
		if err != nil {
			return bad("the domain is not hexadecimal")
		}
		domain = d
		parts = parts[1:]
	case 2:
	default:
		return bad("wrong number of ':'")
	}
	if len(parts[0]) != 2 {
		return bad("the bus must have 2 hex digits")
	}
	bus, err := strconv.ParseUint(parts[0], 16, 8)
	if err != nil {
		return bad("the bus is not hexadecimal")
	}
	slot, fn, ok := strings.Cut(parts[1], ".")
	if !ok || len(slot) != 2 || len(fn) != 1 {
		return bad("the slot and function must read SS.F")
	}
	dev, err := strconv.ParseUint(slot, 16, 8)
	if err != nil || dev > 0x1f {
		return bad("the slot must be 00 to 1f")
	}
	f, err := strconv.ParseUint(fn, 16, 8)
	if err != nil || f > 7 {
		return bad("the function must be 0 to 7")
	}
	return Address{Domain: uint32(domain), Bus: uint8(bus), Device: uint8(dev), Function: uint8(f)}, nil
}

// String returns the address as sysfs writes it: lower case, domain of at least 4 digits.
func (a Address) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", a.Domain, a.Bus, a.Device, a.Function)
}

// Slot returns the address of function 0 of the same slot.
func (a Address) Slot() Address { a.Function = 0; return a }

// Compare orders addresses numerically: domain, bus, device, function.
func (a Address) Compare(b Address) int {
	switch {
	case a.key() < b.key():
		return -1
	case a.key() > b.key():
		return 1
	}
	return 0
}

func (a Address) key() uint64 {
	return uint64(a.Domain)<<16 | uint64(a.Bus)<<8 | uint64(a.Device)<<3 | uint64(a.Function)
}

// MarshalText writes the sysfs form, so JSON carries "0000:81:00.0".
func (a Address) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText parses the forms ParseAddress accepts.
func (a *Address) UnmarshalText(b []byte) error {
	v, err := ParseAddress(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// HostBridge names a PCI host bridge (root complex) as sysfs does: "pci0000:00".
type HostBridge struct {
	Domain uint32
	Bus    uint8
}

func (b HostBridge) String() string { return fmt.Sprintf("pci%04x:%02x", b.Domain, b.Bus) }

// MarshalText writes the sysfs name.
func (b HostBridge) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// parseHostBridge parses a sysfs host bridge directory name such as "pci0000:00".
func parseHostBridge(s string) (HostBridge, bool) {
	rest, ok := strings.CutPrefix(s, "pci")
	if !ok {
		return HostBridge{}, false
	}
	dom, bus, ok := strings.Cut(rest, ":")
	if !ok || len(dom) < 4 || len(dom) > 8 || len(bus) != 2 {
		return HostBridge{}, false
	}
	d, err := strconv.ParseUint(dom, 16, 32)
	if err != nil {
		return HostBridge{}, false
	}
	b, err := strconv.ParseUint(bus, 16, 8)
	if err != nil {
		return HostBridge{}, false
	}
	return HostBridge{Domain: uint32(d), Bus: uint8(b)}, true
}

// isSysfsAddress reports whether s is a device name as sysfs writes it (lower case, full domain).
func isSysfsAddress(s string) (Address, bool) {
	a, err := ParseAddress(s)
	if err != nil || a.String() != s {
		return Address{}, false
	}
	return a, true
}
