package host

import (
	"encoding/binary"
	"strings"
	"syscall"
)

// listDir lists the directory at name with what each name is, from the type that
// getdents gives with each name (lstat only where the file system gives none): open,
// getdents until it returns nothing, close (or, with keep, the directory is left open
// and its descriptor returned; else -1). It fails past limit names, and on a link at
// name (ELOOP): the caller resolves it first.
func listDir(name string, limit int, keep bool) (ents []DirEntry, dirfd int, err error) {
	var fd int
	for {
		fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_NOFOLLOW, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, -1, err
	}
	defer func() {
		if !keep || err != nil {
			syscall.Close(fd)
			dirfd = -1
		}
	}()
	var buf [8192]byte
	var out []DirEntry
	for {
		n, err := syscall.Getdents(fd, buf[:])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, -1, err
		case n <= 0:
			return out, fd, nil
		}
		// struct linux_dirent64: inode (8 bytes), offset (8), record length (2),
		// type (1), then the name, ended by a NUL. The names are cut from one string
		// of the whole batch, not made one by one.
		batch := string(buf[:n])
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				return nil, -1, syscall.EIO
			}
			typ := buf[off+18]
			nm := batch[off+19 : off+reclen]
			off += reclen
			if end := strings.IndexByte(nm, 0); end >= 0 {
				nm = nm[:end]
			}
			if nm == "." || nm == ".." || nm == "" {
				continue
			}
			if len(out) == limit {
				return nil, -1, tooManyEntries(limit)
			}
			var k Kind
			switch typ {
			case syscall.DT_REG:
				k = File
			case syscall.DT_DIR:
				k = Dir
			case syscall.DT_LNK:
				k = Link
			case syscall.DT_UNKNOWN:
				if k, err = lstatKind(name + "/" + nm); err != nil {
					return nil, -1, err
				}
			default:
				k = Other
			}
			out = append(out, DirEntry{Name: nm, Kind: k})
		}
	}
}
