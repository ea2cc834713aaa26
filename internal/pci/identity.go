package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
)

// identity is what one file says of a device's identity; the has fields say which parts
// it holds.
type identity struct {
	vendor, device       uint16
	subVendor, subDevice uint16
	class                uint32
	rev                  uint8

	hasIDs, hasClass, hasSub, hasRev bool
}

// idField is one identity attribute of a device directory: its value once known, and
// whether it is still wanted from another file.
type idField struct {
	name    string
	bits    int
	assumed string // an optional one's warning for garbage in its file
	value   uint64
	wanted  bool
}

// idFallbacks are the files that hold a device's identity besides vendor, device and
// class, in the order they are read. uevent and modalias are printed by the kernel from
// the same struct pci_dev fields as those attributes (pci_uevent in
// drivers/pci/pci-driver.c, modalias_show in drivers/pci/pci-sysfs.c), so they say what
// the missing files would have said; uevent comes first because it names its device
// (PCI_SLOT_NAME) and holds the class whole. config is the hardware's own header, last:
// the kernel's quirks can change a class after reading it, and an SR-IOV virtual
// function reads vendor ffff there.
var idFallbacks = []struct {
	name  string
	parse func(b []byte, a Address) (identity, error)
}{
	{"uevent", func(b []byte, a Address) (identity, error) { return parseUevent(string(b), a) }},
	{"modalias", func(b []byte, _ Address) (identity, error) { return parseModalias(strings.TrimSpace(string(b))) }},
	{"config", func(b []byte, _ Address) (identity, error) { return parseConfigIdentity(Config(b)) }},
}

// readIdentity reads the ids, class, subsystem ids and revision of the device in dir.
//
// vendor, device and class must be known: a file of them that holds garbage is an error,
// as it always was. Some trees lack the files themselves (hwloc's captures of POWER9
// machines keep only class and local_cpus of a device): then every identity file that is
// missing is taken from the first of uevent, modalias and config that gives it, and the
// device is an error only when none of them gives vendor, device and class. Garbage in
// an optional attribute is warned about through warn and taken as 0, as before.
//
// A brief read (full false) leaves the subsystem ids and the revision at 0.
func readIdentity(dir *host.Listing, a Address, warn func(error, string), full bool) (identity, error) {
	req := [...]idField{{name: "vendor", bits: 16}, {name: "device", bits: 16}, {name: "class", bits: 24}}
	opt := [...]idField{
		{name: "subsystem_vendor", bits: 16, assumed: "subsystem vendor taken as 0000"},
		{name: "subsystem_device", bits: 16, assumed: "subsystem device taken as 0000"},
		{name: "revision", bits: 8, assumed: "revision taken as 00"},
	}
	required := []*idField{&req[0], &req[1], &req[2]}
	optional := []*idField{&opt[0], &opt[1], &opt[2]}
	missing := false
	for _, f := range required {
		v, err := readHex(dir, f.name, f.bits)
		switch {
		case err == nil:
			f.value = v
		case errors.Is(err, fs.ErrNotExist):
			f.wanted, missing = true, true
		default:
			return identity{}, err
		}
	}
	var bad []func() // warned about once the device is known to be kept
	for _, f := range optional {
		if !full {
			break
		}
		v, err := readHex(dir, f.name, f.bits)
		switch {
		case err == nil:
			f.value = v
		case errors.Is(err, fs.ErrNotExist):
			// Looked for elsewhere only when the device needs the other files anyway,
			// so that a tree without a revision file reads as it always did.
			f.wanted = missing
		default:
			bad = append(bad, func() { warn(err, f.assumed) })
		}
	}
	if missing {
		if err := fillIdentity(dir, a, required, optional); err != nil {
			return identity{}, err
		}
	}
	for _, w := range bad {
		w()
	}
	return identity{
		vendor: uint16(required[0].value), device: uint16(required[1].value), class: uint32(required[2].value),
		subVendor: uint16(optional[0].value), subDevice: uint16(optional[1].value), rev: uint8(optional[2].value),
	}, nil
}

// fillIdentity takes the wanted fields from the fallback files, the first that has each;
// it fails when a required one is still wanted after all of them, saying why each file
// did not give it.
func fillIdentity(dir *host.Listing, a Address, required, optional []*idField) error {
	all := append(append([]*idField{}, required...), optional...)
	var why []string
	for _, src := range idFallbacks {
		if !anyWanted(all) {
			break
		}
		b, err := dir.ReadFile(src.name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				why = append(why, src.name+" is missing")
			} else {
				why = append(why, err.Error())
			}
			continue
		}
		id, err := src.parse(b, a)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", src.name, err))
			continue
		}
		gave := false
		take := func(f *idField, has bool, v uint64) {
			if f.wanted && has {
				f.value, f.wanted, gave = v, false, true
			}
		}
		take(all[0], id.hasIDs, uint64(id.vendor))
		take(all[1], id.hasIDs, uint64(id.device))
		take(all[2], id.hasClass, uint64(id.class))
		take(all[3], id.hasSub, uint64(id.subVendor))
		take(all[4], id.hasSub, uint64(id.subDevice))
		take(all[5], id.hasRev, uint64(id.rev))
		if !gave && anyWanted(required) {
			why = append(why, src.name+" holds none of them")
		}
	}
	if !anyWanted(required) {
		return nil
	}
	var names []string
	for _, f := range required {
		if f.wanted {
			names = append(names, f.name)
		}
	}
	return fmt.Errorf("no %s file, nor another to read %s from (%s)",
		orList(names), map[bool]string{true: "it", false: "them"}[len(names) == 1], strings.Join(why, "; "))
}

func anyWanted(fields []*idField) bool {
	for _, f := range fields {
		if f.wanted {
			return true
		}
	}
	return false
}

// orList joins names as a sentence does: "vendor", "vendor or device", "vendor, device or class".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// parseUevent reads the lines pci_uevent writes into a device's uevent file:
//
//	PCI_CLASS=30000
//	PCI_ID=10DE:1DB6
//	PCI_SUBSYS_ID=10DE:1212
//	PCI_SLOT_NAME=0004:04:00.0
//
// (the class with %04X, so with no leading zero past four digits). A file whose
// PCI_SLOT_NAME is another device's is refused: it was copied from elsewhere.
func parseUevent(s string, a Address) (identity, error) {
	var id identity
	for _, line := range strings.Split(s, "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch key {
		case "PCI_SLOT_NAME":
			if !strings.EqualFold(value, a.String()) {
				return identity{}, fmt.Errorf("PCI_SLOT_NAME is %q, another device", value)
			}
		case "PCI_ID":
			v, d, err := hexPair(value)
			if err != nil {
				return identity{}, fmt.Errorf("PCI_ID=%s: %v", value, err)
			}
			id.vendor, id.device, id.hasIDs = v, d, true
		case "PCI_SUBSYS_ID":
			v, d, err := hexPair(value)
			if err != nil {
				return identity{}, fmt.Errorf("PCI_SUBSYS_ID=%s: %v", value, err)
			}
			id.subVendor, id.subDevice, id.hasSub = v, d, true
		case "PCI_CLASS":
			c, err := hexDigits(value, 6)
			if err != nil {
				return identity{}, fmt.Errorf("PCI_CLASS=%s: %v", value, err)
			}
			id.class, id.hasClass = uint32(c), true
		}
	}
	if !id.hasIDs && !id.hasClass {
		return identity{}, errors.New("no PCI_ID or PCI_CLASS line")
	}
	return id, nil
}

// hexPair reads "10DE:1DB6".
func hexPair(s string) (uint16, uint16, error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, errors.New("not two ids joined by ':'")
	}
	x, err := hexDigits(a, 4)
	if err != nil {
		return 0, 0, err
	}
	y, err := hexDigits(b, 4)
	if err != nil {
		return 0, 0, err
	}
	return uint16(x), uint16(y), nil
}

// hexDigits reads 1 to n hex digits, without a prefix.
func hexDigits(s string, n int) (uint64, error) {
	if s == "" || len(s) > n || strings.Trim(s, "0123456789abcdefABCDEF") != "" {
		return 0, fmt.Errorf("%q is not 1 to %d hex digits", s, n)
	}
	return strconv.ParseUint(s, 16, 64)
}

// parseModalias reads what modalias_show writes:
// "pci:v000010DEd00001DB6sv000010DEsd00001212bc03sc02i00". Older kernels printed
// the programming interface in lower case; both are read.
func parseModalias(s string) (identity, error) {
	rest, ok := strings.CutPrefix(s, "pci:")
	if !ok {
		return identity{}, fmt.Errorf("%q does not start with pci:", s)
	}
	var vals [7]uint64
	for i, f := range []struct {
		tag    string
		digits int
	}{{"v", 8}, {"d", 8}, {"sv", 8}, {"sd", 8}, {"bc", 2}, {"sc", 2}, {"i", 2}} {
		after, ok := strings.CutPrefix(rest, f.tag)
		if !ok || len(after) < f.digits {
			return identity{}, fmt.Errorf("%q is not a PCI modalias (at %q)", s, f.tag)
		}
		v, err := hexDigits(after[:f.digits], f.digits)
		// The ids are 16-bit, printed in 8 digits.
		if err != nil || (f.digits == 8 && v > 0xffff) {
			return identity{}, fmt.Errorf("%q is not a PCI modalias (at %q)", s, f.tag)
		}
		vals[i], rest = v, after[f.digits:]
	}
	if rest != "" {
		return identity{}, fmt.Errorf("%q is not a PCI modalias (%q after it)", s, rest)
	}
	return identity{
		vendor: uint16(vals[0]), device: uint16(vals[1]), subVendor: uint16(vals[2]), subDevice: uint16(vals[3]),
		class:  uint32(vals[4]<<16 | vals[5]<<8 | vals[6]),
		hasIDs: true, hasClass: true, hasSub: true,
	}, nil
}

// parseConfigIdentity reads the identity registers of a config space header: vendor and
// device at 0x00, revision at 0x08, class at 0x09–0x0b, and for a type 0 header (an
// endpoint; a bridge's has bus numbers there) the subsystem ids at 0x2c. 64 bytes is
// what anyone but root reads, enough for all of them.
func parseConfigIdentity(c Config) (identity, error) {
	if len(c) < 0x0c {
		return identity{}, fmt.Errorf("%d bytes, too few for the ids and class", len(c))
	}
	vendor := c.U16(0x00)
	if vendor == 0xffff || vendor == 0 {
		// ffff is what a read from an absent function returns, and what an SR-IOV
		// virtual function's own header holds; 0000 is no vendor's.
		return identity{}, fmt.Errorf("vendor reads %04x, not a vendor", vendor)
	}
	id := identity{
		vendor: vendor, device: c.U16(0x02), rev: c[0x08],
		class:  uint32(c[0x0b])<<16 | uint32(c[0x0a])<<8 | uint32(c[0x09]),
		hasIDs: true, hasClass: true, hasRev: true,
	}
	if len(c) >= 0x30 && c[0x0e]&0x7f == 0 {
		id.subVendor, id.subDevice, id.hasSub = c.U16(0x2c), c.U16(0x2e), true
	}
	return id, nil
}
