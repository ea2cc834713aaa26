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

// Prior is a device's state before apply changed it.
type Prior struct {
	Device     pci.Address `json:"device"`
	Driver     string      `json:"driver"`
	Override   string      `json:"driver_override"`
	IOMMUGroup int         `json:"iommu_group"`
	GPU        pci.Address `json:"gpu"`
	To         string      `json:"to"` // where apply took it
}

// Journal records what the last apply changed, so that rollback can undo it. It is
// written before the first change.
type Journal struct {
	Time    time.Time `json:"time"`
	Host    string    `json:"host"`
	Devices []Prior   `json:"devices"`
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
