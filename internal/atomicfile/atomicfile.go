// Package atomicfile replaces a file so that no crash or concurrent reader ever sees it
// half-written: the new contents go to a temporary file beside it, are synced to disk,
// are renamed over it, and the directory is synced so that the rename itself survives a
// crash.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Write replaces path with data, with the permissions mode. The directory must exist;
// on an error before the rename the file is as it was and no temporary file is left.
func Write(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// Until the directory is on disk, a crash can bring back the old name or no file
	// at all, even though the data was synced.
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("%s was replaced, but syncing its directory failed, so a crash could still undo it: %w", path, err)
	}
	return nil
}

// syncDir flushes a directory's entries to disk; tests replace it to see that it runs.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some filesystems (9p, some FUSE ones) cannot sync a directory; there the rename
	// is as durable as they make anything.
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}
