package pciids

import (
	"bufio"
	"bytes"
	"io"
	"slices"
	"sync"
)

// DB holds the names one pci.ids file gives the ids asked of it. A DB is safe for
// concurrent use. The zero value and a nil *DB know no names.
type DB struct {
	// The answers of the DB's loads ("" for an id its file does not name): a run names
	// a few dozen devices of a file that lists tens of thousands, so it keeps none of
	// the others. A DB without a source holds every name its parser kept.
	vendors    map[uint16]string // vendor
	devices    map[uint32]string // vendor<<16 | device
	subsystems map[uint64]string // vendor<<48 | device<<32 | subvendor<<16 | subdevice
	classes    map[uint8]string  // class
	subclasses map[uint16]string // class<<8 | subclass
	progIfs    map[uint32]string // class<<16 | subclass<<8 | prog-if

	mu  sync.Mutex // guards the maps of a DB with a source
	src *source
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

// parser reads the lines of a pci.ids text in order, into db: every name, or with
// want only the names it lists. What it is in is all it keeps of the lines before.
type parser struct {
	db   *DB
	want *wanted

	sec        section
	devices    []uint16 // with want: the devices whose lines are read, of the current vendor
	in         bool     // the lines under the current top-level line can hold a wanted name
	deep       bool     // and those two tabs deep under the current nested line can
	vendor     uint16   // current vendor, when sec == inVendor
	device     uint16   // current device, when haveDevice
	haveDevice bool
	class      uint8 // current class, when sec == inClass
	subclass   uint8 // current subclass, when haveSub
	haveSub    bool
}

// read reads every line of r, through a buffer of chunkBytes (grown for a longer line);
// a last line without a newline is a line. It returns the error of a read that fails,
// having read the lines before it.
func (p *parser) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, chunkBytes), maxFileBytes+1)
	sc.Split(wholeLines)
	for sc.Scan() {
		for text := sc.Bytes(); len(text) > 0; {
			line := text
			if i := bytes.IndexByte(text, '\n'); i >= 0 {
				line, text = text[:i], text[i+1:]
			} else {
				text = nil
			}
			if len(line) > 0 && line[0] == '\t' && p.passes(line) {
				continue
			}
			p.line(line)
		}
	}
	return sc.Err()
}

// wholeLines is a bufio.SplitFunc whose tokens are all the whole lines in the buffer.
func wholeLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i+1], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// chunkBytes is what a read takes at once: a host's pci.ids is 1.4 MB, and only the
// names asked of it are kept.
const chunkBytes = 64 << 10

// passes says whether a line that starts with a tab can be passed over unread. Such a
// line is nested (or blank, or a comment), one that starts with two is deeper still, and
// neither changes what the parser is in: where it can hold nothing wanted, it is not
// read. Nor is the line of a device not wanted (the bulk of a vendor's block), once the
// lines under it are known to be passed over too.
func (p *parser) passes(line []byte) bool {
	switch {
	case !p.in:
		return true
	case len(line) > 1 && line[1] == '\t':
		return !p.deep
	case p.sec != inVendor || p.want == nil:
		return false
	}
	if len(line) >= 5 {
		if d, ok := hex(line[1:5]); ok && slices.Contains(p.devices, uint16(d)) {
			return false
		}
	}
	// A blank line or a comment changes nothing. Any other line is a device's, or one
	// that the parser takes for none: either way, no line under it is read, and what
	// the parser would take it for does not matter.
	if len(content(line)) != 0 {
		p.deep = false
	}
	return true
}

// content is a line as the parser reads it: cut at a CR, as pciutils does, and empty
// for a blank line or a comment.
func content(line []byte) []byte {
	if i := bytes.IndexByte(line, '\r'); i >= 0 {
		line = line[:i]
	}
	if t := trimBlanks(line, false); len(t) == 0 || t[0] == '#' {
		return nil
	}
	return line
}

// line reads one line, without its newline.
func (p *parser) line(line []byte) {
	if line = content(line); len(line) == 0 {
		return
	}
	nest := 0
	for nest < len(line) && line[nest] == '\t' {
		nest++
	}
	s := line[nest:]
	w := p.want
	switch nest {
	case 0:
		p.haveDevice, p.haveSub, p.sec, p.in, p.deep = false, false, inNone, false, false
		if rest, ok := bytes.CutPrefix(s, []byte("C ")); ok {
			c, name, ok := idName(rest, 2)
			if !ok {
				return
			}
			p.sec, p.class = inClass, uint8(c)
			p.in = w == nil || w.classBlocks[p.class]
			if w == nil || w.classes[p.class] {
				putFirst(p.db.classes, p.class, name)
			}
			return
		}
		v, name, ok := idName(s, 4)
		if !ok {
			return
		}
		p.sec, p.vendor = inVendor, uint16(v)
		p.in = w == nil || w.vendorBlocks[p.vendor]
		if w != nil {
			p.devices = w.deviceLines[p.vendor]
		}
		if w == nil || w.vendors[p.vendor] {
			putFirst(p.db.vendors, p.vendor, name)
		}
	case 1:
		switch p.sec {
		case inVendor:
			d, name, ok := idName(s, 4)
			p.haveDevice, p.device = ok, uint16(d)
			key := uint32(p.vendor)<<16 | uint32(p.device)
			p.deep = ok && (w == nil || w.subsystemsOf[key])
			if ok && (w == nil || w.devices[key]) {
				putFirst(p.db.devices, key, name)
			}
		case inClass:
			sc, name, ok := idName(s, 2)
			p.haveSub, p.subclass = ok, uint8(sc)
			key := uint16(p.class)<<8 | uint16(p.subclass)
			// A subclass is wanted with its prog-ifs: the lines under it are read
			// when it is.
			p.deep = ok && (w == nil || w.subclasses[key])
			if p.deep {
				putFirst(p.db.subclasses, key, name)
			}
		}
	case 2:
		switch {
		case p.sec == inVendor && p.haveDevice:
			sv, sd, name, ok := subsystemName(s)
			key := uint64(p.vendor)<<48 | uint64(p.device)<<32 | uint64(sv)<<16 | uint64(sd)
			if ok && (w == nil || w.subsystems[key]) {
				putFirst(p.db.subsystems, key, name)
			}
		case p.sec == inClass && p.haveSub:
			pi, name, ok := idName(s, 2)
			key := uint32(p.class)<<16 | uint32(p.subclass)<<8 | pi
			if ok && (w == nil || w.progIfs[key]) {
				putFirst(p.db.progIfs, key, name)
			}
		}
	}
	// Deeper lines have no meaning in pci.ids and are skipped.
}

// putFirst sets m[k] to a copy of name unless k is already there: the first name of an id
// wins.
func putFirst[K comparable](m map[K]string, k K, name []byte) {
	if _, dup := m[k]; !dup {
		m[k] = string(name)
	}
}

// idName splits "<n hex digits><blanks><name>" into the id and the name.
func idName(p []byte, n int) (id uint32, name []byte, ok bool) {
	if len(p) <= n || !isBlank(p[n]) {
		return 0, nil, false
	}
	id, ok = hex(p[:n])
	if !ok {
		return 0, nil, false
	}
	name = trimBlanks(p[n:], true)
	return id, name, len(name) != 0
}

// subsystemName splits "ssss<blanks>dddd<blanks><name>".
func subsystemName(p []byte) (subVendor, subDevice uint16, name []byte, ok bool) {
	if len(p) <= 4 || !isBlank(p[4]) {
		return 0, 0, nil, false
	}
	sv, ok := hex(p[:4])
	if !ok {
		return 0, 0, nil, false
	}
	sd, name, ok := idName(trimBlanks(p[4:], false), 4)
	if !ok {
		return 0, 0, nil, false
	}
	return uint16(sv), uint16(sd), name, true
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// trimBlanks cuts the spaces and tabs s starts with, and with right those it ends with.
func trimBlanks(s []byte, right bool) []byte {
	for len(s) > 0 && isBlank(s[0]) {
		s = s[1:]
	}
	for right && len(s) > 0 && isBlank(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// hex parses s, at most 8 hexadecimal digits of either case.
func hex(s []byte) (uint32, bool) {
	var v uint32
	for _, c := range s {
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
	return look(db, &db.vendors, vendor, func(w *wanted) { w.vendor(vendor) })
}

// Device returns the name of a vendor's device.
func (db *DB) Device(vendor, device uint16) (string, bool) {
	if db == nil {
		return "", false
	}
	key := uint32(vendor)<<16 | uint32(device)
	return look(db, &db.devices, key, func(w *wanted) { w.device(vendor, device) })
}

// Subsystem returns the name of a subsystem (subVendor:subDevice) of a
// vendor's device. No command shows one; TestParseSample and TestNamesChain
// check the parser's subsystem lines with it.
func (db *DB) Subsystem(vendor, device, subVendor, subDevice uint16) (string, bool) {
	if db == nil {
		return "", false
	}
	key := uint64(vendor)<<48 | uint64(device)<<32 | uint64(subVendor)<<16 | uint64(subDevice)
	return look(db, &db.subsystems, key, func(w *wanted) { w.subsystem(vendor, device, subVendor, subDevice) })
}

// look answers a lookup of k from m, which a DB with a source first loads it into
// (with add) when it has not yet.
func look[K comparable](db *DB, m *map[K]string, k K, add func(*wanted)) (string, bool) {
	if db.src == nil {
		name, ok := (*m)[k]
		return name, ok
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	name, ok := (*m)[k]
	if !ok {
		var w wanted
		add(&w)
		db.load(&w)
		name = (*m)[k]
	}
	return name, name != ""
}

// Class returns the most specific name known for a 24-bit class code
// 0xCCSSPP, the value of /sys/bus/pci/devices/*/class: the prog-if name if
// known, else the subclass name, else the class name. So 0x030000 is "VGA
// controller" (prog-if 00 of "VGA compatible controller"), 0x060400 is
// "Normal decode" (prog-if 00 of "PCI bridge") and 0x040300 is "HDA
// compatible" (prog-if 00 of "Audio device"); use [DB.Subclass] for the
// name lspci prints. A class above 0xFFFFFF is unknown. Commands show the
// subclass's name (Names.Subclass); the tests check every level with this.
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
// 0x040300 is "Audio device". A class above 0xFFFFFF is unknown. Commands
// ask the chain (Names.Subclass); the tests check one file's names with this.
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
	add := func(w *wanted) { w.class(class) }
	switch l {
	case levelProgIf:
		return look(db, &db.progIfs, class, add)
	case levelSubclass:
		return look(db, &db.subclasses, uint16(class>>8), add)
	default:
		return look(db, &db.classes, uint8(class>>16), add)
	}
}

// Names is a chain of databases: each lookup takes the first DB that knows
// the id. A nil *DB in the chain is skipped. The chain is usually a
// host's own pci.ids followed by a fallback, see [Default].
type Names []*DB

// first returns the fillWanted of the first DB for which look succeeds.
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

// Subsystem returns the subsystem's name, or "" when no DB knows it. Only the
// tests of a chain use it, as they use Names.Class.
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
