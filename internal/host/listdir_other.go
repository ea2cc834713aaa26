//go:build !linux

package host

import (
	"io"
	"io/fs"
	"syscall"
)

// listDir lists the directory at name with what each name is; it fails past limit names.
// It keeps nothing open: keep is for Linux, where files are read through the directory.
func listDir(name string, limit int, keep bool) ([]DirEntry, int, error) {
	// A link at name is never followed: the caller resolves it first.
	if k, err := lstatKind(name); err != nil {
		return nil, -1, err
	} else if k != Dir {
		return nil, -1, syscall.ENOTDIR
	}
	f, err := openDir(name)
	if err != nil {
		return nil, -1, err
	}
	defer f.Close()
	var out []DirEntry
	for {
		batch, err := f.ReadDir(4096)
		for _, e := range batch {
			if len(out) == limit {
				return nil, -1, tooManyEntries(limit)
			}
			k := Other
			switch t := e.Type(); {
			case t&fs.ModeSymlink != 0:
				k = Link
			case t.IsDir():
				k = Dir
			case t.IsRegular():
				k = File
			}
			out = append(out, DirEntry{Name: e.Name(), Kind: k})
		}
		if err == io.EOF || (err == nil && len(batch) == 0) {
			return out, -1, nil
		}
		if err != nil {
			return nil, -1, unwrapOS(err)
		}
	}
}
