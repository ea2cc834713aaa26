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
