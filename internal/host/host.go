// Package host is a read-only view of a machine's files: sysfs, procfs and /etc,
// rooted at a directory or at a snapshot archive.
//
// Every path given to a Host is absolute as the machine sees it ("/sys/bus/pci/devices").
// Symbolic links are resolved by the Host itself, inside the root: an absolute link target
// is taken relative to the root, as the machine would see it, and a link that climbs above
// the root with ".." is an error, never followed. This is what lets every command run
// unchanged on the live machine, on a fixture tree and on a snapshot from a bug report.
package host

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
)

// ErrEscapesRoot is returned when resolving a path would leave the root.
var ErrEscapesRoot = errors.New("symbolic link leads outside the root")

// maxLinks bounds link resolution, as the kernel's MAXSYMLINKS does.
const maxLinks = 40

// Host is a read-only view of one machine's files.
type Host struct {
	root string
	fs   backend

	// realDirs holds resolved directories: paths known to contain no symbolic link.
	// Resolution starts from the longest such prefix and steps through known ones
	// without a lookup, so following a device's links costs a lookup for the link, for
	// each new directory and for where it ends (Realpath checks that it still exists),
	// and a file in a known directory is read with no lookup at all (the backend refuses
	// to follow a link there; the path is then resolved step by step).
	mu       sync.RWMutex
	realDirs map[string]bool
}

type entry struct {
	kind   Kind
	target string // link target, for Link
}

// backend reads paths that are already resolved: clean, absolute, free of links. It
// reads regular files only, each up to its cap (capOf), and lists directories up to
// maxDirEntries.
type backend interface {
	lstat(p string) (entry, error)
	readFile(p string) ([]byte, error)
	// readLeaf is readFile for a path whose directory is known to be free of links but
	// whose last component is not known: it fails when that is a link. On any error
	// the caller resolves the path step by step, and reports what that finds.
	readLeaf(p string) ([]byte, error)
	open(p string) (io.ReadCloser, error)
	readDir(p string) ([]string, error)
	// listKinds is readDir with what each name is, a final link not followed, and
	// what reads the directory's files by name while it stays open (nil for none).
	listKinds(p string) ([]DirEntry, dirHandle, error)
	// readListed is readFile of a path that a listing has just shown to be a regular
	// file, under /sys: a short read is the whole file (see readShort).
	readListed(p string) ([]byte, error)
	// readlink returns the target of the link at p, which a listing showed to be one.
	readlink(p string) (string, error)
	// missing is the error of a path that is not there, as lstat gives it.
	missing() error
}

// dirHandle reads the files of a listed directory by their names, relative to the
// directory the listing opened: the kernel looks up one name, not the whole path.
type dirHandle interface {
	// readShort is readListed of the file name.
	readShort(name string) ([]byte, error)
	readlink(name string) (string, error)
	close()
}

// errLeafIsLink is readLeaf's error for a link.
var errLeafIsLink = errors.New("last component is a symbolic link")

// PathError records a failed operation on a path of a Host.
type PathError struct {
	Op   string
	Root string
	Path string
	Err  error
}

func (e *PathError) Error() string {
	p := ShowPath(e.Path)
	if e.Root == "/" || e.Root == "" {
		return fmt.Sprintf("%s %s: %v", e.Op, p, e.Err)
	}
	return fmt.Sprintf("%s %s (under root %s): %v", e.Op, p, e.Root, e.Err)
}

// maxShownPath is the longest path a message shows whole.
const maxShownPath = 256

// ShowPath returns p as a message shows it: a path longer than 256 bytes (a crafted
// root can nest thousands of levels deep) is cut to what tells it apart, its start and
// its end.
func ShowPath(p string) string {
	if len(p) <= maxShownPath {
		return p
	}
	return fmt.Sprintf("%s…%s (%d bytes)", p[:maxShownPath/2], p[len(p)-maxShownPath/4:], len(p))
}

func (e *PathError) Unwrap() error { return e.Err }

// Open returns a Host rooted at root: a directory, or a snapshot archive (.tar.gz or .tgz).
func Open(root string) (*Host, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", root, err)
	}
	if fi.IsDir() {
		return newHost(root, newDirBackend(root)), nil
	}
	f, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", root, err)
	}
	defer f.Close()
	h, err := OpenArchive(root, f)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func newHost(root string, b backend) *Host {
	return &Host{root: root, fs: b, realDirs: map[string]bool{"/": true}}
}

// Root names where the Host's files come from.
func (h *Host) Root() string { return h.root }

// ReadFile returns the contents of the file at p, following links inside the root.
//
// Only a regular file is read: a FIFO, device or socket is an error (*NotRegularError),
// and so is a file larger than its cap (*TooLargeError, see FileCap). The slice may be
// shared with every other reader of the file (a snapshot holds each file once): it must
// not be changed.
func (h *Host) ReadFile(p string) ([]byte, error) {
	if h.inKnownDir(p) {
		// A device's attributes: read at once, without resolving the path again.
		if b, err := h.fs.readLeaf(p); err == nil {
			return b, nil
		}
	}
	r, err := h.resolve("read", p, true)
	if err != nil {
		return nil, err
	}
	b, err := h.fs.readFile(r)
	if err != nil {
		return nil, h.pathErr("read", p, err)
	}
	return b, nil
}

// ReadString returns the contents of the file at p without surrounding white space,
// which is how sysfs attributes are read.
func (h *Host) ReadString(p string) (string, error) {
	b, err := h.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// OpenFile returns the file at p for reading as a stream, for the few files that can be
// large (a module list): the checks and cap of ReadFile apply, the cap as it is read.
func (h *Host) OpenFile(p string) (io.ReadCloser, error) {
	r, err := h.resolve("read", p, true)
	if err != nil {
		return nil, err
	}
	f, err := h.fs.open(r)
	if err != nil {
		return nil, h.pathErr("read", p, err)
	}
	return &pathReader{r: f, h: h, p: p}, nil
}

// pathReader names the file in the errors of a stream, as ReadFile does.
type pathReader struct {
	r io.ReadCloser
	h *Host
	p string
}

func (r *pathReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if err != nil && err != io.EOF {
		err = r.h.pathErr("read", r.p, err)
	}
	return n, err
}

func (r *pathReader) Close() error { return r.r.Close() }

// ReadDir returns the sorted names in the directory at p; a directory that holds
// more entries than its kind of directory holds on a real host (see dirCap) is an error.
func (h *Host) ReadDir(p string) ([]string, error) {
	r, err := h.resolve("read directory", p, true)
	if err != nil {
		return nil, err
	}
	names, err := h.fs.readDir(r)
	if err != nil {
		return nil, h.pathErr("read directory", p, err)
	}
	sort.Strings(names)
	return names, nil
}

// Readlink returns the target of the symbolic link at p, as stored.
func (h *Host) Readlink(p string) (string, error) {
	r, err := h.resolve("read link", p, false)
	if err != nil {
		return "", err
	}
	e, err := h.fs.lstat(r)
	if err != nil {
		return "", h.pathErr("read link", p, err)
	}
	if e.kind != Link {
		return "", h.pathErr("read link", p, errors.New("not a symbolic link"))
	}
	return e.target, nil
}

// Realpath returns p with every link resolved, inside the root.
func (h *Host) Realpath(p string) (string, error) {
	r, err := h.resolve("resolve", p, true)
	if err != nil {
		return "", err
	}
	if _, err := h.fs.lstat(r); err != nil {
		return "", h.pathErr("resolve", p, err)
	}
	return r, nil
}

// LinkBase returns the last component of the resolved target of the link at p: the
// driver of a device from its "driver" link, its IOMMU group from "iommu_group".
// It returns "" and no error when p does not exist.
func (h *Host) LinkBase(p string) (string, error) { return linkBase(h.Realpath(p)) }

// linkBase is LinkBase of what Realpath returned.
func linkBase(r string, err error) (string, error) {
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return path.Base(r), nil
}

// Exists reports whether p exists (after resolving links).
func (h *Host) Exists(p string) bool {
	_, err := h.Realpath(p)
	return err == nil
}

// IsDir reports whether p is a directory (after resolving links).
func (h *Host) IsDir(p string) bool {
	r, err := h.Realpath(p)
	if err != nil {
		return false
	}
	e, err := h.fs.lstat(r)
	return err == nil && e.kind == Dir
}

func (h *Host) pathErr(op, p string, err error) error {
	var pe *PathError
	if errors.As(err, &pe) {
		return err
	}
	return &PathError{Op: op, Root: h.root, Path: p, Err: err}
}

// resolve turns p into a clean absolute path free of links. The last component is left
// unresolved when followLast is false (for Readlink).
func (h *Host) resolve(op, p string, followLast bool) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", h.pathErr(op, p, errors.New("path is not absolute"))
	}
	if strings.ContainsRune(p, 0) {
		return "", h.pathErr(op, p, errors.New("path contains a NUL byte"))
	}
	if strings.Contains(p, "/..") {
		// A path with ".." is resolved step by step below; Clean would skip links.
		return h.walk(op, p, "/", splitPath(p), followLast)
	}
	p = path.Clean(p)
	start, rest := h.knownPrefix(p)
	if !followLast && len(rest) == 0 {
		// The whole path is a known directory; the caller wants its own entry.
		start, rest = path.Dir(p), []string{path.Base(p)}
		if p == "/" {
			return "/", nil
		}
	}
	return h.walk(op, p, start, rest, followLast)
}

// knownPrefix splits p into its longest prefix that is a known real directory and the rest.
func (h *Host) knownPrefix(p string) (string, []string) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for d := p; ; d = parent(d) {
		if h.realDirs[d] {
			return d, splitPath(strings.TrimPrefix(p, d))
		}
		if d == "/" {
			return "/", splitPath(p)
		}
	}
}

// parent is path.Dir for a clean absolute path, without cleaning it again.
func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// inKnownDir reports whether p is a clean absolute path, not the root, whose directory
// is a known real directory.
func (h *Host) inKnownDir(p string) bool {
	i := strings.LastIndexByte(p, '/')
	if i < 0 || p[0] != '/' || len(p) == 1 || strings.IndexByte(p, 0) >= 0 || path.Clean(p) != p {
		return false
	}
	return h.isRealDir(p[:max(i, 1)])
}

// isRealDir reports whether p is a known real directory.
func (h *Host) isRealDir(p string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.realDirs[p]
}

func (h *Host) remember(dir string) {
	h.mu.Lock()
	h.realDirs[dir] = true
	h.mu.Unlock()
}

func (h *Host) walk(op, orig, start string, queue []string, followLast bool) (string, error) {
	return h.walkFrom(op, orig, start, queue, followLast, 0)
}

// walkFrom is walk once links links have been followed.
func (h *Host) walkFrom(op, orig, start string, queue []string, followLast bool, links int) (string, error) {
	cur := start
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if cur == "/" {
				return "", h.pathErr(op, orig, ErrEscapesRoot)
			}
			cur = parent(cur)
			continue
		}
		// cur is clean and c a single name, so joining them needs no cleaning.
		next := cur + "/" + c
		if cur == "/" {
			next = "/" + c
		}
		if len(queue) == 0 && !followLast {
			return next, nil
		}
		if h.isRealDir(next) {
			// Known to be a directory free of links: links met on the way (such
			// as every device's driver link) lead through the same directories.
			cur = next
			continue
		}
		e, err := h.fs.lstat(next)
		if err != nil {
			return "", h.pathErr(op, orig, err)
		}
		switch e.kind {
		case Link:
			links++
			if links > maxLinks {
				return "", h.pathErr(op, orig, errors.New("too many levels of symbolic links"))
			}
			var err error
			if cur, queue, err = h.through(op, orig, cur, next, e.target, queue); err != nil {
				return "", err
			}
		case Dir:
			cur = next
			h.remember(cur)
		default:
			if len(queue) > 0 {
				return "", h.pathErr(op, orig, fmt.Errorf("%s is not a directory", next))
			}
			cur = next
		}
	}
	return cur, nil
}

// through is walk's step through the link at link, in the directory cur, to target:
// where the walk goes on from and what it has left to walk.
func (h *Host) through(op, orig, cur, link, target string, queue []string) (string, []string, error) {
	if strings.HasPrefix(target, "/") {
		cur = "/"
	}
	if target == "" {
		return "", nil, h.pathErr(op, orig, fmt.Errorf("empty symbolic link %s", link))
	}
	// Report the link that escapes, not only the path asked for.
	if escapes(cur, target) {
		return "", nil, h.pathErr(op, orig, fmt.Errorf("%w: %s -> %s", ErrEscapesRoot, link, target))
	}
	return cur, append(splitPath(target), queue...), nil
}

// escapes reports whether a relative link target climbs above the root from dir.
func escapes(dir, target string) bool {
	if strings.HasPrefix(target, "/") {
		return false
	}
	depth := len(splitPath(dir))
	for _, c := range splitPath(target) {
		switch c {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// splitPath is the names of p, without empty ones.
func splitPath(p string) []string {
	out := make([]string, 0, strings.Count(p, "/")+1)
	for p != "" {
		c := p
		if i := strings.IndexByte(p, '/'); i >= 0 {
			c, p = p[:i], p[i+1:]
		} else {
			p = ""
		}
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// Kind is what a path is, without following a final link.
type Kind uint8

// The kinds of paths.
const (
	File Kind = iota
	Dir
	Link
	Other // devices, fifos, sockets
)

// Lstat returns what p is, and for a link its target as stored, without following a
// final link (links before it are followed inside the root).
func (h *Host) Lstat(p string) (Kind, string, error) {
	r, err := h.resolve("stat", p, false)
	if err != nil {
		return 0, "", err
	}
	e, err := h.fs.lstat(r)
	if err != nil {
		return 0, "", h.pathErr("stat", p, err)
	}
	return e.kind, e.target, nil
}
