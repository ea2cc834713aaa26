package host

import (
	"io/fs"
	"os"
	"path/filepath"
)

// dirBackend reads a directory tree: the live machine ("/") or a fixture.
type dirBackend struct{ dir string }

func newDirBackend(dir string) dirBackend { return dirBackend{dir: filepath.Clean(dir)} }

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
	return readWhole(d.abs(p))
}

func (d dirBackend) readLeaf(p string) ([]byte, error) {
	return readNoFollow(d.abs(p))
}

func (d dirBackend) readDir(p string) ([]string, error) {
	f, err := os.Open(d.abs(p))
	if err != nil {
		return nil, unwrapOS(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return names, unwrapOS(err)
}

// unwrapOS drops the *fs.PathError wrapper, whose path is the one on this machine;
// the Host reports the path as the machine under the root sees it.
func unwrapOS(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}
