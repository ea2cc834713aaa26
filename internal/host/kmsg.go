package host

import (
	"bytes"
	"syscall"
)

// KernelLogPath is where the kernel log is read: the live /dev/kmsg, or in a snapshot or
// fixture a file of the same records ("prio,seq,usec,flags;message" lines).
const KernelLogPath = "/dev/kmsg"

// KernelLog returns the kernel's log buffer as /dev/kmsg records. On a live host
// /dev/kmsg never ends, so it is read without blocking until the buffer is drained.
func (h *Host) KernelLog() ([]byte, error) {
	d, ok := h.fs.(dirBackend)
	if !ok {
		return h.ReadFile(KernelLogPath)
	}
	p, err := h.Realpath(KernelLogPath)
	if err != nil {
		return nil, err
	}
	// Plain system calls: an *os.File would hand EAGAIN to the runtime's poller, which
	// waits for more records instead of returning.
	fd, err := syscall.Open(d.abs(p), syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, h.pathErr("read", KernelLogPath, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, h.pathErr("read", KernelLogPath, err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		return h.ReadFile(KernelLogPath)
	}
	// Each read returns one record; a record longer than the buffer fails with EINVAL,
	// and EPIPE means records were overwritten while reading: skip and go on.
	var out bytes.Buffer
	buf := make([]byte, 8192)
	for {
		n, err := syscall.Read(fd, buf)
		switch {
		case n > 0:
			out.Write(buf[:n])
		case err == syscall.EAGAIN || err == nil:
			return out.Bytes(), nil
		case err == syscall.EPIPE || err == syscall.EINVAL || err == syscall.EINTR:
		default:
			return out.Bytes(), h.pathErr("read", KernelLogPath, err)
		}
	}
}
