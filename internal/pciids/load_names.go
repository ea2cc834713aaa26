package pciids

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// A DB with a source answers each lookup from what a load found: a pass of a parser
// that keeps only the wanted names over the file, or over the blocks of a text in memory
// where they can be. [Names.Load] gives one load all a scan is about to ask.

// source is where a DB's loads read its text.
type source struct {
	// A text in memory, and where its top-level entries lie: a load reads only the
	// blocks of the vendors and classes it wants.
	text  string
	spans []span

	// Or a file, open for the rest of the process, read through a buffer of chunk
	// bytes (grown for a longer line): a host's pci.ids is 1.4 MB, and its pages are not
	// held after a load. Where its blocks lie is found once, by a pass that
	// [Names.Prepare] starts while the devices are read; a load then reads only the
	// wanted blocks, or the whole file when there is no index (past maxSpans entries).
	file     *os.File
	size     int64 // the bytes read: the file's size when it was opened
	chunk    int
	maxSpans int
	index    func() []span // nil for no index
}

// chunkBytes is what a read of a file takes at once; maxSpans bounds the index of one
// (the upstream file has 2,500 vendors; a crafted one of 16 MB could list millions).
const (
	chunkBytes = 64 << 10
	maxSpans   = 1 << 16
)

// fileSource reads the file f of size bytes.
func fileSource(f *os.File, size int64) *source {
	src := &source{file: f, size: size, chunk: chunkBytes, maxSpans: maxSpans}
	src.index = sync.OnceValue(src.findSpans)
	return src
}

// withSource is a DB that loads from src.
func withSource(src *source) *DB {
	db := newDB()
	db.src = src
	return db
}

// index is the DB of the text s, in memory, loaded as Embedded is.
func index(s string) *DB { return withSource(&source{text: s, spans: spans(s)}) }

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
	src := db.src
	spans := src.spans
	if src.file != nil {
		p.clone = true
		if spans = nil; src.index != nil {
			spans = src.index()
		}
	}
	// The blocks wanted, as bits by id: a host's file has 2,500 of them.
	var vendors [1 << 16 / 64]uint64
	var classes [256 / 64]uint64
	for v := range w.vendorBlocks {
		vendors[v/64] |= 1 << (v % 64)
	}
	for c := range w.classBlocks {
		classes[c/64] |= 1 << (c % 64)
	}
	wants := func(s span) bool {
		if s.class {
			return classes[s.id/64&3]&(1<<(s.id%64)) != 0
		}
		return vendors[s.id/64]&(1<<(s.id%64)) != 0
	}
	var buf []byte // a file's, for every block read
	switch {
	case src.file == nil:
		for _, s := range spans {
			if wants(s) {
				p.text(src.text[s.start:s.end])
			}
		}
	case spans == nil:
		// A file that fails to read part-way answers with what was read before: the
		// names it did not reach are none, and the next DB of a chain gives them.
		_ = src.stream(&buf, 0, src.size, p.text)
	default:
		for _, s := range spans {
			if wants(s) && src.stream(&buf, int64(s.start), int64(s.end), p.text) != nil {
				break
			}
		}
	}
	answer(db.vendors, p.db.vendors, w.vendors)
	answer(db.devices, p.db.devices, w.devices)
	answer(db.subsystems, p.db.subsystems, w.subsystems)
	answer(db.classes, p.db.classes, w.classes)
	answer(db.subclasses, p.db.subclasses, w.subclasses)
	answer(db.progIfs, p.db.progIfs, w.progIfs)
}

// answer keeps in m what found gives each wanted id.
func answer[K comparable](m, found map[K]string, wanted map[K]bool) {
	for k := range wanted {
		m[k] = found[k]
	}
}

// stream shows fn the lines of the file from from to to, read through *bufp (made, or
// grown for a long line, as needed, and kept for the next stream) a chunk at a time: each
// chunk up to its last newline, the rest carried to the front of the next. The chunks
// are the buffer's bytes, read into again: fn keeps a copy of what it keeps.
func (src *source) stream(bufp *[]byte, from, to int64, fn func(chunk string)) error {
	if len(*bufp) == 0 {
		*bufp = make([]byte, min(int64(src.chunk), src.size))
	}
	buf := *bufp
	defer func() { *bufp = buf }()
	held := 0 // bytes at the front of buf: a line the last read cut
	at := from
	for at < to {
		if held == len(buf) { // a line longer than buf
			buf = append(buf, make([]byte, max(1, min(int64(len(buf)), to-at)))...)
		}
		n, err := src.file.ReadAt(buf[held:min(int64(len(buf)), int64(held)+to-at)], at)
		at += int64(n)
		data := buf[:held+n]
		end := len(data) // the last chunk ends the last line, with or without a newline
		if at < to && err == nil {
			end = bytes.LastIndexByte(data, '\n') + 1
		}
		fn(unsafe.String(unsafe.SliceData(data), end))
		held = copy(buf, data[end:])
		if err == io.EOF { // the file shrank since it was opened
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// findSpans is spans of the file: nil when it holds more than maxSpans, or fails to read.
func (src *source) findSpans() []span {
	f := spanFinder{out: make([]span, 0, src.size/512)} // the upstream file has a vendor per 540 bytes
	at := 0
	var buf []byte
	err := src.stream(&buf, 0, src.size, func(chunk string) {
		if f.out != nil && len(f.out) > src.maxSpans {
			return
		}
		f.text(chunk, at)
		at += len(chunk)
	})
	out := f.end(at)
	if err != nil || len(out) > src.maxSpans {
		return nil
	}
	return out
}

// span is where a top-level entry of a pci.ids text lies: a vendor's block, or a
// class's, with its id.
type span struct {
	start, end int32
	id         uint16
	class      bool
}

// spans finds the vendors' and classes' blocks of s, by the rules of parse: a nested
// line, a blank one or a comment stays in the block; any other line starts a new
// top-level entry, a block if it is a vendor's or a class's.
func spans(s string) []span {
	var f spanFinder
	f.text(s, 0)
	return f.end(len(s))
}

// spanFinder is spans, shown the text a piece at a time (each piece whole lines).
type spanFinder struct {
	out   []span
	start int
	kind  section
	id    uint16
}

// text reads the lines of s, which starts at offset at of the text.
func (f *spanFinder) text(s string, at int) {
	for from := 0; from < len(s); {
		line := s[from:]
		next := len(s)
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], from+i+1
		}
		if len(line) > 0 && line[0] != '\t' {
			if line = content(line); line != "" {
				f.close(at + from)
				f.start, f.kind = at+from, inNone
				if rest, ok := strings.CutPrefix(line, "C "); ok {
					if c, _, ok := idName(rest, 2); ok {
						f.kind, f.id = inClass, uint16(c)
					}
				} else if v, _, ok := idName(line, 4); ok {
					f.kind, f.id = inVendor, uint16(v)
				}
			}
		}
		from = next
	}
}

func (f *spanFinder) close(end int) {
	if f.kind != inNone {
		f.out = append(f.out, span{start: int32(f.start), end: int32(end), id: f.id, class: f.kind == inClass})
	}
}

// end closes the last block at the text's end, and returns the spans.
func (f *spanFinder) end(at int) []span {
	f.close(at)
	f.kind = inNone
	return f.out
}

// Prepare starts, in the background, what lets a later [Names.Load] read less: the pass
// that finds where the blocks of a host's pci.ids lie. A scan calls it before it reads
// the devices, for the pass to run while they are read.
func (n Names) Prepare() {
	for _, db := range n {
		if db != nil && db.src != nil && db.src.index != nil {
			go db.src.index()
		}
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
