package host

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// dirBackend reads a directory tree: the live machine ("/") or a fixture.
type dirBackend struct {
	dir string
	// live is set for the machine's own root, whose /sys and /proc are the kernel's
	// file systems: they hold no devices, FIFOs or sockets, so a file there is opened
	// without looking at it first (fstat still checks it).
	live bool
}

func newDirBackend(dir string) dirBackend {
	dir = filepath.Clean(dir)
	return dirBackend{dir: dir, live: dir == "/"}
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
	return readRegular(d.abs(p), capOf(p), d.lstatFirst(p))
}

// readLeaf is readFile: readRegular never follows a link in the last component.
func (d dirBackend) readLeaf(p string) ([]byte, error) { return d.readFile(p) }

func (d dirBackend) open(p string) (io.ReadCloser, error) {
	return openRegular(d.abs(p), capOf(p), d.lstatFirst(p))
}

func (d dirBackend) readDir(p string) ([]string, error) {
	f, err := openDir(d.abs(p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := []string{}
	for {
		batch, err := f.Readdirnames(4096)
		names = append(names, batch...)
		if len(names) > maxDirEntries {
			return nil, fmt.Errorf("holds more than %d entries, more than any directory gpusplit lists on a real host", maxDirEntries)
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
