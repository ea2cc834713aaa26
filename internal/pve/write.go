package pve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
)

// MaxFile is the largest file Proxmox's cluster file system holds.
const MaxFile = 1 << 20

// BackupDir keeps the previous version of every file gpusplit rewrites, outside /etc/pve.
const BackupDir = "/var/lib/gpusplit/backup"

// Writer writes Proxmox files the way Proxmox does: under its lock, to <file>.tmp.<pid>
// then renamed over the file, after checking the file did not change since it was read,
// and after keeping a backup.
type Writer struct {
	H *host.Host
	// LockTimeout bounds the wait for Proxmox's lock (Proxmox waits 10 s).
	LockTimeout time.Duration
	// StaleAfter is the age past which pmxcfs expires a cluster lock (120 s).
	StaleAfter time.Duration
	Now        func() time.Time
}

func (w *Writer) defaults() {
	if w.LockTimeout == 0 {
		w.LockTimeout = 10 * time.Second
	}
	if w.StaleAfter == 0 {
		w.StaleAfter = 120 * time.Second
	}
	if w.Now == nil {
		w.Now = time.Now
	}
}

// Write replaces path (a file under /etc/pve) with data, if it still holds old.
func (w *Writer) Write(path, old, data string) error {
	w.defaults()
	if len(data) > MaxFile {
		return fmt.Errorf("%s would be larger than 1 MiB, the most Proxmox's file system holds; nothing was written", path)
	}
	unlock, err := w.lock(path)
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := w.H.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cur = nil
	case err != nil:
		return err
	}
	if string(cur) != old {
		return fmt.Errorf("%s changed since gpusplit read it (someone else edited it); nothing was written: run again", path)
	}
	if strings.HasPrefix(path, "/etc/pve/qemu-server/") || strings.HasPrefix(path, "/etc/pve/lxc/") {
		if g, _ := ParseGuest(path, "", 0, old); g != nil {
			if l, ok := g.Locked(); ok {
				return fmt.Errorf("%s has lock: %s; Proxmox is busy with the guest (backup, migration, snapshot): nothing was written, run again when it is done", path, l)
			}
		}
	}
	if len(cur) > 0 {
		if err := w.backup(path, cur); err != nil {
			return err
		}
	}
	target, err := w.H.OSPath(path)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp.%d", target, os.Getpid())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, werr := f.WriteString(data)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %v", path, errors.Join(werr, cerr))
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// backup keeps the previous contents under BackupDir, named for the path and the time.
func (w *Writer) backup(path string, data []byte) error {
	dir, err := w.H.OSPath(BackupDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("backup of %s: %w", path, err)
	}
	name := strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_") + "." + w.Now().UTC().Format("20060102T150405.000000000Z")
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		return fmt.Errorf("backup of %s: %w", path, err)
	}
	return nil
}

// lock takes Proxmox's lock for path: for the cluster file pci.cfg, the mkdir lock under
// /etc/pve/priv/lock (a lock older than StaleAfter is stale, as pmxcfs expires it); for
// a VM or container config, the node-local flock Proxmox's tools take.
func (w *Writer) lock(path string) (func(), error) {
	switch {
	case path == MappingPath:
		return w.clusterLock("/etc/pve/priv/lock/file-mapping_pci_cfg")
	case strings.HasPrefix(path, "/etc/pve/qemu-server/"):
		return w.flock("/var/lock/qemu-server/lock-" + filepath.Base(path))
	case strings.HasPrefix(path, "/etc/pve/lxc/"):
		return w.flock("/run/lock/lxc/pve-config-" + strings.TrimSuffix(filepath.Base(path), ".conf") + ".lock")
	}
	return func() {}, nil
}

func (w *Writer) clusterLock(lockDir string) (func(), error) {
	p, err := w.H.OSPath(lockDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(w.LockTimeout)
	for {
		err := os.Mkdir(p, 0o700)
		if err == nil {
			return func() { os.Remove(p) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("locking %s: %w", MappingPath, err)
		}
		if fi, serr := os.Stat(p); serr == nil && w.Now().Sub(fi.ModTime()) > w.StaleAfter {
			// pmxcfs expires such a lock when asked with utime; elsewhere, remove it.
			os.Chtimes(p, time.Unix(0, 0), time.Unix(0, 0))
			os.Remove(p)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s is locked by another writer (%s) for more than %s: nothing was written; try again", MappingPath, lockDir, w.LockTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (w *Writer) flock(lockFile string) (func(), error) {
	p, err := w.H.OSPath(lockFile)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockFile, err)
	}
	deadline := time.Now().Add(w.LockTimeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s is held by another Proxmox tool for more than %s: nothing was written; try again", lockFile, w.LockTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
