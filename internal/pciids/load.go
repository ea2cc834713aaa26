package pciids

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// embedded is the embedded copy.
//
//go:embed pci.ids
var embedded string

// Embedded returns the database built into the binary, a trimmed copy of
// the upstream pci.ids (see the package documentation). Every call returns
// the same DB.
func Embedded() *DB { return embeddedDB() }

var embeddedDB = sync.OnceValue(func() *DB { return withSource(&source{text: embedded}) })

// SystemPaths returns the places where Linux distributions install
// pci.ids, in the order [LoadSystem] tries them.
func SystemPaths() []string {
	return []string{
		"/usr/share/misc/pci.ids",
		"/usr/share/hwdata/pci.ids",
		"/usr/share/pci.ids",
	}
}

// LoadSystem opens the first of [SystemPaths] that exists on this machine
// and returns its DB with its path. When none exists it returns (nil, "", nil).
// When the first one that exists cannot be opened, or is no regular file of
// at most 16 MiB, it returns that path and the error; it does not go on to
// the next path. See [Open] for how the DB reads the file.
func LoadSystem() (*DB, string, error) {
	return loadFirst(SystemPaths())
}

func loadFirst(paths []string) (*DB, string, error) {
	for _, p := range paths {
		db, err := Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, p, err
		}
		return db, p, nil
	}
	return nil, "", nil
}

// Open opens the pci.ids file at path (links followed: distributions link one place
// to another), which must be a regular file of at most 16 MiB. The file stays open
// for the DB's loads ([Names.Load], or a lookup not loaded): each reads the bytes the
// file held when it was opened, in one pass, and keeps only the names it wants.
func Open(path string) (*DB, error) {
	f, size, err := openFile(path)
	if err != nil {
		return nil, err
	}
	return withSource(&source{file: f, size: size}), nil
}

// maxFileBytes caps a pci.ids file: the full upstream file is about 1.4 MB.
const maxFileBytes = 16 << 20

// openFile opens the pci.ids at p (links followed: distributions link one place to
// another) and returns its size: only a regular file, never a FIFO that would hang the
// read, and at most maxFileBytes.
func openFile(p string) (*os.File, int64, error) {
	// Looked at before it is opened, since opening a FIFO blocks; and again once open,
	// in case it was swapped in between.
	fi, err := os.Stat(p)
	if err != nil {
		return nil, 0, err
	}
	if err := checkFile(p, fi); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, err
	}
	if fi, err = f.Stat(); err == nil {
		err = checkFile(p, fi)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// checkFile refuses what is not a regular file of at most maxFileBytes.
func checkFile(p string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > maxFileBytes {
		return fmt.Errorf("%s holds %d bytes, more than a pci.ids file (at most %d)", p, fi.Size(), maxFileBytes)
	}
	return nil
}

// Default returns the host's pci.ids (if [LoadSystem] finds and opens one)
// followed by [Embedded]. The host's file is opened once per process; one
// that cannot be opened is left out.
func Default() Names {
	if db := systemDB(); db != nil {
		return Names{db, Embedded()}
	}
	return Names{Embedded()}
}

var systemDB = sync.OnceValue(func() *DB {
	db, _, _ := LoadSystem()
	return db
})
