package kmsg

import (
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
)

// NVRMBar is the nvidia driver's report of a BAR it found unusable.
type NVRMBar struct {
	BAR     int    // the Linux resource index (the BAR register), as in "BAR1"
	SizeMB  uint64 // 0 for a BAR that was not assigned
	Address uint64
	Device  string // "0000:14:00.0"
}

// kernel-open/nvidia/nv-pci.c: "NVRM: BAR%d is %lluM @ 0x%llx (PCI:%04x:%02x:%02x.%x)".
var nvrmBarRe = lazyre.New(`NVRM: BAR(\d+) is (\d+)M @ 0x([0-9a-fA-F]+) \(PCI:([0-9a-fA-F]+:[0-9a-fA-F]+:[0-9a-fA-F]+\.[0-7])\)`)

// ParseNVRMBar recognises the line the nvidia driver prints, after "NVRM: This PCI I/O
// region assigned to your NVIDIA device is invalid:", for the BAR it rejects:
//
//	NVRM: BAR1 is 0M @ 0x0 (PCI:0000:14:00.0)
//
// The two lines are one message; the record may hold both, or this one alone. Only the
// first BAR line of a record is returned.
func ParseNVRMBar(msg string) (NVRMBar, bool) {
	if !strings.Contains(msg, "NVRM: BAR") {
		return NVRMBar{}, false
	}
	m := nvrmBarRe.FindStringSubmatch(msg)
	if m == nil {
		return NVRMBar{}, false
	}
	bar, err1 := strconv.Atoi(m[1])
	size, err2 := strconv.ParseUint(m[2], 10, 64)
	addr, ok := parseHex(m[3], 64)
	bdf, ok2 := normBDF(m[4])
	if err1 != nil || err2 != nil || !ok || !ok2 {
		return NVRMBar{}, false
	}
	return NVRMBar{BAR: bar, SizeMB: size, Address: addr, Device: bdf}, true
}

var nvrmProbeRe = lazyre.New(`NVRM: The NVIDIA probe routine failed for (\d+) device\(s\)`)

// ParseNVRMProbeFailed recognises "NVRM: The NVIDIA probe routine failed for 2 device(s)."
// and returns the count.
func ParseNVRMProbeFailed(msg string) (devices int, ok bool) {
	m := nvrmProbeRe.FindStringSubmatch(msg)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// IsNVRMNoneInitialized recognises "NVRM: None of the NVIDIA devices were initialized."
func IsNVRMNoneInitialized(msg string) bool {
	return strings.Contains(msg, "NVRM: None of the NVIDIA devices were initialized")
}

// The driver's identification string: "NVIDIA UNIX x86_64 Kernel Module  570.148.06  Mon
// May  5 11:36:21 UTC 2025", or for the open modules "NVIDIA UNIX Open Kernel Module for
// x86_64  565.57.01  Release Build  (…)  Thu Oct 10 12:15:00 UTC 2024".
const nvidiaID = `NVIDIA UNIX .*?Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)(?:\s|$)`

var (
	nvrmLoadingRe = lazyre.New(`^NVRM: loading ` + nvidiaID)
	nvrmVersionRe = lazyre.New(`^NVRM version: ` + nvidiaID)
)

// ParseNVRMLoading recognises the banner the nvidia module prints when it loads and returns
// the driver version ("570.148.06"):
//
//	NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.148.06  Mon May  5 11:36:21 UTC 2025
//	NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (…)  …
func ParseNVRMLoading(msg string) (version string, ok bool) {
	if !strings.Contains(msg, "NVRM: loading") {
		return "", false
	}
	eachLine(msg, func(line string) bool {
		if m := nvrmLoadingRe.FindStringSubmatch(line); m != nil {
			version, ok = m[1], true
		}
		return ok
	})
	return version, ok
}

// ParseNVRMVersion reads the driver version from the text of /proc/driver/nvidia/version,
// whose first line is "NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  Thu Oct 26
// …" or, for the open modules, "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64
// 565.57.01  Release Build …".
func ParseNVRMVersion(procVersion string) (string, bool) {
	var version string
	found := eachLine(procVersion, func(line string) bool {
		if m := nvrmVersionRe.FindStringSubmatch(line); m != nil {
			version = m[1]
			return true
		}
		return false
	})
	return version, found
}

// APIMismatch is the nvidia module's refusal of a client built for another driver version.
type APIMismatch struct {
	Client        string // "kwin_wayland"; empty in the older message, which does not name it
	PID           int    // 0 when not given
	ClientVersion string // the userspace driver's version, "595.84"
	KernelVersion string // the loaded module's version, "595.80"
}

var (
	mismatchClientRe = lazyre.New(`^API mismatch: the client '([^']*)' \(pid (\d+)\)`)
	mismatchHasRe    = lazyre.New(`^API mismatch: the client (?:'[^']*' \(pid \d+\) )?has the version ([^\s,]+?),? but\b`)
	mismatchKernelRe = lazyre.New(`\bthis kernel module has the version (\S+?)\.?(?:\s|$)`)
)

// ParseAPIMismatch recognises the nvidia module's "API mismatch" message, in the current
// form and the older one that does not name the client:
//
//	NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)
//	NVRM: has the version 595.84, but this kernel module has
//	NVRM: the version 595.80.  Please make sure that this
//	…
//	NVRM: API mismatch: the client has the version 570.153.02, but
//	NVRM: this kernel module has the version 570.144.  Please
//	…
//
// The message is one printk of several lines; the record should hold them all. A record
// that holds only some is still recognised, and the fields its lines do not give are left
// empty.
func ParseAPIMismatch(msg string) (APIMismatch, bool) {
	if !strings.Contains(msg, "NVRM: API mismatch: the client") {
		return APIMismatch{}, false
	}
	// Join the lines, dropping the "NVRM: " each starts with.
	var b strings.Builder
	for line := range strings.SplitSeq(msg, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimPrefix(line, "NVRM:")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(line)
	}
	text := strings.Join(strings.Fields(b.String()), " ")
	i := strings.Index(text, "API mismatch: the client")
	if i < 0 {
		return APIMismatch{}, false
	}
	text = text[i:]
	var out APIMismatch
	if m := mismatchClientRe.FindStringSubmatch(text); m != nil {
		pid, err := strconv.Atoi(m[2])
		if err != nil {
			return APIMismatch{}, false
		}
		out.Client, out.PID = m[1], pid
	}
	if m := mismatchHasRe.FindStringSubmatch(text); m != nil {
		out.ClientVersion = m[1]
	}
	if m := mismatchKernelRe.FindStringSubmatch(text); m != nil {
		out.KernelVersion = m[1]
	}
	return out, true
}
