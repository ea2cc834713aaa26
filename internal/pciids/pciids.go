package pciids

import (
	"io"
	"slices"
	"strings"
	"sync"
)

// DB holds names from one pci.ids file. A DB is read-only after [Parse]
// and safe for concurrent use. The zero value and a nil *DB know no names.
type DB struct {
	vendors    map[uint16]string // vendor
	devices    map[uint32]string // vendor<<16 | device
	subsystems map[uint64]string // vendor<<48 | device<<32 | subvendor<<16 | subdevice
	classes    map[uint8]string  // class
	subclasses map[uint16]string // class<<8 | subclass
	progIfs    map[uint32]string // class<<16 | subclass<<8 | prog-if

	// A DB made by index knows where its vendors' blocks of text lie and its classes,
	// and finds a vendor, a device or a subsystem by reading those blocks at its first
	// lookup, keeping the answer ("" for none) in vendors, devices or subsystems: a run
	// names a few dozen devices of a file that lists tens of thousands, so it parses
	// none of the others, and makes no map of thousands of vendors.
	mu      sync.Mutex
	indexed bool
	blocks  []block // every vendor's, in the order of the file
}

// block is a vendor's line and the nested lines under it, up to the next top-level line.
type block struct {
	vendor uint16
	name   string
	text   string
}

// Parse reads a pci.ids file. It returns an error only when reading r
// fails; lines it cannot make sense of are skipped (see the package
// documentation for the rules). The DB refers to the text it was parsed
// from, so that text (about the size of the file) stays in memory with it.
func Parse(r io.Reader) (*DB, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return parse(string(b)), nil
}

// section is the top-level entry the parser is in.
type section int

const (
	inNone   section = iota // before any entry, or under a skipped top-level line
	inVendor                // under a vendor line
	inClass                 // under a "C" line
)

// newDB is a DB with no names yet.
func newDB() *DB {
	return &DB{
		vendors:    make(map[uint16]string),
		devices:    make(map[uint32]string),
		subsystems: make(map[uint64]string),
		classes:    make(map[uint8]string),
		subclasses: make(map[uint16]string),
		progIfs:    make(map[uint32]string),
	}
}

// parse parses s. Names are substrings of s, so s stays alive as long as
// the DB does.
func parse(s string) *DB {
	db := newDB()
	var (
		sec        = inNone
		vendor     uint16 // current vendor, when sec == inVendor
		device     uint16 // current device, when haveDevice
		haveDevice bool
		class      uint8 // current class, when sec == inClass
		subclass   uint8 // current subclass, when haveSub
		haveSub    bool
	)
	for len(s) > 0 {
		var line string
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			line, s = s, ""
		}
		// Like pciutils, treat a CR as the end of the line.
		if i := strings.IndexByte(line, '\r'); i >= 0 {
			line = line[:i]
		}
		if t := strings.TrimLeft(line, " \t"); t == "" || t[0] == '#' {
			continue
		}
		nest := 0
		for nest < len(line) && line[nest] == '\t' {
			nest++
		}
		p := line[nest:]
		switch nest {
		case 0:
			haveDevice, haveSub = false, false
			if rest, ok := strings.CutPrefix(p, "C "); ok {
				c, name, ok := idName(rest, 2)
				if !ok {
					sec = inNone
					continue
				}
				sec, class = inClass, uint8(c)
				addFirst(db.classes, class, name)
				continue
			}
			v, name, ok := idName(p, 4)
			if !ok {
				sec = inNone
				continue
			}
			sec, vendor = inVendor, uint16(v)
			addFirst(db.vendors, vendor, name)
		case 1:
			switch sec {
			case inVendor:
				d, name, ok := idName(p, 4)
				haveDevice, device = ok, uint16(d)
				if ok {
					addFirst(db.devices, uint32(vendor)<<16|uint32(device), name)
				}
			case inClass:
				sc, name, ok := idName(p, 2)
				haveSub, subclass = ok, uint8(sc)
				if ok {
					addFirst(db.subclasses, uint16(class)<<8|uint16(subclass), name)
				}
			}
		case 2:
			switch {
			case sec == inVendor && haveDevice:
				sv, sd, name, ok := subsystemName(p)
				if ok {
					key := uint64(vendor)<<48 | uint64(device)<<32 | uint64(sv)<<16 | uint64(sd)
					addFirst(db.subsystems, key, name)
				}
			case sec == inClass && haveSub:
				pi, name, ok := idName(p, 2)
				if ok {
					addFirst(db.progIfs, uint32(class)<<16|uint32(subclass)<<8|pi, name)
				}
			}
		}
		// Deeper lines have no meaning in pci.ids and are skipped.
	}
	return db
}

// index reads s as parse does, but parses only its top-level lines and the classes;
// each vendor's block (its line and the nested lines under it, up to the next
// top-level line) is kept as text, for the lookups.
func index(s string) *DB { return fromSpans(s, spans(s)) }

// span is where a top-level entry of a pci.ids text lies: a vendor's block, or a
// class's.
type span struct {
	start, end int32
	class      bool
}

// spans finds the vendors' and classes' blocks of s, by the rules of parse: a nested
// line, a blank one or a comment stays in the block; any other line starts a new
// top-level entry, a block if it is a vendor's or a class's.
func spans(s string) []span {
	out := make([]span, 0, len(s)/512) // the upstream file has a vendor per 540 bytes
	start, kind := 0, inNone
	closeBlock := func(end int) {
		if kind != inNone {
			out = append(out, span{start: int32(start), end: int32(end), class: kind == inClass})
		}
	}
	for at := 0; at < len(s); {
		line := s[at:]
		next := len(s)
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], at+i+1
		}
		// Not lineAt: a CR is looked for only in the few top-level lines.
		if len(line) > 0 && line[0] != '\t' {
			if i := strings.IndexByte(line, '\r'); i >= 0 {
				line = line[:i]
			}
			if t := strings.TrimLeft(line, " \t"); t != "" && t[0] != '#' {
				closeBlock(at)
				start, kind = at, inNone
				if rest, ok := strings.CutPrefix(line, "C "); ok {
					if _, _, ok := idName(rest, 2); ok {
						kind = inClass
					}
				} else if _, _, ok := idName(line, 4); ok {
					kind = inVendor
				}
			}
		}
		at = next
	}
	closeBlock(len(s))
	return out
}

// fromSpans makes the DB of s from where its blocks lie.
func fromSpans(s string, spans []span) *DB {
	db := newDB()
	db.indexed = true
	db.blocks = make([]block, 0, len(spans))
	var classText []string
	for _, p := range spans {
		text := s[p.start:p.end]
		if p.class {
			classText = append(classText, text)
			continue
		}
		line, _ := lineAt(text, 0)
		v, name, _ := idName(line, 4)
		db.blocks = append(db.blocks, block{vendor: uint16(v), name: name, text: text})
	}
	if len(classText) > 0 {
		c := parse(strings.Join(classText, "\n"))
		db.classes, db.subclasses, db.progIfs = c.classes, c.subclasses, c.progIfs
	}
	return db
}

// lineAt returns the line of s that starts at at, without its newline and, as parse
// reads it, without what follows a CR; and where the next line starts.
func lineAt(s string, at int) (line string, next int) {
	line, next = s[at:], len(s)
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line, next = line[:i], at+i+1
	}
	if i := strings.IndexByte(line, '\r'); i >= 0 {
		line = line[:i]
	}
	return line, next
}

// findVendor returns the name parse gives a vendor: that of its first line.
func findVendor(blocks []block, vendor uint16) string {
	for _, b := range blocks {
		if b.vendor == vendor {
			return b.name
		}
	}
	return ""
}

// deviceLines calls fn with each line of a vendor's blocks that parse reads as a line
// of the device id, in file order, and with the text after it, until fn returns false.
// Such a line is a newline, a tab and the id's four hex digits, so each is found by a
// search of the text for that, in each case the id's letters can be written in (pci.ids
// writes them in lower case; parse reads either), not by reading every line: a vendor's
// blocks can hold thousands of lines, and a run looks up a few of them.
func deviceLines(blocks []block, vendor, id uint16, fn func(name, after string) bool) {
	needles := []string{"\n\t"}
	for shift := 12; shift >= 0; shift -= 4 {
		c := "0123456789abcdef"[id>>shift&0xf]
		var longer []string
		for _, n := range needles {
			longer = append(longer, n+string(c))
			if c >= 'a' {
				longer = append(longer, n+string(c-'a'+'A'))
			}
		}
		needles = longer
	}
	for _, b := range blocks {
		if b.vendor != vendor {
			continue
		}
		var at []int // where each line of the id starts, in order
		for _, n := range needles {
			for from := 0; ; {
				i := strings.Index(b.text[from:], n)
				if i < 0 {
					break
				}
				at = append(at, from+i+1)
				from += i + 1
			}
		}
		slices.Sort(at)
		for _, start := range at {
			line, next := lineAt(b.text, start)
			if d, name, ok := idName(line[1:], 4); ok && uint16(d) == id && !fn(name, b.text[next:]) {
				return
			}
		}
	}
}

// findDevice returns the name parse gives a device: that of its first line.
func findDevice(blocks []block, vendor, id uint16) string {
	var found string
	deviceLines(blocks, vendor, id, func(name, _ string) bool {
		found = name
		return false
	})
	return found
}

// findSubsystem returns the name parse gives a subsystem of a device: the first
// subsystem line (two tabs deep) with its ids under a line of the device, up to the
// next line one tab deep that is not blank or a comment.
func findSubsystem(blocks []block, vendor, id, subVendor, subDevice uint16) string {
	var found string
	deviceLines(blocks, vendor, id, func(_, text string) bool {
		for at := 0; at < len(text); {
			var line string
			line, at = lineAt(text, at)
			if t := strings.TrimLeft(line, " \t"); t == "" || t[0] == '#' {
				continue
			}
			if p, ok := strings.CutPrefix(line, "\t\t"); ok {
				// A deeper line is none: subsystemName refuses its third tab.
				if sv, sd, name, ok := subsystemName(p); ok && sv == subVendor && sd == subDevice {
					found = name
					return false
				}
				continue
			}
			return true // the next device's line, or a line that is none
		}
		return true
	})
	return found
}

// addFirst sets m[k] = v unless k is already there.
func addFirst[K comparable](m map[K]string, k K, v string) {
	if _, dup := m[k]; !dup {
		m[k] = v
	}
}

// idName splits "<n hex digits><blanks><name>" into the id and the name.
func idName(p string, n int) (id uint32, name string, ok bool) {
	if len(p) <= n || !isBlank(p[n]) {
		return 0, "", false
	}
	id, ok = hex(p[:n])
	if !ok {
		return 0, "", false
	}
	name = strings.Trim(p[n:], " \t")
	return id, name, name != ""
}

// subsystemName splits "ssss<blanks>dddd<blanks><name>".
func subsystemName(p string) (subVendor, subDevice uint16, name string, ok bool) {
	if len(p) <= 4 || !isBlank(p[4]) {
		return 0, 0, "", false
	}
	sv, ok := hex(p[:4])
	if !ok {
		return 0, 0, "", false
	}
	sd, name, ok := idName(strings.TrimLeft(p[4:], " \t"), 4)
	if !ok {
		return 0, 0, "", false
	}
	return uint16(sv), uint16(sd), name, true
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// hex parses s, at most 8 hexadecimal digits of either case.
func hex(s string) (uint32, bool) {
	var v uint32
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(c)
	}
	return v, true
}

// Vendor returns the name of a vendor.
func (db *DB) Vendor(vendor uint16) (string, bool) {
	if db == nil {
		return "", false
	}
	if !db.indexed {
		name, ok := db.vendors[vendor]
		return name, ok
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	name, ok := db.vendors[vendor]
	if !ok {
		name = findVendor(db.blocks, vendor)
		db.vendors[vendor] = name
	}
	return name, name != ""
}

// Device returns the name of a vendor's device.
func (db *DB) Device(vendor, device uint16) (string, bool) {
	if db == nil {
		return "", false
	}
	key := uint32(vendor)<<16 | uint32(device)
	db.mu.Lock()
	defer db.mu.Unlock()
	name, ok := db.devices[key]
	if !ok && db.indexed {
		name = findDevice(db.blocks, vendor, device)
		db.devices[key] = name // "" remembers that it is not there
	}
	return name, name != ""
}

// Subsystem returns the name of a subsystem (subVendor:subDevice) of a
// vendor's device.
func (db *DB) Subsystem(vendor, device, subVendor, subDevice uint16) (string, bool) {
	if db == nil {
		return "", false
	}
	key := uint64(vendor)<<48 | uint64(device)<<32 | uint64(subVendor)<<16 | uint64(subDevice)
	db.mu.Lock()
	defer db.mu.Unlock()
	name, ok := db.subsystems[key]
	if !ok && db.indexed {
		name = findSubsystem(db.blocks, vendor, device, subVendor, subDevice)
		db.subsystems[key] = name
	}
	return name, name != ""
}

// Class returns the most specific name known for a 24-bit class code
// 0xCCSSPP, the value of /sys/bus/pci/devices/*/class: the prog-if name if
// known, else the subclass name, else the class name. So 0x030000 is "VGA
// controller" (prog-if 00 of "VGA compatible controller"), 0x060400 is
// "Normal decode" (prog-if 00 of "PCI bridge") and 0x040300 is "HDA
// compatible" (prog-if 00 of "Audio device"); use [DB.Subclass] for the
// name lspci prints. A class above 0xFFFFFF is unknown.
func (db *DB) Class(class uint32) (string, bool) {
	for _, l := range classLevels {
		if name, ok := db.classLevel(class, l); ok {
			return name, true
		}
	}
	return "", false
}

// Subclass returns the name of the subclass of a 24-bit class code
// 0xCCSSPP, ignoring the prog-if byte, else the class name. This is the
// name lspci shows for a device: 0x030000 is "VGA compatible controller",
// 0x040300 is "Audio device". A class above 0xFFFFFF is unknown.
func (db *DB) Subclass(class uint32) (string, bool) {
	for _, l := range classLevels[1:] {
		if name, ok := db.classLevel(class, l); ok {
			return name, true
		}
	}
	return "", false
}

// level is one level of the class list.
type level int

const (
	levelProgIf level = iota
	levelSubclass
	levelClass
)

// classLevels lists the levels from the most specific.
var classLevels = []level{levelProgIf, levelSubclass, levelClass}

// classLevel returns the name of one level of a 24-bit class code.
func (db *DB) classLevel(class uint32, l level) (string, bool) {
	if db == nil || class > 0xFFFFFF {
		return "", false
	}
	var name string
	var ok bool
	switch l {
	case levelProgIf:
		name, ok = db.progIfs[class]
	case levelSubclass:
		name, ok = db.subclasses[uint16(class>>8)]
	case levelClass:
		name, ok = db.classes[uint8(class>>16)]
	}
	return name, ok
}

// Names is a chain of databases: each lookup takes the first DB that knows
// the id. A nil *DB in the chain is skipped. The chain is usually a
// host's own pci.ids followed by a fallback, see [Default].
type Names []*DB

// first returns the answer of the first DB for which look succeeds.
func (n Names) first(look func(*DB) (string, bool)) string {
	for _, db := range n {
		if db == nil {
			continue
		}
		if name, ok := look(db); ok {
			return name
		}
	}
	return ""
}

// Vendor returns the vendor's name, or "" when no DB knows it.
func (n Names) Vendor(vendor uint16) string {
	return n.first(func(db *DB) (string, bool) { return db.Vendor(vendor) })
}

// Device returns the device's name, or "" when no DB knows it.
func (n Names) Device(vendor, device uint16) string {
	return n.first(func(db *DB) (string, bool) { return db.Device(vendor, device) })
}

// Subsystem returns the subsystem's name, or "" when no DB knows it.
func (n Names) Subsystem(vendor, device, subVendor, subDevice uint16) string {
	return n.first(func(db *DB) (string, bool) { return db.Subsystem(vendor, device, subVendor, subDevice) })
}

// Class returns the most specific name of a 24-bit class code, like
// [DB.Class], or "". The chain is searched level by level: the first DB
// that knows the prog-if answers; if none does, the first that knows the
// subclass; then the first that knows the class. So an old file that
// knows only the class does not hide a newer subclass name further down.
func (n Names) Class(class uint32) string {
	return n.classFrom(class, classLevels)
}

// Subclass returns the subclass (else class) name of a 24-bit class code,
// like [DB.Subclass], or "", searching the chain level by level as
// [Names.Class] does.
func (n Names) Subclass(class uint32) string {
	return n.classFrom(class, classLevels[1:])
}

func (n Names) classFrom(class uint32, levels []level) string {
	for _, l := range levels {
		if name := n.first(func(db *DB) (string, bool) { return db.classLevel(class, l) }); name != "" {
			return name
		}
	}
	return ""
}
