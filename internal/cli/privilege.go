package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/host"
)

// needRoot refuses, before anything is read or changed, a command that changes the live
// host without root: it would fail half-way on the first lock or file it may not touch.
// The live host is any --root that is this machine's / (/., //, a link to it), not only
// the string "/".
//
// A --root directory is a copy that its owner may edit. There a user other than root is
// refused, as early, when a directory the command creates or replaces files in (dirs,
// paths on the host) cannot be written by them, naming it and its owner: a copy that
// root extracted stops here, not at the first lock.
//
// Under --demo the command runs on the demo's scratch copy, made here when there is none,
// and is checked as on any copy: the user's own, it needs no root.
func needRoot(g *globals, command, why string, dirs ...string) error {
	root, where := g.root, "under --root "+g.root
	if g.demo {
		if err := g.useScratch(); err != nil {
			return err
		}
		root, where = g.scratch, "in the demo's scratch copy "+g.scratch
	}
	if os.Geteuid() == 0 {
		return nil
	}
	if !g.demo && isLiveRoot(root) {
		return fmt.Errorf("%s needs root (%s): run it with sudo; nothing was changed", command, why)
	}
	h, err := host.Open(root)
	if err != nil {
		return nil // the command opens it again and says why it cannot
	}
	for _, d := range dirs {
		if reason := cannotWrite(h, d); reason != "" {
			return fmt.Errorf("%s cannot write %s %s: %s; run it as root, or on a copy of the host that you own; nothing was changed",
				command, d, where, reason)
		}
	}
	return nil
}

// isLiveRoot says whether root is this machine's root directory.
func isLiveRoot(root string) bool {
	fi, err := os.Stat(root)
	if err != nil {
		return false
	}
	slash, err := os.Stat("/")
	return err == nil && os.SameFile(fi, slash)
}

// cannotWrite says why this user cannot create files in dir of h, "" when they can: dir
// is made when missing, so the directory that counts is the nearest one that exists.
// A snapshot is not checked here: writing one is refused with its own message.
func cannotWrite(h *host.Host, dir string) string {
	p, err := h.OSPath(dir)
	if errors.Is(err, host.ErrReadOnly) {
		return ""
	}
	if err != nil {
		return err.Error()
	}
	for q := p; ; q = filepath.Dir(q) {
		fi, err := os.Stat(q)
		if errors.Is(err, fs.ErrNotExist) && q != "/" {
			continue
		}
		if err != nil {
			return err.Error()
		}
		if !fi.IsDir() {
			return fmt.Sprintf("%s is not a directory", q)
		}
		const atFDCWD, atEAccess, wx = -100, 0x200, 2 | 1
		if err := syscall.Faccessat(atFDCWD, q, wx, atEAccess); err != nil {
			where := "directory " + q + atomicfile.OwnerMode(q)
			if q != p {
				where = "it does not exist, and " + q + atomicfile.OwnerMode(q) + ", where it would be made,"
			}
			return fmt.Sprintf("%s is not writable by uid %d: %v", where, os.Geteuid(), err)
		}
		return ""
	}
}
