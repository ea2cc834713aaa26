package host

import (
	"strings"
	"syscall"
	"unsafe"
)

// readShortAt is readShort of the file name in the directory open as dirfd.
func readShortAt(dirfd int, name string, c fileCap) ([]byte, error) {
	return readOpened(func() (int, error) { return openat(dirfd, name, shortFlags) }, c)
}

// cname is a name of a directory as the kernel takes it, ended by a NUL, on the
// stack: syscall.Openat would put each name on the heap first.
type cname [256]byte

func (b *cname) set(name string) bool {
	if len(name) >= len(b) || strings.IndexByte(name, 0) >= 0 {
		return false
	}
	copy(b[:], name)
	b[len(name)] = 0
	return true
}

// openat is syscall.Openat for a name of a directory.
func openat(dirfd int, name string, flags int) (int, error) {
	var b cname
	if !b.set(name) {
		return syscall.Openat(dirfd, name, flags, 0)
	}
	fd, _, e := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&b[0])), uintptr(flags), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// readlinkAt returns the target of the link name in the directory open as dirfd, when
// it is shorter than 256 bytes (a sysfs link is); a longer one is an error, and the
// caller reads it by its path.
func readlinkAt(dirfd int, name string) (string, error) {
	var p cname
	if !p.set(name) {
		return "", syscall.ENAMETOOLONG
	}
	var buf [256]byte
	for {
		n, _, e := syscall.Syscall6(syscall.SYS_READLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(&p[0])),
			uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0:
			return "", e
		case int(n) >= len(buf):
			return "", syscall.ENAMETOOLONG
		}
		return string(buf[:n]), nil
	}
}

func closeFD(fd int) { syscall.Close(fd) }
