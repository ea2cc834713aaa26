package host

import (
	"slices"
	"strings"
	"unsafe"
)

// Listing is a directory of a Host listed once with what each of its names is, for reading
// many of its files: a PCI device's attributes. Its listing saves most of the system
// calls of reading them one by one through the Host:
//
//   - a name that is not listed is not there, and looking for it costs nothing (a
//     device lacks the link-speed files of PCIe, or physfn, more often than not);
//   - a name listed as a regular file is read at once, without the lstat that a
//     directory root otherwise takes before opening a file, and in one read: what the
//     listing says of it is what that lstat would have said, at the same distance in
//     time from the open (which still refuses to follow a link);
//   - a name listed as a link is read with one readlink, and its target resolved
//     through the directories the Host knows.
//
// On Linux a listed directory of /sys or /proc stays open, and its files and links are
// read through it by name (openat, readlinkat): the kernel looks up one name, not the
// whole path.
//
// Anything else (a directory, a FIFO, a name the listing could not type, a read that
// fails) goes through the Host's own methods, which report it as they always do.
type Listing struct {
	h    *Host
	path string
	ents []DirEntry
	at   dirHandle // the directory, open, where the backend keeps it so
}

// DirEntry is one name of a listing and what it is, a final link not followed.
type DirEntry struct {
	Name string
	Kind Kind
}

// List lists the directory at p (links followed) with the kind of each name, under
// the caps of ReadDir. Close the listing when done with it: a directory of /sys or
// /proc stays open while it is used.
func (h *Host) List(p string) (*Listing, error) {
	r, err := h.resolve("read directory", p, true)
	if err != nil {
		return nil, err
	}
	l, err := h.list(r)
	if err != nil {
		return nil, h.pathErr("read directory", p, err)
	}
	return l, nil
}

// list lists the directory at r, a path free of links but perhaps in its last component.
func (h *Host) list(r string) (*Listing, error) {
	ents, at, err := h.fs.listKinds(r)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ents, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	h.remember(r)
	return &Listing{h: h, path: r, ents: ents, at: at}, nil
}

// Close lets go of the directory, if the listing holds it open.
func (d *Listing) Close() {
	if d.at != nil {
		d.at.close()
		d.at = nil
	}
}

// Path returns the directory's path, links resolved.
func (d *Listing) Path() string { return d.path }

// Entries returns the listing, sorted by name; it must not be changed.
func (d *Listing) Entries() []DirEntry { return d.ents }

func (d *Listing) join(name string) string {
	if d.path == "/" {
		return "/" + name
	}
	return d.path + "/" + name
}

func (d *Listing) kind(name string) (Kind, bool) {
	i, ok := slices.BinarySearchFunc(d.ents, name, func(e DirEntry, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return 0, false
	}
	return d.ents[i].Kind, true
}

// KnowDirs makes the directories the listing shows known to the Host as real ones, so
// that a path through them resolves without a look at each: for a directory whose
// entries are all about to be reached through links, as /sys/kernel/iommu_groups is
// from every device's iommu_group link.
func (d *Listing) KnowDirs() {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	for _, e := range d.ents {
		if e.Kind == Dir {
			d.h.realDirs[d.join(e.Name)] = true
		}
	}
}

// isName reports whether name is one name of the directory, not a path below it.
func isName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// ReadFile returns the contents of the file name in the directory, as Host.ReadFile
// does.
func (d *Listing) ReadFile(name string) ([]byte, error) {
	if !isName(name) {
		return d.h.ReadFile(d.join(name))
	}
	k, ok := d.kind(name)
	if !ok {
		return nil, d.h.pathErr("read", d.join(name), d.h.fs.missing())
	}
	if k == File {
		var b []byte
		var err error
		if d.at != nil {
			b, err = d.at.readShort(name)
		} else {
			b, err = d.h.fs.readListed(d.join(name))
		}
		if err == nil {
			return b, nil
		}
	}
	// The path's own read gives what went wrong, under the path's name.
	return d.h.ReadFile(d.join(name))
}

// ReadString is ReadFile without surrounding white space, as Host.ReadString.
func (d *Listing) ReadString(name string) (string, error) {
	b, err := d.ReadFile(name)
	if err != nil || len(b) == 0 {
		return "", err
	}
	// No copy: what ReadFile returns is never changed, by the Host or (its contract)
	// by anyone else, and this slice is given to no one.
	return strings.TrimSpace(unsafe.String(&b[0], len(b))), nil
}

// Realpath returns the path of name in the directory with every link resolved, as
// Host.Realpath does.
func (d *Listing) Realpath(name string) (string, error) {
	p := d.join(name)
	if !isName(name) {
		return d.h.Realpath(p)
	}
	k, ok := d.kind(name)
	switch {
	case !ok:
		return "", d.h.pathErr("resolve", p, d.h.fs.missing())
	case k == File:
		return p, nil
	case k == Dir:
		d.h.remember(p)
		return p, nil
	case k != Link:
		return d.h.Realpath(p)
	}
	target, err := d.readlink(name)
	if err != nil {
		return d.h.Realpath(p)
	}
	return d.h.follow("resolve", p, d.path, target, true)
}

// Readlink returns the target of the link name, as stored, as Host.Readlink does.
func (d *Listing) Readlink(name string) (string, error) {
	p := d.join(name)
	if !isName(name) {
		return d.h.Readlink(p)
	}
	k, ok := d.kind(name)
	if !ok {
		return "", d.h.pathErr("read link", p, d.h.fs.missing())
	}
	if k == Link {
		if t, err := d.readlink(name); err == nil {
			return t, nil
		}
	}
	return d.h.Readlink(p)
}

// readlink reads the link name, which the listing shows as one.
func (d *Listing) readlink(name string) (string, error) {
	if d.at != nil {
		if t, err := d.at.readlink(name); err == nil {
			return t, nil
		}
	}
	return d.h.fs.readlink(d.join(name))
}

// ListTarget lists the directory that name leads to, as List(Realpath(name)) does,
// less a look at where the link ends before the listing opens it: that open refuses a
// link or anything but a directory there, and the path is then resolved and listed step
// by step, as List does.
func (d *Listing) ListTarget(name string) (*Listing, error) {
	if k, ok := d.kind(name); ok && k == Link && isName(name) {
		p := d.join(name)
		if target, err := d.readlink(name); err == nil {
			if r, err := d.h.follow("resolve", p, d.path, target, false); err == nil {
				if l, err := d.h.list(r); err == nil {
					return l, nil
				}
			}
		}
	}
	r, err := d.Realpath(name)
	if err != nil {
		return nil, err
	}
	return d.h.List(r)
}

// LinkBase returns the last component of the resolved target of the link name, as
// Host.LinkBase does: "" and no error when there is no such name.
func (d *Listing) LinkBase(name string) (string, error) { return linkBase(d.Realpath(name)) }

// follow resolves the target of the link at orig, which lies in the real directory
// dir, as walk would once it has read that link; with followLast false, the target's
// last component is left as it is. Every component of the result was looked at on the
// way or is a directory known to be real, so unlike Realpath it does not look at where
// it ends again.
func (h *Host) follow(op, orig, dir, target string, followLast bool) (string, error) {
	cur, queue, err := h.through(op, orig, dir, orig, target, nil)
	if err != nil {
		return "", err
	}
	return h.walkFrom(op, orig, cur, queue, followLast, 1)
}
