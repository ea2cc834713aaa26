//go:build unix

package host

import (
	"bytes"
	"io"
	"os"
	"syscall"
)

// readRegular reads the regular file at name, at most c.max bytes, with plain open,
// fstat, read and close calls. os.ReadFile costs about twice the system calls for a
// small file (poller registration, fcntl) and sizes its buffer from the size sysfs
// reports for every attribute (4096 bytes), which shows when a scan reads tens of
// thousands of attributes.
//
// The open is non-blocking, so that a FIFO cannot hang it, and fstat refuses anything
// but a regular file before the first read, so that a device such as /dev/zero cannot
// fill memory. When lstatFirst is set, what is at name is looked at before it is
// opened: opening a device can do things (a watchdog starts counting down, a tape
// rewinds), and a directory root unpacked from an archive as root can hold any device.
// The last component of name is never followed: a link there is errLeafIsLink.
func readRegular(name string, c fileCap, lstatFirst bool) ([]byte, error) {
	if lstatFirst {
		if err := lstatCheck(name, c); err != nil {
			return nil, err
		}
	}
	fd, err := openChecked(name, c)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	// Most attributes are a line: read them on the stack, then keep an exact copy. The
	// first read asks for 512 bytes, as os.ReadFile's does: some /proc files that claim
	// a size of 0 misbehave when read in smaller pieces.
	var small [512]byte
	n := 0
	for n < len(small) {
		k, err := syscall.Read(fd, small[n:])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, err
		case k == 0:
			return append([]byte(nil), small[:n]...), nil
		}
		if n += k; int64(n) > c.max {
			return nil, c.tooLarge(-1)
		}
	}
	// Larger: go on in a buffer of its own, which is kept as it is.
	buf := make([]byte, n, 4*len(small))
	copy(buf, small[:n])
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):cap(buf)]
		if left := c.max + 1 - int64(len(buf)); int64(len(room)) > left {
			room = room[:left]
		}
		k, err := syscall.Read(fd, room)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, err
		case k == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+k]
		if int64(len(buf)) > c.max {
			// A file that grew since fstat, or a /proc file (which claims a size of 0).
			return nil, c.tooLarge(-1)
		}
	}
}

// lstatCheck refuses what is at name unless it is a regular file of at most c.max bytes.
func lstatCheck(name string, c fileCap) error {
	var st syscall.Stat_t
	if err := lstat(name, &st); err != nil {
		return err
	}
	return check(&st, c)
}

// lstat is syscall.Lstat, again when a signal interrupts it.
func lstat(name string, st *syscall.Stat_t) error {
	for {
		if err := syscall.Lstat(name, st); err != syscall.EINTR {
			return err
		}
	}
}

// openChecked opens name for reading (non-blocking, never as a controlling terminal,
// never through a link in its last component) and refuses, through fstat, what is
// not a regular file of at most c.max bytes.
func openChecked(name string, c fileCap) (int, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_NOFOLLOW, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.ELOOP {
		return -1, errLeafIsLink
	}
	if err != nil {
		return -1, err
	}
	var st syscall.Stat_t
	for {
		err = syscall.Fstat(fd, &st)
		if err != syscall.EINTR {
			break
		}
	}
	if err == nil {
		err = check(&st, c)
	}
	if err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// check refuses what is not a regular file of at most c.max bytes.
func check(st *syscall.Stat_t, c fileCap) error {
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		if st.Size > c.max {
			return c.tooLarge(st.Size)
		}
		return nil
	case syscall.S_IFLNK:
		return errLeafIsLink
	case syscall.S_IFDIR:
		return syscall.EISDIR
	}
	return &NotRegularError{Type: typeName(uint32(st.Mode))}
}

func typeName(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		return "a FIFO"
	case syscall.S_IFCHR:
		return "a character device"
	case syscall.S_IFBLK:
		return "a block device"
	case syscall.S_IFSOCK:
		return "a socket"
	}
	return "a special file"
}

// openRegular opens the regular file at name for streaming, with readRegular's checks;
// the reader fails once it has read more than c.max bytes.
func openRegular(name string, c fileCap, lstatFirst bool) (io.ReadCloser, error) {
	if lstatFirst {
		if err := lstatCheck(name, c); err != nil {
			return nil, err
		}
	}
	fd, err := openChecked(name, c)
	if err != nil {
		return nil, err
	}
	return &fdReader{fd: fd, c: c}, nil
}

// fdReader reads a regular file with plain read calls and fails past its cap.
type fdReader struct {
	fd int
	c  fileCap
	n  int64
}

func (r *fdReader) Read(p []byte) (int, error) {
	if left := r.c.max + 1 - r.n; int64(len(p)) > left {
		p = p[:left]
	}
	for {
		n, err := syscall.Read(r.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		r.n += int64(n)
		if r.n > r.c.max {
			return 0, r.c.tooLarge(-1)
		}
		return n, nil
	}
}

func (r *fdReader) Close() error { return syscall.Close(r.fd) }

// openDir opens the directory at name; O_DIRECTORY fails on anything else before
// opening it, so a FIFO or device there is never opened.
func openDir(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	return f, unwrapOS(err)
}

// lstatKind returns what is at name, without following a link there, and without the
// allocation of an os.FileInfo.
func lstatKind(name string) (Kind, error) {
	var st syscall.Stat_t
	if err := lstat(name, &st); err != nil {
		return 0, err
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFLNK:
		return Link, nil
	case syscall.S_IFDIR:
		return Dir, nil
	case syscall.S_IFREG:
		return File, nil
	}
	return Other, nil
}

// readShort reads a file that a listing has just shown to be a regular file under /sys,
// with open, read and close alone: no lstat (the listing said what lstat would) and no
// fstat, and no read that only returns end-of-file. A read that returns less than was
// asked for is the whole file there: the kernel renders a sysfs attribute whole into a
// page when the file is opened or first read, and hands out what is left of it (a
// seq_file read stops short only at its end); a captured attribute is a regular file,
// and a read of a regular file stops short only at its end. The open refuses a link and
// cannot block, and the read is capped, so a file swapped for something else since the
// listing is read no further than the cap.
func readShort(name string, c fileCap) ([]byte, error) {
	return readOpened(func() (int, error) { return syscall.Open(name, shortFlags, 0) }, c)
}

// shortFlags open a file for readShort: never blocking, never through a final link.
const shortFlags = syscall.O_RDONLY | syscall.O_CLOEXEC | syscall.O_NONBLOCK | syscall.O_NOCTTY | syscall.O_NOFOLLOW

// readOpened is readShort of the file that open opens.
func readOpened(open func() (int, error), c fileCap) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = open()
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.ELOOP {
		return nil, errLeafIsLink
	}
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	// A page: every sysfs attribute of a 4 KiB-page kernel in one read.
	var page [4096]byte
	buf := page[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):cap(buf)]
		if rest := c.max + 1 - int64(len(buf)); int64(len(room)) > rest {
			room = room[:rest] // one byte past the cap, to see a file over it
		}
		k, err := syscall.Read(fd, room)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, err
		}
		buf = buf[:len(buf)+k]
		if int64(len(buf)) > c.max {
			return nil, c.tooLarge(-1)
		}
		if k < len(room) || k == 0 {
			return bytes.Clone(buf), nil
		}
	}
}
