package pci

import (
	"fmt"
	"strconv"
	"strings"
)

// Resource flags from the kernel's include/linux/ioport.h, as sysfs "resource" prints them.
const (
	resIO       = 0x00000100
	resMem      = 0x00000200
	resPrefetch = 0x00002000
	resMem64    = 0x00100000
	resDisabled = 0x10000000
	resUnset    = 0x20000000
)

// romIndex is the line of "resource" that describes the expansion ROM; lines 0–5 are BARs.
const romIndex = 6

// BAR is one base address register (or the expansion ROM) of a device.
type BAR struct {
	Index        int // 0–5, or 6 for the ROM
	Start        uint64
	Size         uint64
	Flags        uint64
	IO           bool
	Is64Bit      bool
	Prefetchable bool
	// Unassigned is set when the kernel could not place the BAR: no address
	// ("can't assign; no space"), the device cannot be enabled and its driver fails.
	Unassigned bool
}

// Name is "BAR0"…"BAR5" or "ROM", as lspci and the kernel log say.
func (b BAR) Name() string {
	if b.Index == romIndex {
		return "ROM"
	}
	return fmt.Sprintf("BAR%d", b.Index)
}

// ParseResource reads the sysfs "resource" file: one "start end flags" line of 0x-prefixed
// hex per resource. It returns the BARs and ROM that exist (non-zero flags or range).
// On a malformed or truncated line it returns what it read before that line and an error.
func ParseResource(text string) ([]BAR, error) {
	var bars []BAR
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if i > romIndex {
			break // SR-IOV and bridge windows: not BARs of this function
		}
		if strings.TrimSpace(line) == "" {
			if i == len(lines)-1 {
				break
			}
			return bars, fmt.Errorf("resource line %d is empty", i+1)
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return bars, fmt.Errorf("resource line %d %q: want 3 fields, got %d", i+1, line, len(f))
		}
		var v [3]uint64
		for j, s := range f {
			h, ok := strings.CutPrefix(s, "0x")
			if !ok {
				return bars, fmt.Errorf("resource line %d: %q is not 0x-prefixed hex", i+1, s)
			}
			n, err := strconv.ParseUint(h, 16, 64)
			if err != nil {
				return bars, fmt.Errorf("resource line %d: %q is not 0x-prefixed hex", i+1, s)
			}
			v[j] = n
		}
		start, end, flags := v[0], v[1], v[2]
		if flags == 0 && start == 0 && end == 0 {
			continue
		}
		b := BAR{
			Index:        i,
			Start:        start,
			Flags:        flags,
			IO:           flags&resIO != 0,
			Is64Bit:      flags&resMem64 != 0,
			Prefetchable: flags&resPrefetch != 0,
		}
		if end >= start && (end != 0 || start != 0) {
			b.Size = end - start + 1
		}
		b.Unassigned = flags&resUnset != 0 || (flags&(resMem|resIO) != 0 && start == 0)
		if i == romIndex && flags&resDisabled != 0 {
			// A disabled ROM is normal; it is not an unassigned BAR.
			b.Unassigned = false
		}
		bars = append(bars, b)
	}
	return bars, nil
}

// bridgeWindows is how many lines of a bridge's "resource" are its windows: the last
// ones, after the BARs, the ROM and (on kernels with SR-IOV) the 6 SR-IOV BARs.
const bridgeWindows = 4

// ParseWindows reads a bridge's windows from its sysfs "resource" file: the address
// ranges it forwards to the buses below it, those the kernel opened (I/O, memory,
// prefetchable memory). Lines that do not parse are left out: a window is information,
// never a reason to refuse a device.
func ParseWindows(text string) []BAR {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) != 11 && len(lines) != 17 { // 7 or 13 lines of the function's own, then 4
		return nil
	}
	var out []BAR
	for i, line := range lines[len(lines)-bridgeWindows:] {
		var start, end, flags uint64
		if _, err := fmt.Sscanf(line, "0x%x 0x%x 0x%x", &start, &end, &flags); err != nil || end <= start || flags&(resIO|resMem) == 0 {
			continue
		}
		out = append(out, BAR{
			Index: i, Start: start, Size: end - start + 1, Flags: flags,
			IO: flags&resIO != 0, Is64Bit: flags&resMem64 != 0, Prefetchable: flags&resPrefetch != 0,
		})
	}
	return out
}
