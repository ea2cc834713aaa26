package pciids

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"unsafe"
)

//go:embed pci.ids
var embedded string

// embeddedSpans (embedded_spans.go) is where the embedded copy's blocks lie, found by
// go generate: its index costs no walk over its 600 KB at run time.
//
//go:generate go test -run TestEmbeddedSpansAreCurrent -update .
var embeddedDB = sync.OnceValue(func() *DB { return fromSpans(embedded, embeddedSpans) })

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
		s, err := readFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, p, err
		}
		return index(s), p, nil
	}
	return nil, "", nil
}

// maxFileBytes caps a pci.ids file: the full upstream file is about 1.4 MB.
const maxFileBytes = 16 << 20

// readFile reads the pci.ids at p (links followed: distributions link one place to
// another) into a string of its size: only a regular file, never a FIFO that would
// hang the read, and at most maxFileBytes.
func readFile(p string) (string, error) {
	// Looked at before it is opened, since opening a FIFO blocks; and again once open,
	// in case it was swapped in between.
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if err := checkFile(p, fi); err != nil {
		return "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return "", err
	}
	if err := checkFile(p, fi); err != nil || fi.Size() == 0 {
		return "", err
	}
	if s, ok := mapFile(f, fi.Size()); ok {
		return s, nil
	}
	b := make([]byte, fi.Size())
	n, err := io.ReadFull(f, b)
	if err != nil && err != io.ErrUnexpectedEOF {
		return "", err
	}
	if n == 0 {
		return "", nil
	}
	// The bytes are not kept anywhere else, so the string can share them: a copy of
	// the file would cost as much again, in time and in memory.
	return unsafe.String(&b[0], n), nil
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
