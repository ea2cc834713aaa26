package kmsg

import (
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
)

// Xid is an error NVIDIA's driver reports for a GPU.
type Xid struct {
	Device string // "0000:01:00.0": the driver prints the function-less "PCI:0000:01:00"
	Code   int
	Text   string // what follows the code (and the process, when one is named)
}

// The driver's formats (open-gpu-kernel-modules, kernel_rc.c): "NVRM: Xid (PCI:%04x:%02x:%02x[ GPU-I:%02u[ GPU-CI:%02u]]): %d, "
// then, up to R565 always and since R570 when a process is known, "pid=%s, name=%s, ",
// then the message. Drivers before about R400 printed "Xid (0000:03:00)".
var xidRe = lazyre.New(`NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?: GPU-I:\d+)?(?: GPU-CI:\d+)?\): (\d+), (?:pid=[^,]*, name=[^,]*, )?(.*)$`)

// ParseXid recognises an Xid line:
//
//	NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
//	NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No
//	NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.
func ParseXid(msg string) (Xid, bool) {
	if !strings.Contains(msg, "NVRM: Xid (") {
		return Xid{}, false
	}
	var out Xid
	found := eachLine(msg, func(line string) bool {
		m := xidRe.FindStringSubmatch(line)
		if m == nil {
			return false
		}
		code, err := strconv.Atoi(m[2])
		if err != nil {
			return false
		}
		out = Xid{Device: strings.ToLower(m[1]) + ".0", Code: code, Text: m[3]}
		return true
	})
	return out, found
}

var (
	// osinit.c, at run time: "NVRM: GPU %04x:%02x:%02x.%x: GPU has fallen off the bus."
	fallenRe = lazyre.New(`NVRM: GPU ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): GPU has fallen off the bus`)
	// osapi.c, at probe: "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x" / "NVRM: (PCI ID: %04x:%04x) installed in this system has" /
	// "NVRM: fallen off the bus and is not responding to commands."
	fallenProbeRe = lazyre.New(`NVRM: The NVIDIA GPU ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s*\n\s*NVRM: \(PCI ID: [0-9a-fA-F]{4}:[0-9a-fA-F]{4}\) installed in this system has\s*\n\s*NVRM: fallen off the bus`)
	// Drivers before the open modules: "NVRM: GPU at 0000:01:00.0 has fallen off the bus."
	fallenOldRe = lazyre.New(`NVRM: GPU at (?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?) has fallen off the bus`)
)

// ParseFallenOff recognises NVIDIA's message for a GPU that stopped answering on its
// bus, at run time, at probe (three lines, one record when the log kept them together)
// and in older drivers' form, and returns the GPU.
func ParseFallenOff(msg string) (string, bool) {
	if !strings.Contains(msg, "fallen off the bus") {
		return "", false
	}
	for _, re := range []*lazyre.Regexp{fallenRe, fallenProbeRe, fallenOldRe} {
		if m := re.FindStringSubmatch(msg); m != nil {
			return normDevice(strings.ToLower(m[1])), true
		}
	}
	return "", false
}

// AER is a line of the PCIe Advanced Error Reporting driver about one device.
type AER struct {
	Device string // the device the line is printed for
	Driver string // its driver, as the line names it ("pcieport", "nvidia")
	// Severity is "corrected", "non-fatal" or "fatal" for the error itself;
	// empty for the lines that follow it.
	Severity string
	// Bit is an error's name as printed ("Surprise Down Error", "SDES", "BadTLP").
	Bit string
	// NoRecovery is set for "can't recover (no error_detected callback)" and "device
	// has no AER-aware driver": the driver of the device cannot take part in recovery,
	// so the link stays down.
	NoRecovery bool
}

var (
	// aer.c aer_print_error: "PCIe Bus Error: severity=%s, type=%s, (%s)"; severities
	// "Corrected"/"Uncorrected (Non-Fatal)"/"Uncorrected (Fatal)" before about 6.8,
	// "Correctable"/"Uncorrectable (…)" since.
	aerSeverityRe = lazyre.New(`^PCIe Bus Error: severity=(Corrected|Correctable|Uncorrected \(Non-Fatal\)|Uncorrectable \(Non-Fatal\)|Uncorrected \(Fatal\)|Uncorrectable \(Fatal\))`)
	// "   [%2d] %-22s%s": a bit of the status register, by name, " (First)" for the first.
	aerBitRe = lazyre.New(`^\[\s*(\d+)\]\s+(\S.*?)\s*(?:\(First\))?\s*$`)
)

// ParseAER recognises the AER lines that say what went wrong with a device:
//
//	pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, id=0010(Receiver ID)
//	pcieport 0000:00:02.0:    [ 5] Surprise Down Error    (First)
//	nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)
//	nvidia 0000:02:00.0: device has no AER-aware driver
func ParseAER(msg string) (AER, bool) {
	var out AER
	found := eachLine(msg, func(line string) bool {
		driver, bdf, rest, ok := pciPrefix(line)
		if !ok {
			return false
		}
		rest = strings.TrimSpace(rest)
		switch {
		case strings.HasPrefix(rest, "PCIe Bus Error: "):
			m := aerSeverityRe.FindStringSubmatch(rest)
			if m == nil {
				return false
			}
			sev := "corrected"
			switch {
			case strings.HasSuffix(m[1], "(Fatal)"):
				sev = "fatal"
			case strings.HasSuffix(m[1], "(Non-Fatal)"):
				sev = "non-fatal"
			}
			out = AER{Device: bdf, Driver: driver, Severity: sev}
		case rest == "AER: can't recover (no error_detected callback)", rest == "device has no AER-aware driver":
			out = AER{Device: bdf, Driver: driver, NoRecovery: true}
		default:
			m := aerBitRe.FindStringSubmatch(rest)
			if m == nil {
				return false
			}
			out = AER{Device: bdf, Driver: driver, Bit: m[2]}
		}
		return true
	})
	return out, found
}

// IsFatalBit reports whether an AER bit name is one that takes the link down: a
// surprise down or a completion timeout, in the current short and older long names.
func IsFatalBit(bit string) bool {
	switch bit {
	case "Surprise Down Error", "SDES", "Completion Timeout", "CmpltTO":
		return true
	}
	return false
}

// InitFailure is NVIDIA's report that it could not bring a GPU up.
type InitFailure struct {
	Device string
	Stage  uint64 // the RM init stage (osinit.c): 0x24 STATE_INIT, 0x25 GPU_LOAD, 0x6x firmware (GSP)
	Status uint64 // the NV_STATUS (nvstatuscodes.h)
}

// osinit.c: "NVRM: GPU %04x:%02x:%02x.%x: RmInitAdapter failed! (0x%x:0x%x:%d)"; drivers
// before the open modules printed no GPU.
var rmInitRe = lazyre.New(`NVRM: (?:GPU ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): )?RmInitAdapter failed! \(0x([0-9a-fA-F]+):0x([0-9a-fA-F]+):\d+\)`)

// ParseRmInitFailed recognises "NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)",
// and the older "NVRM: RmInitAdapter failed! (0x30:0xffffffff:859)", whose Device is empty.
func ParseRmInitFailed(msg string) (InitFailure, bool) {
	if !strings.Contains(msg, "RmInitAdapter failed") {
		return InitFailure{}, false
	}
	m := rmInitRe.FindStringSubmatch(msg)
	if m == nil {
		return InitFailure{}, false
	}
	stage, _ := parseHex(m[2], 32)
	status, _ := parseHex(m[3], 32)
	return InitFailure{Device: strings.ToLower(m[1]), Stage: stage, Status: status}, true
}

// drivers/pci/pci.c: "Unable to change power state from %s to D0, device inaccessible"
// (pci_power_up) and "Refused to change power state from %s to %s" (pci_set_low_power_state).
var powerRe = lazyre.New(`^(?:Unable to change power state from (D3cold|D3hot|D[0-3]) to D0, device inaccessible|Refused to change power state from (D[0-3]\w*) to D[0-3]\w*|Refused to change power state, currently in (D[0-3]\w*))`)

// ParsePowerFailure recognises the PCI core's lines for a device that did not come out
// of (or go into) a power state, and returns the device and the state it was stuck in.
func ParsePowerFailure(msg string) (device, state string, ok bool) {
	if !strings.Contains(msg, "power state") {
		return "", "", false
	}
	found := eachLine(msg, func(line string) bool {
		_, bdf, rest, ok := pciPrefix(line)
		if !ok {
			return false
		}
		m := powerRe.FindStringSubmatch(rest)
		if m == nil {
			return false
		}
		device, state = bdf, m[1]+m[2]+m[3]
		return true
	})
	return device, state, found
}

// lib/ratelimit.c: "%s: %d callbacks suppressed", for the IOMMU drivers' fault reporters.
var suppressedRe = lazyre.New(`^(amd_iommu_report_page_fault|dmar_fault): (\d+) callbacks suppressed`)

// ParseSuppressedFaults recognises the kernel's count of IOMMU fault messages it did not
// print ("amd_iommu_report_page_fault: 96 callbacks suppressed").
func ParseSuppressedFaults(msg string) (int, bool) {
	m := suppressedRe.FindStringSubmatch(msg)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[2])
	return n, err == nil
}
