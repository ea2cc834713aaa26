package host

import (
	"syscall"
	"unsafe"
)

// readShortAt is readShort of the file name in the directory open as dirfd.
func readShortAt(dirfd int, name string, c fileCap) ([]byte, error) {
	return readOpened(func() (int, error) { return syscall.Openat(dirfd, name, shortFlags, 0) }, c)
}

// readlinkAt returns the target of the link name in the directory open as dirfd, when
// it is shorter than 256 bytes (a sysfs link is); a longer one is an error, and the
// caller reads it by its path.
func readlinkAt(dirfd int, name string) (string, error) {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return "", err
	}
	var buf [256]byte
	for {
		n, _, e := syscall.Syscall6(syscall.SYS_READLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
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
