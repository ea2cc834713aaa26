package kmsg

import (
	"fmt"
	"strconv"
	"strings"
)

// Every recogniser takes a Record's Message. Leading and trailing blanks do not matter,
// and where a message has several lines (a multi-line printk, or lines a log tool joined)
// each line is tried in turn and the first that matches gives the result; the recognisers
// for messages that span lines (ParseNVRMBar, ParseAPIMismatch) look at the whole.

// eachLine calls f for each line of msg, trimmed of blanks, until f returns true.
func eachLine(msg string, f func(line string) bool) bool {
	for line := range strings.SplitSeq(msg, "\n") {
		if f(strings.TrimSpace(line)) {
			return true
		}
	}
	return false
}

// parseHex reads a hexadecimal number, with or without "0x".
func parseHex(s string, bits int) (uint64, bool) {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	if s == "" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 16, bits)
	return v, err == nil
}

// normBDF normalises a PCI address to "0000:bb:dd.f": "bb:dd.f" has domain 0, and each part
// may carry "0x" (DMAR's "[0x00:0x02.0]").
func normBDF(s string) (string, bool) {
	head, fn, ok := strings.Cut(s, ".")
	if !ok || len(s) > 32 {
		return "", false
	}
	parts := strings.Split(head, ":")
	dom := "0"
	switch len(parts) {
	case 2:
	case 3:
		dom, parts = parts[0], parts[1:]
	default:
		return "", false
	}
	d, ok1 := parseHex(dom, 32)
	b, ok2 := parseHex(parts[0], 8)
	dev, ok3 := parseHex(parts[1], 5)
	f, ok4 := parseHex(fn, 3)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return "", false
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, dev, f), true
}

// normDevice normalises s if it is a PCI address and leaves it as it is otherwise.
func normDevice(s string) string {
	if b, ok := normBDF(s); ok {
		return b
	}
	return s
}

// devPrefix splits the "<driver> <device>: " that dev_printk (dev_err, pci_err, …) puts
// before a message: "nvidia 0000:07:00.0: rest". The device is returned as it is.
func devPrefix(s string) (driver, device, rest string, ok bool) {
	driver, after, ok := strings.Cut(s, " ")
	if !ok || driver == "" || strings.ContainsAny(driver, ":[]()") {
		return "", "", s, false
	}
	device, rest, ok = strings.Cut(after, ": ")
	if !ok || device == "" || strings.ContainsAny(device, " \t[]()") {
		return "", "", s, false
	}
	return driver, device, rest, true
}

// pciPrefix is devPrefix for a PCI device, whose address it normalises.
func pciPrefix(s string) (driver, bdf, rest string, ok bool) {
	driver, device, rest, ok := devPrefix(s)
	if !ok {
		return "", "", s, false
	}
	bdf, ok = normBDF(device)
	if !ok {
		return "", "", s, false
	}
	return driver, bdf, rest, true
}

// ParseDriverPrefix returns the driver and the PCI device a dev_printk line names by its
// prefix ("nvme 0000:01:00.0: …"): which driver the log shows bound to that device.
func ParseDriverPrefix(msg string) (driver, device string, ok bool) {
	driver, device, _, ok = pciPrefix(msg)
	return driver, device, ok
}

// cutTag drops one of the pr_fmt tags ("AMD-Vi: ", …) from the start of s.
func cutTag(s string, tags ...string) (string, bool) {
	for _, t := range tags {
		if rest, ok := strings.CutPrefix(s, t); ok {
			return rest, true
		}
	}
	return s, false
}
