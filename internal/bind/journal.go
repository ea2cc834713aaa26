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
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Where apply keeps its state on the host.
const (
	StateDir    = "/var/lib/gpusplit"
	JournalPath = StateDir + "/journal.json"
	LockPath    = "/run/gpusplit.lock"
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

// WriteJournal replaces the journal atomically: a temporary file, then a rename.
func WriteJournal(h *host.Host, j *Journal) error {
	p, err := h.OSPath(JournalPath)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	// Only root reads the journal: it says which devices moved where.
	if err := atomicfile.Write(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// ReadJournal reads the journal of the last apply.
func ReadJournal(h *host.Host) (*Journal, error) {
	b, err := h.ReadFile(JournalPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no journal at %s: nothing was applied on this host, so there is nothing to roll back", JournalPath)
	}
	if err != nil {
		return nil, err
	}
	var j Journal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("journal %s is damaged (%v); restore the drivers by hand or with gpusplit apply", JournalPath, err)
	}
	return &j, nil
}

// Lock keeps two runs from changing drivers at once. Release it with Unlock.
type Lock struct{ f *os.File }

// TakeLock takes the host's gpusplit lock, or says who holds it.
func TakeLock(h *host.Host) (*Lock, error) {
	p, err := h.OSPath(LockPath)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", LockPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		owner := strings.TrimSpace(string(b[:n]))
		if _, perr := strconv.Atoi(owner); perr == nil {
			return nil, fmt.Errorf("another gpusplit (pid %s) is changing drivers on this host; wait for it to finish", owner)
		}
		return nil, fmt.Errorf("another gpusplit is changing drivers on this host (%s is locked); wait for it to finish", LockPath)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &Lock{f: f}, nil
}

// Unlock releases the lock.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}
