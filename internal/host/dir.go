package host

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// dirBackend reads a directory tree: the live machine ("/") or a fixture.
type dirBackend struct {
	dir string
	// live is set for the machine's own root, whose /sys and /proc are the kernel's
	// file systems: they hold no devices, FIFOs or sockets, so a file there is opened
	// without looking at it first (fstat still checks it).
	live bool
	// budget is what has been read of the root so far (MaxRootBytes, MaxRootEntries).
	budget *budget
}

func newDirBackend(dir string) dirBackend {
	dir = filepath.Clean(dir)
	return dirBackend{dir: dir, live: dir == "/", budget: &budget{}}
}

// budget counts what a Host has read of a directory root, for every reader at once.
type budget struct {
	bytes, entries atomic.Int64
}

// check fails once either count is past its cap.
func (s *budget) check() error {
	if s.bytes.Load() > maxRootBytes {
		return rootSpent(byteSize(maxRootBytes) + " of files")
	}
	if s.entries.Load() > maxRootEntries {
		return rootSpent(fmt.Sprintf("%d names in its directories", maxRootEntries))
	}
	return nil
}

// read counts n bytes read, and fails when that takes the total past its cap.
func (s *budget) read(n int) error {
	s.bytes.Add(int64(n))
	return s.check()
}

// lstatFirst reports whether what is at p is looked at before it is opened.
func (d dirBackend) lstatFirst(p string) bool {
	return !d.live || !(strings.HasPrefix(p, "/sys/") || strings.HasPrefix(p, "/proc/"))
}

// abs returns where p lies on this machine. p is clean and absolute, as every path a
// backend is given, and dir is clean: joining them needs no cleaning.
func (d dirBackend) abs(p string) string {
	if p == "/" {
		return d.dir
	}
	p = filepath.FromSlash(p)
	if os.IsPathSeparator(d.dir[len(d.dir)-1]) {
		return d.dir + p[1:]
	}
	return d.dir + p
}

func (d dirBackend) lstat(p string) (entry, error) {
	k, err := lstatKind(d.abs(p))
	if err != nil {
		return entry{}, err
	}
	if k != Link {
		return entry{kind: k}, nil
	}
	t, err := os.Readlink(d.abs(p))
	if err != nil {
		return entry{}, unwrapOS(err)
	}
	return entry{kind: Link, target: filepath.ToSlash(t)}, nil
}

func (d dirBackend) readFile(p string) ([]byte, error) {
	if err := d.budget.check(); err != nil {
		return nil, err
	}
	b, err := readRegular(d.abs(p), capOf(p), d.lstatFirst(p))
	if err == nil {
		err = d.budget.read(len(b))
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// readLeaf is readFile: readRegular never follows a link in the last component.
func (d dirBackend) readLeaf(p string) ([]byte, error) { return d.readFile(p) }

func (d dirBackend) open(p string) (io.ReadCloser, error) {
	if err := d.budget.check(); err != nil {
		return nil, err
	}
	r, err := openRegular(d.abs(p), capOf(p), d.lstatFirst(p))
	if err != nil {
		return nil, err
	}
	return &budgetReader{ReadCloser: r, s: d.budget}, nil
}

// budgetReader counts what is read of a stream as read of the root.
type budgetReader struct {
	io.ReadCloser
	s *budget
}

func (r *budgetReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err2 := r.s.read(n); err2 != nil && err == nil {
		return 0, err2
	}
	return n, err
}

func (d dirBackend) readDir(p string) ([]string, error) {
	if err := d.budget.check(); err != nil {
		return nil, err
	}
	f, err := openDir(d.abs(p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	limit := dirCap(p)
	names := []string{}
	for {
		batch, err := f.Readdirnames(4096)
		names = append(names, batch...)
		if len(names) > limit {
			return nil, tooManyEntries(limit)
		}
		d.budget.entries.Add(int64(len(batch)))
		if err := d.budget.check(); err != nil {
			return nil, err
		}
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return nil, unwrapOS(err)
		}
	}
}

// unwrapOS drops the *fs.PathError wrapper, whose path is the one on this machine;
// the Host reports the path as the machine under the root sees it.
func unwrapOS(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

func (d dirBackend) missing() error { return syscall.ENOENT }

func (d dirBackend) readlink(p string) (string, error) {
	t, err := os.Readlink(d.abs(p))
	if err != nil {
		return "", unwrapOS(err)
	}
	return filepath.ToSlash(t), nil
}

// readListed reads a file that a listing has shown to be regular, in one read where it
// can (readShort): that holds for sysfs attributes, live or captured; every other file
// is read as readFile reads it.
func (d dirBackend) readListed(p string) ([]byte, error) {
	if !strings.HasPrefix(p, "/sys/") {
		return d.readFile(p)
	}
	if err := d.budget.check(); err != nil {
		return nil, err
	}
	b, err := readShort(d.abs(p), capOf(p))
	if err == nil {
		err = d.budget.read(len(b))
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (d dirBackend) listKinds(p string) ([]DirEntry, dirHandle, error) {
	if err := d.budget.check(); err != nil {
		return nil, nil, err
	}
	// A directory of /sys stays open for its files and links to be read through it,
	// one of /proc for its links (a process's fd).
	keep := strings.HasPrefix(p, "/sys/") || strings.HasPrefix(p, "/proc/")
	ents, fd, err := listDir(d.abs(p), dirCap(p), keep)
	d.budget.entries.Add(int64(len(ents)))
	if err == nil {
		err = d.budget.check()
	}
	if err != nil {
		if fd >= 0 {
			closeFD(fd)
		}
		return nil, nil, err
	}
	if fd < 0 {
		return ents, nil, nil
	}
	return ents, &sysDir{fd: fd, budget: d.budget, sys: strings.HasPrefix(p, "/sys/"), cap: capOf(p)}, nil
}

// sysDir is a listed directory of /sys or /proc, open.
type sysDir struct {
	fd     int
	budget *budget
	sys    bool    // of /sys
	cap    fileCap // of the files in it
}

func (s *sysDir) readShort(name string) ([]byte, error) {
	if !s.sys {
		// A short read of a /proc file is not the whole of it: read by its path.
		return nil, errors.ErrUnsupported
	}
	if err := s.budget.check(); err != nil {
		return nil, err
	}
	b, err := readShortAt(s.fd, name, s.cap)
	if err == nil {
		err = s.budget.read(len(b))
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (s *sysDir) readlink(name string) (string, error) { return readlinkAt(s.fd, name) }

func (s *sysDir) close() { closeFD(s.fd) }
