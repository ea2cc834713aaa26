package host

import (
	"errors"
	"fmt"
	"io"
)

// KernelLogPath is where the kernel log is read: the live /dev/kmsg, or in a snapshot or
// fixture a file of the same records ("prio,seq,usec,flags;message" lines).
const KernelLogPath = "/dev/kmsg"

// OpenKernelLog returns the kernel log as a stream of /dev/kmsg records. On the live host
// ("/") that is the kernel's device, which never ends: it is read without blocking until
// its records are drained. Anywhere else, and on the live host when /dev/kmsg is a
// regular file, it is the regular file at /dev/kmsg; a device there (a /dev/zero planted
// in a root) is an error, as any device where a file is read. Either way at most
// MaxKernelLogBytes are read: a regular file over it is refused, and a read of the device
// that reaches it ends with ErrLogCut, having returned the oldest records whole.
func (h *Host) OpenKernelLog() (io.ReadCloser, error) {
	d, ok := h.fs.(dirBackend)
	if !ok || !d.live {
		return h.OpenFile(KernelLogPath)
	}
	p, err := h.Realpath(KernelLogPath)
	if err != nil {
		return nil, err
	}
	r, err := openKernelLog(d.abs(p), capOf(KernelLogPath))
	if err != nil {
		return nil, h.pathErr("read", KernelLogPath, err)
	}
	return &pathReader{r: r, h: h, p: KernelLogPath}, nil
}

// ErrLogCut ends a read of the live kernel log that reached MaxKernelLogBytes.
var ErrLogCut = fmt.Errorf("the kernel log goes on past %[1]s, the most gpusplit reads of it: its first %[1]s, the oldest records, were read and the rest was not", byteSize(MaxKernelLogBytes))

// KernelLog returns the kernel log as OpenKernelLog reads it, whole. A snapshot's copy is
// returned as held, not copied: it must not be changed. When the live log is cut
// (ErrLogCut), what was read is returned with the error.
func (h *Host) KernelLog() ([]byte, error) {
	if d, ok := h.fs.(dirBackend); !ok || !d.live {
		return h.ReadFile(KernelLogPath)
	}
	r, err := h.OpenKernelLog()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil && !errors.Is(err, ErrLogCut) {
		return nil, err
	}
	return b, err
}
