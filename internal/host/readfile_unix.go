//go:build unix

package host

import (
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
	return readFD(fd, c, false)
}

// readFD reads the open file fd to its end, at most c.max bytes: to a read of nothing,
// or with short to the first read that fills less than it was given (see readShort).
// Most files are a line: what fits a page is read on the stack and kept as an exact
// copy; a larger file goes on in a buffer of its own, which is kept as it is. The first
// read asks for a page, more than the 512 bytes of os.ReadFile's: some /proc files that
// claim a size of 0 misbehave when read in smaller pieces.
func readFD(fd int, c fileCap, short bool) ([]byte, error) {
	var page [4096]byte
	n := 0
	for n < len(page) {
		k, end, err := readOnce(fd, page[n:], n, c, short)
		if err != nil {
			return nil, err
		}
		if n += k; end {
			return append([]byte(nil), page[:n]...), nil
		}
	}
	buf := make([]byte, n, 2*len(page))
	copy(buf, page[:])
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		k, end, err := readOnce(fd, buf[len(buf):cap(buf)], len(buf), c, short)
		if err != nil {
			return nil, err
		}
		if buf = buf[:len(buf)+k]; end {
			return buf, nil
		}
	}
}

// readOnce reads once into room, after read bytes of the file, and says whether that was
// the end (readFD). It asks for at most one byte past the cap, to see a file over it,
// and fails on that byte: a file that grew since fstat, or a /proc file (which claims a
// size of 0).
func readOnce(fd int, room []byte, read int, c fileCap, short bool) (k int, end bool, err error) {
	if rest := c.max + 1 - int64(read); int64(len(room)) > rest {
		room = room[:rest]
	}
	for {
		if k, err = syscall.Read(fd, room); err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return 0, false, err
	}
	if int64(read+k) > c.max {
		return 0, false, c.tooLarge(-1)
	}
	return k, k == 0 || (short && k < len(room)), nil
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
	return readFD(fd, c, true)
}
