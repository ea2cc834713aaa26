package bind

import (
	"fmt"

	"github.com/gpusplit/gpusplit/internal/host"
)

// The statfs magic numbers of sysfs and procfs (linux/magic.h).
const (
	sysfsMagic = 0x62656572
	procMagic  = 0x9fa0
)

// NotLiveError refuses to change drivers under a root that is not a running kernel's.
// How to reach the host itself, or to look without changing, is the caller's to word.
type NotLiveError struct {
	Root string
	Why  string
}

func (e *NotLiveError) Error() string {
	return fmt.Sprintf("%s is not a running kernel (%s); drivers move only through the kernel's own /sys, "+
		"so apply and rollback run on the host itself", e.Root, e.Why)
}

// Live returns the kernel behind h, or a NotLiveError when h is a snapshot archive or
// a directory holding a copy of a host: there, the writes of a move would land in
// regular files, change nothing real, and leave the copy saying what is not so. A root
// is live when its /sys is a sysfs mount and its /proc a procfs mount: "/", or a
// directory where the host's are bind-mounted.
func Live(h *host.Host) (Sysfs, error) {
	if !h.Writable() {
		return Sysfs{}, &NotLiveError{Root: h.Root(), Why: "it is a snapshot"}
	}
	for _, m := range []struct {
		dir   string
		magic int64
		name  string
	}{{"/sys", sysfsMagic, "sysfs"}, {"/proc", procMagic, "procfs"}} {
		p, err := h.OSPath(m.dir)
		if err != nil {
			return Sysfs{}, &NotLiveError{Root: h.Root(), Why: err.Error()}
		}
		got, err := fsMagic(p)
		if err != nil {
			return Sysfs{}, &NotLiveError{Root: h.Root(), Why: fmt.Sprintf("statfs %s: %v", p, err)}
		}
		if got != m.magic {
			return Sysfs{}, &NotLiveError{Root: h.Root(), Why: fmt.Sprintf("its %s is not a %s mount but a copy", m.dir, m.name)}
		}
	}
	return Sysfs{H: h}, nil
}
