package kmsg

import (
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
)

// BARFailure is a PCI resource the kernel could not give address space to.
type BARFailure struct {
	Device   string // "0000:01:00.0"
	Resource string // "BAR 1", "ROM", "VF BAR 0", "bridge window"; older kernels number all of them: "BAR 6", "BAR 14"
	Size     uint64 // bytes
	// What the kernel said: "can't assign; no space", "failed to assign", "no space for",
	// or "not assigned; can't enable device" (a driver then tried to enable the device).
	What string
}

// resource is the %pR of a resource: "[mem size 0x400000000 64bit pref]" when unassigned,
// "[mem 0x7d40000000-0x7ff3fffffff 64bit pref]" when it has a range, "[io  size 0x1000]".
const resource = `\[(?:mem|io)\s+(?:size (0x[0-9a-fA-F]+)|(0x[0-9a-fA-F]+)-(0x[0-9a-fA-F]+))[^\]]*\]`

var (
	// drivers/pci/setup-res.c since 6.8: "%s %pR: can't assign; no space".
	barNew = lazyre.New(`^(BAR \d+|ROM|VF BAR \d+|bridge window) ` + resource +
		`: (can't assign; no space|failed to assign|not assigned; can't enable device)`)
	// Before: "BAR %d: no space for %pR", "BAR %d: failed to assign %pR".
	barOld = lazyre.New(`^BAR (\d+): (no space for|failed to assign) ` + resource)
	// pci_enable_resources before 6.8: "can't enable device: BAR %d %pR not assigned".
	barOldEnable = lazyre.New(`^can't enable device: BAR (\d+) ` + resource + ` not assigned`)
)

// resourceSize is the size a %pR match gives: its "size", or the length of its range.
func resourceSize(size, start, end string) (uint64, bool) {
	if size != "" {
		return parseHex(size, 64)
	}
	s, ok1 := parseHex(start, 64)
	e, ok2 := parseHex(end, 64)
	if !ok1 || !ok2 || e < s {
		return 0, false
	}
	return e - s + 1, true
}

// ParseBARFailure recognises the kernel's lines about a PCI resource it found no room for,
// in the current form and the older one:
//
//	pci 0000:01:00.0: BAR 1 [mem size 0x10000000 64bit pref]: can't assign; no space
//	pci 0000:01:00.0: BAR 1 [mem size 0x10000000 64bit pref]: failed to assign
//	pci 0000:01:01.0: BAR 1: no space for [mem size 0x400000000 64bit pref]
//	pci 0000:01:01.0: BAR 1: failed to assign [mem size 0x400000000 64bit pref]
//
// and the error a driver gets for such a resource when it enables the device ("nvidia
// 0000:01:00.0: BAR 1 [mem size …]: not assigned; can't enable device"). "can't assign;
// bogus alignment" is not a lack of space and is not recognised.
func ParseBARFailure(msg string) (BARFailure, bool) {
	if !strings.Contains(msg, "assign") && !strings.Contains(msg, "no space") {
		return BARFailure{}, false
	}
	var out BARFailure
	found := eachLine(msg, func(line string) bool {
		_, bdf, rest, ok := pciPrefix(line)
		if !ok {
			return false
		}
		var res, what, size, start, end string
		if m := barNew.FindStringSubmatch(rest); m != nil {
			res, size, start, end, what = m[1], m[2], m[3], m[4], m[5]
		} else if m := barOld.FindStringSubmatch(rest); m != nil {
			res, what, size, start, end = "BAR "+m[1], m[2], m[3], m[4], m[5]
		} else if m := barOldEnable.FindStringSubmatch(rest); m != nil {
			res, size, start, end, what = "BAR "+m[1], m[2], m[3], m[4], "not assigned; can't enable device"
		} else {
			return false
		}
		n, ok := resourceSize(size, start, end)
		if !ok {
			return false
		}
		out = BARFailure{Device: bdf, Resource: res, Size: n, What: what}
		return true
	})
	return out, found
}

// IsReallocHint recognises "Some PCI device resources are unassigned, try booting with
// pci=realloc", which the kernel prints once for a bus when resources stayed unassigned.
func IsReallocHint(msg string) bool {
	return strings.Contains(msg, "Some PCI device resources are unassigned, try booting with pci=realloc")
}

// ProbeFailure is a driver whose probe routine failed for a device.
type ProbeFailure struct {
	Driver string // "nvidia"
	Device string // "0000:14:00.0"; a device that is not a PCI address is kept as printed
	Errno  int    // as printed: -1 for "failed with error -1"
}

var (
	// drivers/base/dd.c, older: pr_warn("%s: probe of %s failed with error %d\n").
	probeOld = lazyre.New(`^([^\s:]+): probe of (\S+) failed with error (-?\d+)`)
	// Newer: dev_err(dev, "probe with driver %s failed with error %d\n").
	probeNew = lazyre.New(`^probe with driver (\S+) failed with error (-?\d+)`)
)

// ParseProbeFailure recognises the driver core's report of a failed probe, in both forms:
//
//	nvidia: probe of 0000:14:00.0 failed with error -1
//	nvidia 0000:01:00.0: probe with driver nvidia failed with error -1
func ParseProbeFailure(msg string) (ProbeFailure, bool) {
	if !strings.Contains(msg, "failed with error") {
		return ProbeFailure{}, false
	}
	var out ProbeFailure
	found := eachLine(msg, func(line string) bool {
		if m := probeOld.FindStringSubmatch(line); m != nil {
			n, err := strconv.Atoi(m[3])
			if err != nil {
				return false
			}
			out = ProbeFailure{Driver: m[1], Device: normDevice(m[2]), Errno: n}
			return true
		}
		if _, device, rest, ok := devPrefix(line); ok {
			if m := probeNew.FindStringSubmatch(rest); m != nil {
				n, err := strconv.Atoi(m[2])
				if err != nil {
					return false
				}
				out = ProbeFailure{Driver: m[1], Device: normDevice(device), Errno: n}
				return true
			}
		}
		return false
	})
	return out, found
}

// LinkLimit is the kernel's boot-time report that a PCIe device's link is slower than the
// device could run.
type LinkLimit struct {
	Device           string // "0000:01:00.0"; empty when the line had no device prefix
	Available        string // "31.504 Gb/s"
	LimitedBy        string // "8.0 GT/s PCIe x4" (older kernels: "8 GT/s x4")
	At               string // the device whose link is the limit, "0000:00:00.0"
	Capable          string // "16.0 GT/s PCIe x16"
	CapableBandwidth string // "252.048 Gb/s"
}

// drivers/pci/pci.c __pcie_print_link_status: "%u.%03u Gb/s available PCIe bandwidth,
// limited by %s x%d link at %s (capable of %u.%03u Gb/s with %s x%d link)".
var linkLimitRe = lazyre.New(`^(\d+\.\d+ Gb/s) available PCIe bandwidth, limited by (.+? x\d+) link at (\S+) \(capable of (\d+\.\d+ Gb/s) with (.+? x\d+) link\)`)

// ParseLinkLimit recognises the kernel's report of a downtrained PCIe link:
//
//	pci 0000:01:00.0: 31.504 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x4 link at 0000:00:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)
//
// The report of a link that is not limited ("… available PCIe bandwidth (16.0 GT/s PCIe
// x16 link)") is not recognised.
func ParseLinkLimit(msg string) (LinkLimit, bool) {
	if !strings.Contains(msg, "available PCIe bandwidth, limited by") {
		return LinkLimit{}, false
	}
	var out LinkLimit
	found := eachLine(msg, func(line string) bool {
		device := ""
		if _, bdf, rest, ok := pciPrefix(line); ok {
			device, line = bdf, rest
		}
		m := linkLimitRe.FindStringSubmatch(line)
		if m == nil {
			return false
		}
		out = LinkLimit{Device: device, Available: m[1], LimitedBy: m[2], At: normDevice(m[3]), CapableBandwidth: m[4], Capable: m[5]}
		return true
	})
	return out, found
}

// Enumerated is the kernel's line for a PCI function it found while scanning the bus.
type Enumerated struct {
	Device string // "0000:01:00.0"
	Vendor uint16
	ID     uint16 // the device id
	Class  uint32 // 0x030000: class, subclass, programming interface
}

// IsGPU reports whether the function is a display controller (VGA, 3D, other), or the
// audio function of an NVIDIA GPU, which goes with it.
func (e Enumerated) IsGPU() bool {
	return e.Class>>16 == 0x03 || (e.Vendor == 0x10de && e.Class>>8 == 0x0403)
}

// drivers/pci/probe.c pci_setup_device: "[%04x:%04x] type %02x class %#08x" and, since
// 6.7, " %s" with what kind of function it is ("PCIe Legacy Endpoint").
var enumeratedRe = lazyre.New(`^\[([0-9a-f]{4}):([0-9a-f]{4})\] type [0-9a-f]{2} class 0x([0-9a-f]{6})\b`)

// ParseEnumerated recognises the kernel's line for a function found on the bus:
//
//	pci 0000:01:00.0: [10de:2bb1] type 00 class 0x030000 PCIe Legacy Endpoint
//	pci 0000:01:00.0: [10de:1eb8] type 00 class 0x030200
//
// A log carries it for every function of the boot it records, which tells its GPUs
// when the log is another machine's.
func ParseEnumerated(msg string) (Enumerated, bool) {
	if !strings.Contains(msg, "] type ") {
		return Enumerated{}, false
	}
	var out Enumerated
	found := eachLine(msg, func(line string) bool {
		_, bdf, rest, ok := pciPrefix(line)
		if !ok {
			return false
		}
		m := enumeratedRe.FindStringSubmatch(rest)
		if m == nil {
			return false
		}
		v, _ := parseHex(m[1], 16)
		d, _ := parseHex(m[2], 16)
		c, _ := parseHex(m[3], 32)
		out = Enumerated{Device: bdf, Vendor: uint16(v), ID: uint16(d), Class: uint32(c)}
		return true
	})
	return out, found
}
