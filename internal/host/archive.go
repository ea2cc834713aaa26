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

// MaxArchiveBytes bounds the unpacked size of a snapshot archive. A real host's
// snapshot is a few megabytes; the bound keeps a hostile archive from filling memory.
const MaxArchiveBytes = 512 << 20

// archiveBackend holds a snapshot archive unpacked in memory.
type archiveBackend struct {
	files    map[string][]byte
	links    map[string]string
	children map[string]map[string]bool // every directory, with its entries
}

// OpenArchive reads a snapshot: a tar archive, gzip-compressed or not, whose members are
// paths relative to the root ("sys/devices/…" or "./sys/devices/…"), with symbolic links
// kept as links. name is used in messages.
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
	a := &archiveBackend{
		files:    map[string][]byte{},
		links:    map[string]string{},
		children: map[string]map[string]bool{"/": {}},
	}
	tr := tar.NewReader(src)
	var total int64
	hardlinks := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: not a readable tar archive: %w", name, err)
		}
		p, err := memberPath(hdr.Name)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: member %q: %w", name, hdr.Name, err)
		}
		if p == "/" {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			a.addDir(p)
		case tar.TypeSymlink:
			a.addParent(p)
			a.links[p] = hdr.Linkname
		case tar.TypeLink:
			target, err := memberPath(hdr.Linkname)
			if err != nil {
				return nil, fmt.Errorf("snapshot %s: hard link %q: %w", name, hdr.Name, err)
			}
			a.addParent(p)
			hardlinks[p] = target
		case tar.TypeReg:
			total += hdr.Size
			if total > MaxArchiveBytes {
				return nil, fmt.Errorf("snapshot %s: unpacks to more than %d MiB; not a host snapshot", name, MaxArchiveBytes>>20)
			}
			b, err := readMember(tr, hdr.Size)
			if err != nil {
				return nil, fmt.Errorf("snapshot %s: member %q: %w", name, hdr.Name, err)
			}
			a.addParent(p)
			a.files[p] = b
		default:
			// Devices, fifos and the like carry nothing gpusplit reads.
		}
	}
	for p, target := range hardlinks {
		b, ok := a.files[target]
		if !ok {
			return nil, fmt.Errorf("snapshot %s: hard link %s points to missing member %s", name, p, target)
		}
		a.files[p] = b
	}
	return newHost(name, a), nil
}

// readMember reads a regular member of size bytes. A small one, as nearly every file of
// a snapshot is, is read into a buffer of its size; a big one grows as it is read, so
// that a header that claims more than the archive holds costs no memory up front.
func readMember(r io.Reader, size int64) ([]byte, error) {
	if size > 1<<20 {
		return io.ReadAll(io.LimitReader(r, size))
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// memberPath turns a tar member name into a clean absolute path, refusing names that
// climb out of the archive.
func memberPath(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", errors.New("name contains a NUL byte")
	}
	depth := 0
	for _, c := range strings.Split(name, "/") {
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
	return path.Clean("/" + name), nil
}

func (a *archiveBackend) addDir(p string) {
	if a.children[p] == nil {
		a.children[p] = map[string]bool{}
	}
	if p != "/" {
		a.addParent(p)
	}
}

func (a *archiveBackend) addParent(p string) {
	dir := path.Dir(p)
	a.addDir(dir)
	a.children[dir][path.Base(p)] = true
}

func (a *archiveBackend) lstat(p string) (entry, error) {
	if t, ok := a.links[p]; ok {
		return entry{kind: Link, target: t}, nil
	}
	if _, ok := a.files[p]; ok {
		return entry{kind: File}, nil
	}
	if _, ok := a.children[p]; ok {
		return entry{kind: Dir}, nil
	}
	return entry{}, fs.ErrNotExist
}

func (a *archiveBackend) readFile(p string) ([]byte, error) {
	if b, ok := a.files[p]; ok {
		return bytes.Clone(b), nil
	}
	if _, ok := a.children[p]; ok {
		return nil, syscall.EISDIR
	}
	return nil, fs.ErrNotExist
}

func (a *archiveBackend) readLeaf(p string) ([]byte, error) {
	if _, ok := a.links[p]; ok {
		return nil, errLeafIsLink
	}
	return a.readFile(p)
}

func (a *archiveBackend) readDir(p string) ([]string, error) {
	c, ok := a.children[p]
	if !ok {
		if _, isFile := a.files[p]; isFile {
			return nil, syscall.ENOTDIR
		}
		return nil, fs.ErrNotExist
	}
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	return names, nil
}
