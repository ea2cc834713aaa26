package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// A pack is a snapshot archive as OpenArchive holds it in memory, written out entry by
// entry: what the embedded sample host is kept as, so that opening it costs no gzip or
// tar decoding, and its files are not copied (they are read where the binary holds them).
//
//	"gpusplit pack 1\n"
//	uvarint: top's length, then top (ArchiveTop)
//	uvarint: the number of entries after the root
//	each entry, in the order they were added (a directory before what it holds):
//	  kind byte (File, Dir, Link, Other), other byte (what an Other is)
//	  uvarint: the index of its directory
//	  uvarint: path length, path
//	  for a File, uvarint size, then byte 1 and size bytes when they are kept, else 0
//	  for a Link, uvarint: target length, target
const packMagic = "gpusplit pack 1\n"

// Pack writes the snapshot archive that h was opened from as a pack. Only
// samplehost's TestArchiveIsCurrent uses it: it checks the embedded pack, and with
// -update (go generate ./internal/samplehost) writes it.
func Pack(h *Host) ([]byte, error) {
	a, ok := h.fs.(*archiveBackend)
	if !ok {
		return nil, errors.New("only a snapshot archive can be packed")
	}
	b := []byte(packMagic)
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(a.top)
	b = binary.AppendUvarint(b, uint64(a.e.n-1))
	for i := int32(1); i < a.e.n; i++ {
		n := a.e.at(i)
		b = append(b, byte(n.kind), n.other)
		b = binary.AppendUvarint(b, uint64(n.parent))
		str(n.path)
		switch n.kind {
		case File:
			b = binary.AppendUvarint(b, uint64(n.size))
			if n.data == nil && n.size > 0 {
				b = append(b, 0)
			} else {
				b = append(b, 1)
				b = append(b, n.data...)
			}
		case Link:
			str(n.target)
		}
	}
	return b, nil
}

// OpenPacked returns the Host of a pack (see Pack), named name in messages. Its paths
// and files are the pack's own bytes, so the pack must stay unchanged as long as the
// Host is used: a string, as the binary embeds it.
func OpenPacked(name, pack string) (*Host, error) {
	bad := func(what string) error { return fmt.Errorf("pack %s: %s", name, what) }
	rest, ok := strings.CutPrefix(pack, packMagic)
	if !ok {
		return nil, bad("not a pack")
	}
	uvarint := func() (uint64, bool) {
		v, k := binary.Uvarint([]byte(rest[:min(len(rest), binary.MaxVarintLen64)]))
		if k <= 0 {
			return 0, false
		}
		rest = rest[k:]
		return v, true
	}
	str := func() (string, bool) {
		l, ok := uvarint()
		if !ok || l > uint64(len(rest)) {
			return "", false
		}
		s := rest[:l]
		rest = rest[l:]
		return s, true
	}
	top, ok := str()
	if !ok {
		return nil, bad("cut short")
	}
	count, ok := uvarint()
	if !ok || count > MaxArchiveEntries {
		return nil, bad("cut short, or more entries than an archive may hold")
	}
	e := newEntries()
	for i := uint64(0); i < count; i++ {
		if len(rest) < 2 {
			return nil, bad("cut short")
		}
		n := node{kind: Kind(rest[0]), other: rest[1]}
		rest = rest[2:]
		dir, ok1 := uvarint()
		p, ok2 := str()
		if !ok1 || !ok2 || dir > i || e.at(int32(dir)).kind != Dir || n.kind > Other || int(n.other) >= len(otherKinds) {
			return nil, bad(fmt.Sprintf("entry %d is not one", i+1))
		}
		n.parent, n.path = int32(dir), p
		switch n.kind {
		case File:
			size, ok := uvarint()
			if !ok || len(rest) == 0 {
				return nil, bad("cut short")
			}
			n.size = int64(size)
			kept := rest[0] == 1
			rest = rest[1:]
			if kept {
				if size > uint64(len(rest)) {
					return nil, bad("cut short")
				}
				// The file's bytes where the pack holds them: read-only, as every
				// read of a snapshot's file is.
				n.data = unsafe.Slice(unsafe.StringData(rest), size)
				rest = rest[size:]
			}
		case Link:
			if n.target, ok = str(); !ok {
				return nil, bad("cut short")
			}
		}
		e.insert(n)
	}
	if rest != "" {
		return nil, bad("bytes after its last entry")
	}
	e.finish()
	return newHost(name, &archiveBackend{e: e, top: top}), nil
}
