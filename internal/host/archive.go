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
	"strings"
	"syscall"
)

// archiveBackend holds a snapshot archive unpacked in memory.
type archiveBackend struct {
	e *entries
	// top is the folder every member sat under, read as the root ("host1"); "" when the
	// members are relative to the root.
	top string
}

// OpenArchive reads a snapshot: a tar archive, gzip-compressed or not, whose members are
// paths relative to the root ("sys/devices/…" or "./sys/devices/…"), with symbolic links
// kept as links. name is used in messages.
//
// Many people pack a capture with its folder ("host1/sys/…", "host1/proc/…"; hwloc's
// test captures are so), which is no root of a host. When every member sits under one
// folder that holds a sysfs (a sys/ with bus/ or devices/ in it: procfs has a sys/ of
// its own), that folder is read as the root, and ArchiveTop names it.
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
	u := &unpacker{e: newEntries()}
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
	top := u.e.soleTop()
	if top != "" {
		u.e = u.e.reroot(top)
	}
	u.e.finish()
	return newHost(name, &archiveBackend{e: u.e, top: strings.TrimPrefix(top, "/")}), nil
}

// ArchiveTop returns the folder of a snapshot archive that was read as its root because
// every member sat under it ("host1"), or "" for any other root.
func (h *Host) ArchiveTop() string {
	if a, ok := h.fs.(*archiveBackend); ok {
		return a.top
	}
	return ""
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
	e       *entries
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
		if i, ok := u.e.lookup(p); ok {
			if u.e.at(i).kind != Dir {
				return fmt.Errorf("member %s: %s is in the archive twice, once as a directory", shorten(hdr.Name), shorten(p))
			}
			return nil
		}
		_, err := u.mkdirs(hdr.Name, p, true)
		return err
	case tar.TypeSymlink:
		if len(hdr.Linkname) > MaxPathBytes || strings.IndexByte(hdr.Linkname, 0) >= 0 {
			return fmt.Errorf("member %s: the link's target is longer than %d bytes or holds a NUL byte: no Linux link is", shorten(hdr.Name), MaxPathBytes)
		}
		return u.add(hdr.Name, p, node{kind: Link, target: hdr.Linkname}, int64(len(hdr.Linkname)))
	case tar.TypeLink:
		target, err := memberPath(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link %s: %w", shorten(hdr.Name), err)
		}
		i, ok := u.e.lookup(target)
		if !ok || u.e.at(i).kind != File {
			return fmt.Errorf("hard link %s points to %s, which is not a regular file before it in the archive", shorten(hdr.Name), shorten(hdr.Linkname))
		}
		t := u.e.at(i)
		// Counted at its size: whoever reads the archive sees one more file of it.
		return u.add(hdr.Name, p, node{kind: File, data: t.data, size: t.size}, t.size)
	case tar.TypeReg, tar.TypeGNUSparse, tar.TypeCont:
		if err := u.count(hdr.Name, hdr.Size); err != nil {
			return err
		}
		n := node{kind: File, size: hdr.Size}
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
		return u.add(hdr.Name, p, node{kind: Other, other: 0}, 0)
	case tar.TypeChar:
		return u.add(hdr.Name, p, node{kind: Other, other: 1}, 0)
	case tar.TypeBlock:
		return u.add(hdr.Name, p, node{kind: Other, other: 2}, 0)
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
func (u *unpacker) add(member, p string, n node, extra int64) error {
	if p == "/" {
		return fmt.Errorf("member %s: the root can only be a directory", shorten(member))
	}
	if _, ok := u.e.lookup(p); ok {
		return fmt.Errorf("member %s: %s is in the archive twice", shorten(member), shorten(p))
	}
	dir, err := u.mkdirs(member, parent(p), false)
	if err != nil {
		return err
	}
	if err := u.count(member, int64(len(p))+extra); err != nil {
		return err
	}
	n.path, n.parent = p, dir
	u.e.insert(n)
	return nil
}

// mkdirs returns the directory at p, making it and the directories above it as needed
// for member. Every directory made counts by its name, and as an entry unless it is the
// member itself (when isMember is set), which is counted already.
func (u *unpacker) mkdirs(member, p string, isMember bool) (int32, error) {
	var missing []string
	d := p
	var dir int32
	for {
		i, ok := u.e.lookup(d)
		if ok {
			if u.e.at(i).kind != Dir {
				return 0, fmt.Errorf("member %s: %s is not a directory in the archive", shorten(member), shorten(d))
			}
			dir = i
			break
		}
		missing = append(missing, d)
		d = parent(d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		m := missing[i]
		if !isMember || i > 0 {
			// A directory the member's name implies is an entry of its own.
			u.entries++
			if u.entries > MaxArchiveEntries {
				return 0, fmt.Errorf("more than %d entries (at member %s), more than any host's snapshot holds: not reading it", MaxArchiveEntries, shorten(member))
			}
		}
		if err := u.count(member, int64(len(m))); err != nil {
			return 0, err
		}
		dir = u.e.insert(node{path: m, kind: Dir, parent: dir})
	}
	return dir, nil
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
	for rest := name; rest != ""; {
		c, after, _ := strings.Cut(rest, "/")
		rest = after
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
	const most = 64
	if len(name) <= most {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%q… (%d bytes)", name[:most], len(name))
}

func (a *archiveBackend) lstat(p string) (entry, error) {
	i, ok := a.e.lookup(p)
	if !ok {
		return entry{}, fs.ErrNotExist
	}
	n := a.e.at(i)
	if n.kind == Link {
		return entry{kind: Link, target: n.target}, nil
	}
	return entry{kind: n.kind}, nil
}

// readFile returns the file's contents as held, not a copy: callers must not change it.
func (a *archiveBackend) readFile(p string) ([]byte, error) {
	i, ok := a.e.lookup(p)
	if !ok {
		return nil, fs.ErrNotExist
	}
	switch n := a.e.at(i); {
	case n.kind == Dir:
		return nil, syscall.EISDIR
	case n.kind == Other:
		return nil, &NotRegularError{Type: otherKinds[n.other]}
	case n.kind == Link:
		return nil, errLeafIsLink
	case n.data == nil && n.size > 0:
		return nil, capOf(p).tooLarge(n.size)
	default:
		// Made to its size, so an append by a caller copies it.
		return n.data, nil
	}
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
	i, ok := a.e.lookup(p)
	switch {
	case !ok:
		return nil, fs.ErrNotExist
	case a.e.at(i).kind != Dir:
		return nil, syscall.ENOTDIR
	}
	if n, limit := int(a.e.at(i).count), dirCap(p); n > limit {
		return nil, tooManyEntries(limit)
	}
	return a.e.names(i), nil
}

func (a *archiveBackend) missing() error { return fs.ErrNotExist }

func (a *archiveBackend) readListed(p string) ([]byte, error) { return a.readFile(p) }

func (a *archiveBackend) readlink(p string) (string, error) {
	e, err := a.lstat(p)
	if err != nil {
		return "", err
	}
	if e.kind != Link {
		return "", errors.New("not a symbolic link")
	}
	return e.target, nil
}

func (a *archiveBackend) listKinds(p string) ([]DirEntry, dirHandle, error) {
	i, ok := a.e.lookup(p)
	switch {
	case !ok:
		return nil, nil, fs.ErrNotExist
	case a.e.at(i).kind != Dir:
		return nil, nil, syscall.ENOTDIR
	}
	d := a.e.at(i)
	if n, limit := int(d.count), dirCap(p); n > limit {
		return nil, nil, tooManyEntries(limit)
	}
	out := make([]DirEntry, 0, d.count)
	for _, k := range a.e.kids[d.first : d.first+d.count] {
		n := a.e.at(k)
		out = append(out, DirEntry{Name: n.path[strings.LastIndexByte(n.path, '/')+1:], Kind: n.kind})
	}
	return out, nil, nil
}
