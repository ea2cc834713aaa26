package host

import (
	"bytes"
	"encoding/binary"
	"slices"
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
	var buf, nbuf [8192]byte
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
		// type (1), then the name, ended by a NUL. The batch is read twice: first for
		// its names, gathered into one string, and for how many there are, so that the
		// listing grows once; then for the entries, cut from that string.
		names := nbuf[:0] // never longer than the batch
		count := 0
		for off := 0; off < n; {
			nm, next, ok := dirent(buf[:n], off)
			if !ok {
				return nil, -1, syscall.EIO
			}
			off = next
			if nm != nil {
				names = append(names, nm...)
				count++
			}
		}
		all := string(names)
		out = slices.Grow(out, count)
		for off, at := 0, 0; off < n; {
			nmb, next, _ := dirent(buf[:n], off)
			typ := buf[off+18]
			off = next
			if nmb == nil {
				continue
			}
			nm := all[at : at+len(nmb)]
			at += len(nmb)
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

// dirent reads the record at off of a getdents batch: its name (nil for ".", ".." or an
// empty one) and where the next record starts; not ok when the record runs past the
// batch.
func dirent(b []byte, off int) (name []byte, next int, ok bool) {
	if off+19 > len(b) {
		return nil, 0, false
	}
	reclen := int(binary.NativeEndian.Uint16(b[off+16:]))
	if reclen < 19 || off+reclen > len(b) {
		return nil, 0, false
	}
	name = b[off+19 : off+reclen]
	if end := bytes.IndexByte(name, 0); end >= 0 {
		name = name[:end]
	}
	if len(name) == 0 || string(name) == "." || string(name) == ".." {
		return nil, off + reclen, true
	}
	return name, off + reclen, true
}
