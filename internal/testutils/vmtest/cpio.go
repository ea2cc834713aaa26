package vmtest

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"slices"
)

// initramfs is a cpio archive in the kernel's "newc" format, built in memory. The kernel
// unpacks it as the root file system; parents must come before their children.
type initramfs struct {
	files map[string]entry
}

type entry struct {
	mode fs.FileMode
	data []byte // contents, or the target of a link
}

func newInitramfs() *initramfs { return &initramfs{files: map[string]entry{}} }

func (r *initramfs) dir(p string) {
	for d := p; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		if _, ok := r.files[d]; !ok {
			r.files[d] = entry{mode: fs.ModeDir | 0o755}
		}
	}
}

func (r *initramfs) file(p string, mode fs.FileMode, data []byte) {
	r.dir(path.Dir(p))
	r.files[p] = entry{mode: mode, data: data}
}

func (r *initramfs) symlink(p, target string) {
	r.dir(path.Dir(p))
	r.files[p] = entry{mode: fs.ModeSymlink | 0o777, data: []byte(target)}
}

// bytes writes the archive: entries sorted, so a directory precedes what it holds.
func (r *initramfs) bytes() []byte {
	var names []string
	for n := range r.files {
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for i, n := range names {
		e := r.files[n]
		mode := uint32(e.mode.Perm())
		switch {
		case e.mode.IsDir():
			mode |= 0o040000
		case e.mode&fs.ModeSymlink != 0:
			mode |= 0o120000
		default:
			mode |= 0o100000
		}
		writeHeader(&b, uint32(i+1), mode, n, e.data)
	}
	writeHeader(&b, 0, 0, "TRAILER!!!", nil)
	return b.Bytes()
}

func writeHeader(b *bytes.Buffer, ino, mode uint32, name string, data []byte) {
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor,
	// rdevmajor, rdevminor, namesize, check: 13 fields of 8 hex digits after the magic.
	fmt.Fprintf(b, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	b.WriteString(name)
	b.WriteByte(0)
	pad(b)
	b.Write(data)
	pad(b)
}

func pad(b *bytes.Buffer) {
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
}
