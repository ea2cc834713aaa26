package kmsg

import (
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
)

// NotReady is the PCI core's report that a device did not answer after a reset or a
// power transition (drivers/pci/pci.c pci_dev_wait: "not ready %dms after %s; waiting",
// then "…; giving up").
type NotReady struct {
	Device string
	After  string // "FLR", "bus reset", "resume", "PM D3hot->D0"
	GaveUp bool
}

var notReadyRe = lazyre.New(`^not ready \d+ms after (.+); (waiting|giving up)$`)

// ParseNotReady recognises "vfio-pci 0000:01:00.0: not ready 65535ms after FLR; giving up".
func ParseNotReady(msg string) (NotReady, bool) {
	if !strings.Contains(msg, "not ready ") {
		return NotReady{}, false
	}
	var out NotReady
	found := eachLine(msg, func(line string) bool {
		_, bdf, rest, ok := pciPrefix(line)
		if !ok {
			return false
		}
		m := notReadyRe.FindStringSubmatch(rest)
		if m == nil {
			return false
		}
		out = NotReady{Device: bdf, After: m[1], GaveUp: m[2] == "giving up"}
		return true
	})
	return out, found
}

// VFIOError is one of QEMU's or the kernel's messages for a device that could not be
// given to a VM.
type VFIOError struct {
	Device string
	Kind   string // "reset" (cannot reset), "group" (group not viable), "bar" (BAR cannot be reserved)
	Group  int    // the IOMMU group named, -1 when none
	BAR    string // "BAR 1", for Kind "bar"
	// Start and End are the range of the BAR that could not be reserved.
	Start, End uint64
}

var (
	// QEMU hw/vfio/pci.c: "vfio: Cannot reset device %s, depends on group %d which is not owned."
	cannotResetRe = lazyre.New(`vfio: Cannot reset device ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]), depends on group (\d+) which is not owned`)
	// QEMU: "vfio %s: group %d is not viable" (older: "vfio error: %s: group %d is not viable").
	notViableRe = lazyre.New(`vfio(?: error:)? ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): group (\d+) is not viable`)
	// drivers/pci/pci.c __pci_request_region: "BAR %d: can't reserve %pR".
	cantReserveRe = lazyre.New(`^(BAR \d+): can't reserve \[(?:mem|io)\s+(0x[0-9a-fA-F]+)-(0x[0-9a-fA-F]+)`)
)

// ParseVFIOError recognises:
//
//	qemu-system-x86_64: vfio: Cannot reset device 0000:03:00.0, depends on group 14 which is not owned.
//	qemu-system-x86_64: -device vfio-pci,host=01:00.0: vfio error: 0000:01:00.0: group 1 is not viable
//	vfio-pci 0000:c3:00.0: BAR 0: can't reserve [mem 0x2800000000-0x2fffffffff 64bit pref]
func ParseVFIOError(msg string) (VFIOError, bool) {
	if m := cannotResetRe.FindStringSubmatch(msg); m != nil {
		g, _ := strconv.Atoi(m[2])
		return VFIOError{Device: strings.ToLower(m[1]), Kind: "reset", Group: g}, true
	}
	if m := notViableRe.FindStringSubmatch(msg); m != nil {
		g, _ := strconv.Atoi(m[2])
		return VFIOError{Device: strings.ToLower(m[1]), Kind: "group", Group: g}, true
	}
	if !strings.Contains(msg, "can't reserve") {
		return VFIOError{}, false
	}
	var out VFIOError
	found := eachLine(msg, func(line string) bool {
		_, bdf, rest, ok := pciPrefix(line)
		if !ok {
			return false
		}
		m := cantReserveRe.FindStringSubmatch(rest)
		if m == nil {
			return false
		}
		start, _ := parseHex(m[2], 64)
		end, _ := parseHex(m[3], 64)
		out = VFIOError{Device: bdf, Kind: "bar", Group: -1, BAR: m[1], Start: start, End: end}
		return true
	})
	return out, found
}

// BootLine is the kernel's record of the command line it was booted with.
type BootLine struct {
	// Cmdline is the command line; Unknown the words of it the kernel did not know
	// ("Unknown kernel command line parameters"), which it passes to user space.
	Cmdline string
	Unknown []string
	// Early is set for x86's "Command line:", printed before the kernel adds what it
	// was built with: the boot loader's part alone.
	Early bool
}

// ParseBootLine recognises "Kernel command line: …" (init/main.c, every architecture;
// x86's earlier "Command line: …" holds the boot loader's part alone) and "Unknown kernel
// command line parameters \"…\", will be passed to user space." (since 5.15).
func ParseBootLine(msg string) (BootLine, bool) {
	if rest, ok := strings.CutPrefix(msg, "Kernel command line: "); ok {
		return BootLine{Cmdline: strings.TrimSpace(rest)}, true
	}
	if rest, ok := strings.CutPrefix(msg, "Command line: "); ok {
		return BootLine{Cmdline: strings.TrimSpace(rest), Early: true}, true
	}
	if rest, ok := strings.CutPrefix(msg, `Unknown kernel command line parameters "`); ok {
		words, _, ok := strings.Cut(rest, `", will be passed to user space`)
		if ok {
			return BootLine{Unknown: strings.Fields(words)}, true
		}
	}
	return BootLine{}, false
}
