package host

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// readShortAt is readShort of the file name in the directory open as dirfd.
func readShortAt(dirfd int, name string, c fileCap) ([]byte, error) {
	return readOpened(func() (int, error) { return unix.Openat(dirfd, name, shortFlags, 0) }, c)
}

// readlinkAt returns the target of the link name in the directory open as dirfd, when
// it is shorter than 256 bytes (a sysfs link is); a longer one is an error, and the
// caller reads it by its path.
func readlinkAt(dirfd int, name string) (string, error) {
	var buf [256]byte
	for {
		n, err := unix.Readlinkat(dirfd, name, buf[:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return "", err
		case n >= len(buf):
			return "", syscall.ENAMETOOLONG
		}
		return string(buf[:n]), nil
	}
}

func closeFD(fd int) { unix.Close(fd) }
