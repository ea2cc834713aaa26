package host

import (
	"errors"
	"io/fs"
	"path"
)

// ErrReadOnly is returned for a path of a Host that cannot be written: a snapshot.
var ErrReadOnly = errors.New("a snapshot cannot be changed; run on the host itself, or on a directory copy of it")

// Writable reports whether paths of the Host can be written: a directory root, the live
// machine included; not a snapshot archive.
func (h *Host) Writable() bool {
	_, ok := h.fs.(dirBackend)
	return ok
}

// OSPath returns where p lies on this machine, links resolved inside the root, for the
// few packages that change the machine: bind, persist and the Proxmox writers. The path
// need not exist yet: its missing tail is kept as given, below its deepest existing
// ancestor.
func (h *Host) OSPath(p string) (string, error) {
	d, ok := h.fs.(dirBackend)
	if !ok {
		return "", h.pathErr("write", p, ErrReadOnly)
	}
	p = path.Clean(p)
	var tail []string
	for cur := p; ; cur = path.Dir(cur) {
		r, err := h.resolve("resolve", cur, true)
		if err == nil {
			return d.abs(path.Join(append([]string{r}, tail...)...)), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || cur == "/" {
			return "", err
		}
		tail = append([]string{path.Base(cur)}, tail...)
	}
}
