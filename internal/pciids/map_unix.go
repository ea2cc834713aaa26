//go:build unix

package pciids

import (
	"os"
	"syscall"
	"unsafe"
)

// mapFile maps the first size bytes of f, read-only, for the rest of the process: the
// pages a lookup reads are the page cache's own, with no copy of the 1.4 MB file, and
// the maps of the DB point into them. A file that shrinks while mapped would fault on
// the pages it lost; distributions replace pci.ids by renaming a new file over it,
// which leaves the mapped one whole.
func mapFile(f *os.File, size int64) (string, bool) {
	if int64(int(size)) != size {
		return "", false
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return "", false
	}
	return unsafe.String(&b[0], len(b)), true
}
