package bind

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Where apply keeps its state on the host.
const (
	StateDir    = "/var/lib/gpusplit"
	JournalPath = StateDir + "/journal.json"
	// LockDir holds what lasts until the next boot and only root may open: the lock, the
	// hooks' journals, the quarantine.
	LockDir  = "/run/gpusplit"
	LockPath = LockDir + "/driver.lock"
	// HookJournalDir keeps, per VM, the journal of what its start moved, for its stop.
	HookJournalDir = LockDir + "/hooks"
)

// Prior is a device's state before apply changed it, with what the device was, so that
// a rollback can tell the same card from another one in its slot.
type Prior struct {
	Device     pci.Address `json:"device"`
	ID         string      `json:"id"`    // vendor:device, "10de:2bb1"
	Class      string      `json:"class"` // "0x030000"
	Driver     string      `json:"driver"`
	Override   string      `json:"driver_override"`
	IOMMUGroup int         `json:"iommu_group"`
	GPU        pci.Address `json:"gpu"`
	To         string      `json:"to"` // where apply took it
	// Link is its PCIe link while still on Driver, what a VM's stop checks the device
	// against before it goes back (package health); nil where it could not be read.
	Link *health.Baseline `json:"link,omitempty"`
}

// JournalFormat is the journal's format. Journals without one (0) predate the
// identity fields: nothing in them says which host and which boot they are of.
const JournalFormat = 2

// Journal records what the last apply changed, so that rollback can undo it, and of
// which machine and which boot: bindings hold only until the next boot, and a journal
// copied with a backup of /var/lib must not drive another machine's devices. It is
// written before the first change.
type Journal struct {
	Format int       `json:"format"`
	Time   time.Time `json:"time"`
	Identity
	Devices []Prior `json:"devices"`
	// Path is the file it was read from; "" for apply's, JournalPath.
	Path string `json:"-"`
}

// path is the file the journal is of.
func (j *Journal) path() string {
	if j.Path == "" {
		return JournalPath
	}
	return j.Path
}

// Identity says which machine, and which boot of it, a journal is of.
type Identity struct {
	Hostname  string `json:"hostname"`
	MachineID string `json:"machine_id"` // "" when the host has no /etc/machine-id
	BootID    string `json:"boot_id"`
}

// Where a host says who it is. The host name is the kernel's, which is what this boot
// runs under; the machine id survives renames and reinstalls of the same system; the
// boot id changes at every boot.
const (
	hostnamePath  = "/proc/sys/kernel/hostname"
	machineIDPath = "/etc/machine-id"
	bootIDPath    = "/proc/sys/kernel/random/boot_id"
)

// ReadIdentity reads the host's name, machine id and boot id. A host without
// /etc/machine-id (an initramfs, a minimal container) has the id "".
func ReadIdentity(h *host.Host) (Identity, error) {
	var id Identity
	var err error
	if id.Hostname, err = h.ReadString(hostnamePath); err != nil {
		return id, fmt.Errorf("reading the host name: %w", err)
	}
	if id.BootID, err = h.ReadString(bootIDPath); err != nil {
		return id, fmt.Errorf("reading the boot id: %w", err)
	}
	if id.MachineID, err = h.ReadString(machineIDPath); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return id, fmt.Errorf("reading the machine id: %w", err)
		}
		id.MachineID = ""
	}
	return id, nil
}

// deviceIDs reads a device's vendor:device and class from sysfs, as the journal
// records them.
func deviceIDs(h *host.Host, a pci.Address) (id, class string, err error) {
	read := func(attr string, bits int) (uint64, error) {
		s, err := h.ReadString(devAttr(a, attr))
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, bits)
		if err != nil {
			return 0, fmt.Errorf("%s of %s is %q, not a hexadecimal number", attr, a, s)
		}
		return v, nil
	}
	vendor, err := read("vendor", 16)
	if err != nil {
		return "", "", err
	}
	device, err := read("device", 16)
	if err != nil {
		return "", "", err
	}
	c, err := read("class", 24)
	if err != nil {
		return "", "", err
	}
	return fmt.Sprintf("%04x:%04x", vendor, device), fmt.Sprintf("0x%06x", c), nil
}

// WriteJournal replaces the journal at path (JournalPath for apply's, the one rollback
// reads; a hook's own under HookJournalDir) atomically: a temporary file, then a rename.
// Only root reads a journal, in a directory only root enters: it says which devices
// moved where.
func WriteJournal(h *host.Host, path string, j *Journal) error {
	p, err := h.OSPath(path)
	if err != nil {
		return err
	}
	if err := atomicfile.PrivateDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// ReadJournal reads the journal of the last apply.
func ReadJournal(h *host.Host) (*Journal, error) {
	j, err := ReadJournalAt(h, JournalPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoJournal
	}
	return j, err
}

// ErrNoJournal is a host without a journal: nothing was applied, so a rollback has
// nothing to do, which is no failure. It wraps fs.ErrNotExist.
var ErrNoJournal = fmt.Errorf("no journal at %s: nothing was applied on this host, so there is nothing to roll back (%w)", JournalPath, fs.ErrNotExist)

// ReadJournalAt reads the journal at path; an error wrapping fs.ErrNotExist where there
// is none.
func ReadJournalAt(h *host.Host, path string) (*Journal, error) {
	b, err := h.ReadFile(path)
	if err != nil {
		return nil, err
	}
	j := Journal{Path: path}
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("journal %s is damaged (%v); restore the drivers by hand or with gpusplit apply", path, err)
	}
	return &j, nil
}

// Lock keeps two runs from changing drivers at once: apply, rollback, the hooks and pve
// sync all take it, before they read what they change, and hold it until what they
// wrote is verified or put back. It is the first lock of the order in docs/handoff.md
// ("Locks"); Proxmox's locks are taken under it, never the other way round. Release it
// with Unlock.
type Lock struct {
	h *host.Host
	f *os.File
}

// lockPoll is how often a waiting TakeLock tries again.
const lockPoll = 100 * time.Millisecond

// TakeLock takes the host's gpusplit lock, waiting up to wait for another run to let it
// go (0: not at all), or says who holds it. The lock lives in a directory only root can
// enter (LockDir, 0700) and is a file only root can open (0600): flock works on any
// descriptor, a read-only one included, so a lock file others can open is a lock any
// local user can hold, and block every guest's start with. A directory or file there that
// is not the caller's, a link among them, is refused, not followed.
func TakeLock(h *host.Host, wait time.Duration) (*Lock, error) {
	p, err := h.OSPath(LockPath)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.PrivateDir(filepath.Dir(p)); err != nil {
		return nil, fmt.Errorf("lock %s: %w", LockPath, err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", LockPath, err)
	}
	if err := atomicfile.OwnedPrivate(f, 0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", LockPath, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", LockPath, err)
		}
		if !time.Now().Before(deadline) {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			f.Close()
			waited := ""
			if wait > 0 {
				waited = fmt.Sprintf(" and has not let go for %s", wait)
			}
			owner := strings.TrimSpace(string(b[:n]))
			if _, perr := strconv.Atoi(owner); perr == nil {
				return nil, fmt.Errorf("another gpusplit (pid %s) is changing drivers on this host%s; nothing was changed: wait for it to finish (ps -p %s)", owner, waited, owner)
			}
			return nil, fmt.Errorf("another gpusplit is changing drivers on this host (%s is locked)%s; nothing was changed: wait for it to finish", LockPath, waited)
		}
		time.Sleep(min(lockPoll, time.Until(deadline)))
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &Lock{h: h, f: f}, nil
}

// held refuses a lock that is not held: a run changes drivers only under it.
func (l *Lock) held() error {
	if l == nil || l.f == nil {
		return errors.New("nothing was changed: the driver lock is not held (a run must take it first)")
	}
	return nil
}

// Unlock releases the lock.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}
