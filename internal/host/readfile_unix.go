//go:build unix

package host

import "syscall"

// readWhole reads the file at name with plain open, read and close calls. os.ReadFile
// costs about twice the system calls for a small file (poller registration, fcntl,
// fstat) and sizes its buffer from the size sysfs reports for every attribute (4096
// bytes), which shows when a scan reads tens of thousands of attributes.
func readWhole(name string) ([]byte, error) { return readFlags(name, 0) }

// readNoFollow is readWhole that fails, rather than follow, when the last component
// of name is a symbolic link.
func readNoFollow(name string) ([]byte, error) { return readFlags(name, syscall.O_NOFOLLOW) }

func readFlags(name string, flags int) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC|flags, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	// Most attributes are a line: read them on the stack, then keep an exact copy. The
	// first read asks for 512 bytes, as os.ReadFile's does: some /proc files that claim
	// a size of 0 misbehave when read in smaller pieces.
	var small [512]byte
	buf := small[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return append([]byte(nil), buf...), nil
		}
		buf = buf[:len(buf)+n]
	}
}

// lstatKind returns what is at name, without following a link there, and without the
// allocation of an os.FileInfo.
func lstatKind(name string) (Kind, error) {
	var st syscall.Stat_t
	var err error
	for {
		err = syscall.Lstat(name, &st)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
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
