//go:build unix

package host

import (
	"fmt"
	"io"
	"syscall"
)

// openKernelLog opens the live host's kernel log at name: the kernel's device (on Linux,
// character device 1:11), or a regular file. Anything else is refused before it is
// opened.
func openKernelLog(name string, c fileCap) (io.ReadCloser, error) {
	var st syscall.Stat_t
	if err := lstat(name, &st); err != nil {
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
		return openRegular(name, c, true)
	}
	if err := kernelLogDevice(&st); err != nil {
		return nil, err
	}
	// Plain system calls: an *os.File would hand EAGAIN to the runtime's poller, which
	// waits for more records instead of returning.
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY|syscall.O_NOFOLLOW, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	// What was opened is what was looked at, not something put there since.
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := kernelLogDevice(&st); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &kmsgReader{fd: fd, c: c}, nil
}

// kernelLogDevice refuses a character device that is not the kernel log's.
func kernelLogDevice(st *syscall.Stat_t) error {
	if st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
		return &NotRegularError{Type: typeName(uint32(st.Mode))}
	}
	major, minor, ok := kmsgDevice(uint64(st.Rdev))
	if !ok {
		return &NotRegularError{Type: fmt.Sprintf("a character device (%d:%d), not the kernel log's", major, minor)}
	}
	return nil
}

// kmsgReader reads /dev/kmsg without blocking: each read returns one record, and
// EAGAIN means there are no more, which is the end of the log.
type kmsgReader struct {
	fd      int
	c       fileCap
	n       int64
	buf     [8192]byte // a record is at most 8 KiB (CONSOLE_EXT_LOG_MAX)
	pending []byte
	drained bool
}

func (r *kmsgReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.drained {
			return 0, io.EOF
		}
		n, err := syscall.Read(r.fd, r.buf[:])
		switch {
		case err == nil && n > 0:
			r.n += int64(n)
			if r.n > r.c.max {
				// The ring goes on (it can hold 32 MiB, printed as half as much
				// again): what was read is whole records, the oldest, and the
				// caller says the rest was not read.
				r.drained = true
				return 0, ErrLogCut
			}
			r.pending = r.buf[:n]
		case err == syscall.EAGAIN || err == nil:
			r.drained = true
		case err == syscall.EPIPE || err == syscall.EINVAL || err == syscall.EINTR:
			// EPIPE: records were overwritten while reading; EINVAL: a record
			// longer than the buffer. Skip and go on.
		default:
			return 0, err
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

func (r *kmsgReader) Close() error { return syscall.Close(r.fd) }
