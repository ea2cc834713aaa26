//go:build !unix

package host

import (
	"errors"
	"io/fs"
	"os"
)

func readWhole(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	return b, unwrapOS(err)
}

// readNoFollow always fails here: the caller resolves the path step by step.
func readNoFollow(name string) ([]byte, error) { return nil, errors.ErrUnsupported }

func lstatKind(name string) (Kind, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return 0, unwrapOS(err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return Link, nil
	case fi.IsDir():
		return Dir, nil
	case fi.Mode().IsRegular():
		return File, nil
	}
	return Other, nil
}
