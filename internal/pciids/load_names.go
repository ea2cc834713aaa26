package pciids

import (
	"io"
	"os"
	"slices"
	"strings"
)

// A DB with a source answers each lookup from what a load found: one pass, over the
// whole text, of a parser that keeps only the wanted names. [Names.Load] gives one load
// all a scan is about to ask.

// source is where a DB's loads read its text: the embedded copy, or a host's file, open
// for the rest of the process and read through a buffer (a host's pci.ids is 1.4 MB,
// and its pages are not held after a load).
type source struct {
	text string
	file *os.File
	size int64 // the bytes of file read: its size when it was opened
}

// withSource is a DB that loads from src.
func withSource(src *source) *DB {
	db := newDB()
	db.src = src
	return db
}

// wanted is what a load looks for. The maps of ids are what is asked; the others say
// which blocks can hold them.
type wanted struct {
	vendors    map[uint16]bool
	devices    map[uint32]bool // vendor<<16 | device
	subsystems map[uint64]bool
	classes    map[uint8]bool
	subclasses map[uint16]bool
	progIfs    map[uint32]bool

	vendorBlocks map[uint16]bool     // the vendors, and those of the devices and subsystems
	subsystemsOf map[uint32]bool     // the devices of the subsystems
	deviceLines  map[uint16][]uint16 // by vendor: the devices and those of the subsystems
	classBlocks  map[uint8]bool      // the classes, with the subclasses and prog-ifs
}

func set[K comparable](m *map[K]bool, k K) {
	if *m == nil {
		*m = map[K]bool{}
	}
	(*m)[k] = true
}

func (w *wanted) vendor(v uint16) {
	set(&w.vendors, v)
	set(&w.vendorBlocks, v)
}

func (w *wanted) device(v, d uint16) {
	set(&w.devices, uint32(v)<<16|uint32(d))
	w.deviceLine(v, d)
}

// subsystem is for DB.Subsystem, which only the tests ask.
func (w *wanted) subsystem(v, d, sv, sd uint16) {
	set(&w.subsystems, uint64(v)<<48|uint64(d)<<32|uint64(sv)<<16|uint64(sd))
	set(&w.subsystemsOf, uint32(v)<<16|uint32(d))
	w.deviceLine(v, d)
}

// deviceLine wants the lines of a vendor's device read.
func (w *wanted) deviceLine(v, d uint16) {
	set(&w.vendorBlocks, v)
	if w.deviceLines == nil {
		w.deviceLines = map[uint16][]uint16{}
	}
	if !slices.Contains(w.deviceLines[v], d) {
		w.deviceLines[v] = append(w.deviceLines[v], d)
	}
}

// class wants every level of a 24-bit class code: the lookups of a class go level by
// level.
func (w *wanted) class(code uint32) {
	c := uint8(code >> 16)
	set(&w.classes, c)
	set(&w.subclasses, uint16(code>>8))
	set(&w.progIfs, code)
	set(&w.classBlocks, c)
}

func (w *wanted) empty() bool { return len(w.vendorBlocks) == 0 && len(w.classBlocks) == 0 }

// load finds what w wants and keeps the answers, "" for what the text does not name.
// db.mu is held.
func (db *DB) load(w *wanted) {
	if w.empty() {
		return
	}
	p := parser{db: newDB(), want: w}
	var r io.Reader = strings.NewReader(db.src.text)
	if db.src.file != nil {
		r = io.NewSectionReader(db.src.file, 0, db.src.size)
	}
	// A file that fails to read part-way answers with what was read before: the names
	// it did not reach are none, and the next DB of a chain gives them.
	_ = p.read(r)
	fillWanted(db.vendors, p.db.vendors, w.vendors)
	fillWanted(db.devices, p.db.devices, w.devices)
	fillWanted(db.subsystems, p.db.subsystems, w.subsystems)
	fillWanted(db.classes, p.db.classes, w.classes)
	fillWanted(db.subclasses, p.db.subclasses, w.subclasses)
	fillWanted(db.progIfs, p.db.progIfs, w.progIfs)
}

// fillWanted keeps in m what found gives each wanted id.
func fillWanted[K comparable](m, found map[K]string, wanted map[K]bool) {
	for k := range wanted {
		m[k] = found[k]
	}
}

// DeviceID is a PCI function's vendor and device ids.
type DeviceID struct{ Vendor, Device uint16 }

// Load looks up, in one load of each DB of the chain, the names of these devices and
// their vendors and of these 24-bit class codes: a DB further down the chain loads only
// the devices and vendors that the ones before it do not name. The lookups that follow
// are answered from memory. (A lookup that was not loaded is answered too, with a load of
// its own: a pass over a host's whole file.)
func (n Names) Load(devices []DeviceID, classes []uint32) {
	vendors := make([]uint16, 0, len(devices))
	for _, d := range devices {
		vendors = append(vendors, d.Vendor)
	}
	for _, db := range n {
		if db == nil {
			continue
		}
		if db.src != nil {
			db.mu.Lock()
			var w wanted
			for _, v := range vendors {
				if _, ok := db.vendors[v]; !ok {
					w.vendor(v)
				}
			}
			for _, d := range devices {
				if _, ok := db.devices[uint32(d.Vendor)<<16|uint32(d.Device)]; !ok {
					w.device(d.Vendor, d.Device)
				}
			}
			for _, c := range classes {
				if _, ok := db.progIfs[c]; !ok && c <= 0xFFFFFF {
					w.class(c)
				}
			}
			db.load(&w)
			db.mu.Unlock()
		}
		vendors = unnamed(vendors, func(v uint16) bool { _, ok := db.Vendor(v); return ok })
		devices = unnamed(devices, func(d DeviceID) bool { _, ok := db.Device(d.Vendor, d.Device); return ok })
	}
}

// unnamed is the ids of ids that named does not name, in a new slice.
func unnamed[T any](ids []T, named func(T) bool) []T {
	var out []T
	for _, id := range ids {
		if !named(id) {
			out = append(out, id)
		}
	}
	return out
}
