package pciids

import (
	_ "embed"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
)

//go:embed pci.ids
var embedded string

var embeddedDB = sync.OnceValue(func() *DB { return index(embedded) })

// Embedded returns the database built into the binary, a trimmed copy of
// the upstream pci.ids (see the package documentation). It is indexed on
// first use, and a vendor's devices are parsed at its first lookup; every
// call returns the same DB.
func Embedded() *DB { return embeddedDB() }

// SystemPaths returns the places where Linux distributions install
// pci.ids, in the order [LoadSystem] tries them.
func SystemPaths() []string {
	return []string{
		"/usr/share/misc/pci.ids",
		"/usr/share/hwdata/pci.ids",
		"/usr/share/pci.ids",
	}
}

// LoadSystem indexes the first of [SystemPaths] that exists on this machine
// and returns it with its path. When none exists it returns (nil, "", nil).
// When the first one that exists cannot be opened or read, it returns that
// path and the error; it does not go on to the next path.
func LoadSystem() (*DB, string, error) {
	return loadFirst(SystemPaths())
}

func loadFirst(paths []string) (*DB, string, error) {
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, p, err
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, p, err
		}
		return index(string(b)), p, nil
	}
	return nil, "", nil
}

var systemDB = sync.OnceValue(func() *DB {
	db, _, _ := LoadSystem()
	return db
})

// Default returns the host's pci.ids (if [LoadSystem] finds and reads one)
// followed by [Embedded]. The host's file is read once per process; one
// that cannot be read is left out.
func Default() Names {
	if db := systemDB(); db != nil {
		return Names{db, Embedded()}
	}
	return Names{Embedded()}
}
