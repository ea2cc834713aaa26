package host

import (
	"io/fs"
	"os"
	"path/filepath"
)

// dirBackend reads a directory tree: the live machine ("/") or a fixture.
type dirBackend struct{ dir string }

func (d dirBackend) abs(p string) string { return filepath.Join(d.dir, filepath.FromSlash(p)) }

func (d dirBackend) lstat(p string) (entry, error) {
	fi, err := os.Lstat(d.abs(p))
	if err != nil {
		return entry{}, unwrapOS(err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(d.abs(p))
		if err != nil {
			return entry{}, unwrapOS(err)
		}
		return entry{kind: Link, target: filepath.ToSlash(t)}, nil
	case fi.IsDir():
		return entry{kind: Dir}, nil
	case fi.Mode().IsRegular():
		return entry{kind: File}, nil
	}
	return entry{kind: Other}, nil
}

func (d dirBackend) readFile(p string) ([]byte, error) {
	b, err := os.ReadFile(d.abs(p))
	return b, unwrapOS(err)
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
