package pciids

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// embedded is the embedded copy; embeddedSpans (embedded_spans.go) is where its blocks
// lie, found by go generate: its index costs no walk over its 600 KB at run time.
//
//go:generate go test -run TestEmbeddedSpansAreCurrent -update .
//go:embed pci.ids
var embedded string

// The DBs of Embedded and Default are made at their first call (a sync.Once is data;
// a sync.OnceValue would be a call at the package's initialisation).
var (
	embeddedOnce, systemOnce sync.Once
	embeddedDB, systemDB     *DB
)

// Embedded returns the database built into the binary, a trimmed copy of
// the upstream pci.ids (see the package documentation). A lookup reads only
// the block of its vendor or class; every call returns the same DB.
func Embedded() *DB {
	embeddedOnce.Do(func() { embeddedDB = withSource(&source{text: embedded, spans: embeddedSpans}) })
	return embeddedDB
}

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
// the next path. The file stays open for the DB's loads ([Names.Load], or a
// lookup not loaded), which read the blocks of the vendors and classes they
// want, and keep only the names they want.
func LoadSystem() (*DB, string, error) {
	return loadFirst(SystemPaths())
}

func loadFirst(paths []string) (*DB, string, error) {
	for _, p := range paths {
		f, size, err := openFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, p, err
		}
		return withSource(fileSource(f, size)), p, nil
	}
	return nil, "", nil
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
	systemOnce.Do(func() { systemDB, _, _ = LoadSystem() })
	if db := systemDB; db != nil {
		return Names{db, Embedded()}
	}
	return Names{Embedded()}
}
