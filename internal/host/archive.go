package host

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
)

// archiveBackend holds a snapshot archive unpacked in memory.
type archiveBackend struct {
	nodes map[string]*node
}

// node is one entry of an archive.
type node struct {
	kind Kind
	// data is a File's contents, shared by every read and every hard link: it is never
	// changed. It is nil for a file over its cap, which is not kept.
	data     []byte
	size     int64
	target   string   // a Link's target, as stored
	special  string   // what an Other is: "a FIFO", "a character device", …
	children []string // a Dir's names, sorted once the archive is read
}

// OpenArchive reads a snapshot: a tar archive, gzip-compressed or not, whose members are
// paths relative to the root ("sys/devices/…" or "./sys/devices/…"), with symbolic links
// kept as links. name is used in messages.
//
// An archive is refused as a whole when it is larger than a host's snapshot can be
// (MaxArchiveBytes, MaxArchiveEntries, MaxArchiveStream, MaxPathBytes): then the error
// names the member that went over. A file over its own cap (FileCap) is not kept, and
// reading it fails as on a directory root; FIFOs and devices are kept as what they are,
// and reading them fails too.
func OpenArchive(name string, r io.Reader) (*Host, error) {
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", name, err)
		}
		defer zr.Close()
		src = zr
	}
	stream := &streamCap{r: src, left: maxArchiveStream}
	u := &unpacker{a: &archiveBackend{nodes: map[string]*node{"/": {kind: Dir}}}}
	tr := tar.NewReader(stream)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if stream.over {
			return nil, fmt.Errorf("snapshot %s: unpacks to more than %s, more than any host's snapshot: not reading it", name, byteSize(maxArchiveStream))
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: not a readable tar archive: %w", name, err)
		}
		if err := u.member(hdr, tr); err != nil {
			if stream.over {
				return nil, fmt.Errorf("snapshot %s: unpacks to more than %s, more than any host's snapshot: not reading it", name, byteSize(maxArchiveStream))
			}
			return nil, fmt.Errorf("snapshot %s: %w", name, err)
		}
	}
	for _, n := range u.a.nodes {
		slices.Sort(n.children)
	}
	return newHost(name, u.a), nil
}

// maxArchiveStream is MaxArchiveStream, lowered by tests.
var maxArchiveStream int64 = MaxArchiveStream

// streamCap fails a read past its cap on the unpacked stream.
type streamCap struct {
	r    io.Reader
	left int64
	over bool
}

var errStreamCap = errors.New("archive stream over its cap")

func (s *streamCap) Read(p []byte) (int, error) {
	if s.left <= 0 {
		s.over = true
		return 0, errStreamCap
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	return n, err
}

// unpacker adds members to an archiveBackend and keeps its caps.
type unpacker struct {
	a       *archiveBackend
	entries int
	bytes   int64
}

// member adds the member hdr, whose contents tr reads.
func (u *unpacker) member(hdr *tar.Header, tr io.Reader) error {
	u.entries++
	if u.entries > MaxArchiveEntries {
		return fmt.Errorf("more than %d entries (at member %s), more than any host's snapshot holds: not reading it", MaxArchiveEntries, shorten(hdr.Name))
	}
	p, err := memberPath(hdr.Name)
	if err != nil {
		return fmt.Errorf("member %s: %w", shorten(hdr.Name), err)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if n, ok := u.a.nodes[p]; ok {
			if n.kind != Dir {
				return fmt.Errorf("member %s: %s is in the archive twice, as a directory and not", shorten(hdr.Name), shorten(p))
			}
			return nil
		}
		_, err := u.mkdirs(p, true)
		return err
	case tar.TypeSymlink:
		if len(hdr.Linkname) > MaxPathBytes || strings.IndexByte(hdr.Linkname, 0) >= 0 {
			return fmt.Errorf("member %s: the link's target is longer than %d bytes or holds a NUL byte: no Linux link is", shorten(hdr.Name), MaxPathBytes)
		}
		return u.add(hdr.Name, p, &node{kind: Link, target: hdr.Linkname}, int64(len(hdr.Linkname)))
	case tar.TypeLink:
		target, err := memberPath(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link %s: %w", shorten(hdr.Name), err)
		}
		t, ok := u.a.nodes[target]
		if !ok || t.kind != File {
			return fmt.Errorf("hard link %s points to %s, which is not a regular file before it in the archive", shorten(hdr.Name), shorten(hdr.Linkname))
		}
		// Counted at its size: whoever reads the archive sees one more file of it.
		return u.add(hdr.Name, p, &node{kind: File, data: t.data, size: t.size}, t.size)
	case tar.TypeReg, tar.TypeGNUSparse, tar.TypeCont:
		if err := u.count(hdr.Name, hdr.Size); err != nil {
			return err
		}
		n := &node{kind: File, size: hdr.Size}
		if hdr.Size <= capOf(p).max {
			// A file over its cap is not kept (tar skips its contents); reading
			// it fails with the cap, as on a directory.
			b := make([]byte, hdr.Size)
			if _, err := io.ReadFull(tr, b); err != nil {
				return fmt.Errorf("member %s: %w", shorten(hdr.Name), err)
			}
			n.data = b
		}
		return u.add(hdr.Name, p, n, 0)
	case tar.TypeFifo:
		return u.add(hdr.Name, p, &node{kind: Other, special: "a FIFO"}, 0)
	case tar.TypeChar:
		return u.add(hdr.Name, p, &node{kind: Other, special: "a character device"}, 0)
	case tar.TypeBlock:
		return u.add(hdr.Name, p, &node{kind: Other, special: "a block device"}, 0)
	}
	// Global headers and the like: nothing gpusplit reads, but tar reads their
	// contents past.
	return u.count(hdr.Name, hdr.Size)
}

// count adds n bytes to what the archive holds.
func (u *unpacker) count(member string, n int64) error {
	u.bytes += n
	if n < 0 || u.bytes > MaxArchiveBytes {
		return fmt.Errorf("member %s takes the files and names past %s, more than any host's snapshot holds: not reading it", shorten(member), byteSize(MaxArchiveBytes))
	}
	return nil
}

// add puts n at p, which must be new, below directories made as needed; extra is what n
// holds beyond its name.
func (u *unpacker) add(member, p string, n *node, extra int64) error {
	if p == "/" {
		return fmt.Errorf("member %s: the root can only be a directory", shorten(member))
	}
	if _, ok := u.a.nodes[p]; ok {
		return fmt.Errorf("member %s: %s is in the archive twice", shorten(member), shorten(p))
	}
	dir, err := u.mkdirs(parent(p), false)
	if err != nil {
		return fmt.Errorf("member %s: %w", shorten(member), err)
	}
	if err := u.count(member, int64(len(p))+extra); err != nil {
		return err
	}
	u.a.nodes[p] = n
	dir.children = append(dir.children, p[strings.LastIndexByte(p, '/')+1:])
	return nil
}

// mkdirs returns the directory at p, making it and the directories above it as needed.
// Every directory made counts by its name, and as an entry unless it is the member
// itself (when isMember is set), which is counted already.
func (u *unpacker) mkdirs(p string, isMember bool) (*node, error) {
	var missing []string
	d := p
	for {
		n, ok := u.a.nodes[d]
		if ok {
			if n.kind != Dir {
				return nil, fmt.Errorf("%s is not a directory in the archive", shorten(d))
			}
			break
		}
		missing = append(missing, d)
		d = parent(d)
	}
	n := u.a.nodes[d]
	for i := len(missing) - 1; i >= 0; i-- {
		m := missing[i]
		if !isMember || i > 0 {
			// A directory the member's name implies is an entry of its own.
			u.entries++
			if u.entries > MaxArchiveEntries {
				return nil, fmt.Errorf("more than %d entries (at %s), more than any host's snapshot holds: not reading it", MaxArchiveEntries, shorten(m))
			}
		}
		if err := u.count(m, int64(len(m))); err != nil {
			return nil, err
		}
		child := &node{kind: Dir}
		u.a.nodes[m] = child
		n.children = append(n.children, m[strings.LastIndexByte(m, '/')+1:])
		n = child
	}
	return n, nil
}

// memberPath turns a tar member name into a clean absolute path, refusing names that
// climb out of the archive and names no Linux path can have.
func memberPath(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", errors.New("name contains a NUL byte")
	}
	if len(name) > 2*MaxPathBytes {
		return "", fmt.Errorf("name is longer than %d bytes (PATH_MAX), as no path on a Linux host is", MaxPathBytes)
	}
	depth := 0
	for _, c := range strings.Split(name, "/") {
		if len(c) > MaxNameBytes {
			return "", fmt.Errorf("a component of the name is longer than %d bytes (NAME_MAX), as no file name on a Linux host is", MaxNameBytes)
		}
		switch c {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return "", errors.New("name leads outside the archive")
			}
		default:
			depth++
		}
	}
	p := path.Clean("/" + name)
	if len(p) > MaxPathBytes {
		return "", fmt.Errorf("name is longer than %d bytes (PATH_MAX), as no path on a Linux host is", MaxPathBytes)
	}
	return p, nil
}

// shorten keeps a member name from filling a message.
func shorten(name string) string {
	const most = 120
	if len(name) <= most {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%q… (%d bytes)", name[:most], len(name))
}

func (a *archiveBackend) lstat(p string) (entry, error) {
	n, ok := a.nodes[p]
	if !ok {
		return entry{}, fs.ErrNotExist
	}
	return entry{kind: n.kind, target: n.target}, nil
}

// readFile returns the file's contents as held, not a copy: callers must not change it.
func (a *archiveBackend) readFile(p string) ([]byte, error) {
	n, ok := a.nodes[p]
	switch {
	case !ok:
		return nil, fs.ErrNotExist
	case n.kind == Dir:
		return nil, syscall.EISDIR
	case n.kind == Other:
		return nil, &NotRegularError{Type: n.special}
	case n.kind == Link:
		return nil, errLeafIsLink
	case n.data == nil && n.size > 0:
		return nil, capOf(p).tooLarge(n.size)
	}
	// Made to its size, so an append by a caller copies it.
	return n.data, nil
}

func (a *archiveBackend) readLeaf(p string) ([]byte, error) { return a.readFile(p) }

func (a *archiveBackend) open(p string) (io.ReadCloser, error) {
	b, err := a.readFile(p)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (a *archiveBackend) readDir(p string) ([]string, error) {
	n, ok := a.nodes[p]
	switch {
	case !ok:
		return nil, fs.ErrNotExist
	case n.kind != Dir:
		return nil, syscall.ENOTDIR
	}
	return slices.Clone(n.children), nil
}
