package host

import (
	"hash/maphash"
	"slices"
	"strings"
)

// entries holds the entries of an archive in little memory: the cap on entries
// (MaxArchiveEntries) is what bounds an archive of a million empty directories, so each
// entry costs about 100 bytes besides its path. Entries live in fixed-size chunks (no
// copy as they grow), are found by path through an open-addressing table of indexes,
// and a directory's entries are listed from one shared slice, built once all are in.
type entries struct {
	chunks [][]node
	n      int32
	table  []int32 // index+1 of the entry whose path hashes there; 0 for none
	seed   maphash.Seed
	kids   []int32 // every entry's index, grouped by directory, sorted by name
}

// node is one entry of an archive.
type node struct {
	path string
	// data is a File's contents, shared by every read and every hard link: it is never
	// changed. It is nil for a file over its cap, which is not kept (size says how
	// large it is).
	data   []byte
	size   int64
	target string // a Link's, as stored
	parent int32
	first  int32 // a Dir's entries: kids[first:first+count]
	count  int32
	kind   Kind
	other  uint8 // what an Other is, an index in otherKinds
}

const chunkLen = 4096

var otherKinds = []string{"a FIFO", "a character device", "a block device"}

func newEntries() *entries {
	e := &entries{seed: maphash.MakeSeed(), table: make([]int32, 1024)}
	e.insert(node{path: "/", kind: Dir, parent: -1})
	return e
}

func (e *entries) at(i int32) *node { return &e.chunks[i/chunkLen][i%chunkLen] }

// lookup returns the index of the entry at p.
func (e *entries) lookup(p string) (int32, bool) {
	mask := uint64(len(e.table) - 1)
	for s := maphash.String(e.seed, p) & mask; ; s = (s + 1) & mask {
		i := e.table[s]
		if i == 0 {
			return 0, false
		}
		if e.at(i-1).path == p {
			return i - 1, true
		}
	}
}

// insert adds n, whose path is not there yet, and returns its index.
func (e *entries) insert(n node) int32 {
	if int(e.n)+1 > len(e.table)/2 {
		e.grow()
	}
	if int(e.n)%chunkLen == 0 {
		e.chunks = append(e.chunks, make([]node, chunkLen))
	}
	i := e.n
	*e.at(i) = n
	e.n++
	e.place(i)
	return i
}

func (e *entries) place(i int32) {
	mask := uint64(len(e.table) - 1)
	s := maphash.String(e.seed, e.at(i).path) & mask
	for e.table[s] != 0 {
		s = (s + 1) & mask
	}
	e.table[s] = i + 1
}

func (e *entries) grow() {
	e.table = make([]int32, 2*len(e.table))
	for i := range e.n {
		e.place(i)
	}
}

// soleTop returns the path of the one directory at the top of the archive ("/host1")
// when it is the only entry there, is not itself a root's directory (sys), and holds a
// sysfs: sys/bus or sys/devices. Otherwise "". Called before finish.
func (e *entries) soleTop() string {
	top := int32(-1)
	for i := int32(1); i < e.n; i++ {
		if e.at(i).parent != 0 {
			continue
		}
		if top >= 0 {
			return ""
		}
		top = i
	}
	if top < 0 || e.at(top).kind != Dir || e.at(top).path == "/sys" {
		return ""
	}
	p := e.at(top).path
	for _, sub := range []string{"/sys/bus", "/sys/devices"} {
		if i, ok := e.lookup(p + sub); ok && e.at(i).kind == Dir {
			if j, ok := e.lookup(p + "/sys"); ok && e.at(j).kind == Dir {
				return p
			}
		}
	}
	return ""
}

// reroot returns the entries below the directory top, with top as their root, and
// leaves e unusable. Entries are inserted after the directory that holds them, so one
// pass in order rebuilds the tree with its parents known; each chunk of e is let go once
// copied, so that the two sets of entries are not held whole at once (the paths and
// contents are shared, not copied). Called before finish.
func (e *entries) reroot(top string) *entries {
	out := newEntries()
	e.table = nil
	at := make([]int32, e.n) // index in out of each entry of e
	for i := int32(1); i < e.n; i++ {
		n := *e.at(i)
		if (i+1)%chunkLen == 0 {
			e.chunks[i/chunkLen] = nil
		}
		if n.path == top {
			at[i] = 0
			continue
		}
		n.path = n.path[len(top):]
		n.parent = at[n.parent]
		at[i] = out.insert(n)
	}
	e.chunks = nil
	return out
}

// finish lists every directory's entries, sorted by name.
func (e *entries) finish() {
	for i := int32(1); i < e.n; i++ {
		e.at(e.at(i).parent).count++
	}
	var next int32
	for i := range e.n {
		d := e.at(i)
		d.first, next = next, next+d.count
		d.count = 0
	}
	e.kids = make([]int32, next)
	for i := int32(1); i < e.n; i++ {
		d := e.at(e.at(i).parent)
		e.kids[d.first+d.count] = i
		d.count++
	}
	for i := range e.n {
		d := e.at(i)
		if d.count > 1 {
			slices.SortFunc(e.kids[d.first:d.first+d.count], func(a, b int32) int {
				return strings.Compare(e.at(a).path, e.at(b).path)
			})
		}
	}
}

// names returns the names in the directory at index i.
func (e *entries) names(i int32) []string {
	d := e.at(i)
	out := make([]string, 0, d.count)
	for _, k := range e.kids[d.first : d.first+d.count] {
		p := e.at(k).path
		out = append(out, p[strings.LastIndexByte(p, '/')+1:])
	}
	return out
}
