package pve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/plural"
)

// MaxFile is the largest file Proxmox's cluster file system holds.
const MaxFile = 1 << 20

// BackupDir keeps the previous version of every file gpusplit rewrites, outside /etc/pve.
const BackupDir = "/var/lib/gpusplit/backup"

// WriteDirs are where a write creates or replaces files: the configs' directories,
// Proxmox's lock directories (locksOf) and the backups. A command run by a user other
// than root on a copy of a host checks them before it starts.
var WriteDirs = []string{"/etc/pve/qemu-server", "/etc/pve/lxc", "/etc/pve/mapping", "/etc/pve/priv/lock", "/var/lock/qemu-server", "/run/lock/lxc", BackupDir}

// Writer changes Proxmox files the way Proxmox does, under its locks, to <file>.tmp.<pid>
// then renamed over the file; and it changes several of them as one transaction (Commit).
type Writer struct {
	H *host.Host
	// LockTimeout bounds the wait for each of Proxmox's locks (Proxmox waits 10 s).
	LockTimeout time.Duration
	// StaleAfter is the age past which pmxcfs expires a cluster lock (120 s).
	StaleAfter time.Duration
	Now        func() time.Time
	// Command is what is writing (as "pve sync"), recorded with each backup.
	Command string
	// Keep is how many backups of each file are kept after a write (DefaultKeep when 0).
	Keep int
	// fault, when set, is asked before each lock, write and rename, counted from 1 per
	// kind; an error it returns is that step's failure. The tests' fault injection.
	fault func(step string, n int) error
	count map[string]int
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
	if w.Keep == 0 {
		w.Keep = DefaultKeep
	}
}

// The steps fault injection can fail.
const (
	stepLock   = "lock"
	stepWrite  = "write"
	stepRename = "rename"
)

func (w *Writer) inject(step string) error {
	if w.fault == nil {
		return nil
	}
	if w.count == nil {
		w.count = map[string]int{}
	}
	w.count[step]++
	return w.fault(step, w.count[step])
}

// Edit is one file of a transaction: what it held when the change was computed, and
// what it is to hold.
type Edit struct {
	Path string // a path under /etc/pve
	Old  string
	New  string
}

// Outcome is what a transaction did to one file.
type Outcome string

const (
	Written   Outcome = "written"
	Untouched Outcome = "untouched"
	// Restored: written, then put back as it was after a later step failed.
	Restored Outcome = "restored"
	// NotRestored: written, and putting it back failed; its backup holds the old text.
	NotRestored Outcome = "not restored"
)

// FileResult is what happened to one file.
type FileResult struct {
	Path    string  `json:"path"`
	Outcome Outcome `json:"outcome"`
	// Backup is the copy of the previous version (a path on the host, under BackupDir);
	// empty for a file that did not exist or was not written.
	Backup string `json:"backup,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Problem is a reason a transaction cannot be written, found before any write.
type Problem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Reason
	}
	return p.Path + ": " + p.Reason
}

// TxError is a transaction that stopped. With Problems it stopped before the first
// write; with Failed, a write failed and Files says what was put back.
type TxError struct {
	Problems []Problem
	Failed   error
	Files    []FileResult
}

func (e *TxError) Error() string {
	if len(e.Problems) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "nothing was written; %s:", plural.S(len(e.Problems), "problem"))
		for _, p := range e.Problems {
			b.WriteString("\n  " + p.String())
		}
		return b.String()
	}
	var restored, untouched, broken []string
	for _, f := range e.Files {
		switch f.Outcome {
		case Restored:
			restored = append(restored, f.Path)
		case Untouched:
			untouched = append(untouched, f.Path)
		case NotRestored, Written:
			broken = append(broken, fmt.Sprintf("%s (%s; its previous version is %s)", f.Path, orText(f.Error, "still the new version"), orText(f.Backup, "a file that did not exist")))
		}
	}
	msg := fmt.Sprintf("%v", e.Failed)
	if len(broken) == 0 {
		msg += "; every file is as it was"
	}
	if len(restored) > 0 {
		msg += "; put back: " + strings.Join(restored, ", ")
	}
	if len(untouched) > 0 {
		msg += "; untouched: " + strings.Join(untouched, ", ")
	}
	if len(broken) > 0 {
		msg += "; NOT put back: " + strings.Join(broken, ", ") + ": copy the previous versions back by hand"
	}
	return msg
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Commit writes the edits as one transaction: it takes every lock they need in a fixed
// order (the cluster lock of pci.cfg, then the guests' locks by path); under all of them
// it re-reads and checks every file (unchanged since it was read, not locked by Proxmox,
// writable, the new text parses back) and stages every new version in a fsynced
// temporary file beside it; it keeps backups; and only then renames the files into place.
// When a rename fails, the files already renamed are put back from their old text while
// the locks are held. Edits whose text does not change are left out. The results say,
// per file, what happened; the error is a *TxError.
func (w *Writer) Commit(edits []Edit) ([]FileResult, error) {
	w.defaults()
	edits = changed(edits)
	res := make([]FileResult, len(edits))
	for i, e := range edits {
		res[i] = FileResult{Path: e.Path, Outcome: Untouched}
	}
	stop := func(probs []Problem) ([]FileResult, error) {
		return res, &TxError{Problems: probs, Files: res}
	}
	if len(edits) == 0 {
		return res, nil
	}
	if !w.H.Writable() {
		return stop([]Problem{{Reason: fmt.Sprintf("%s cannot be written: %v", w.H.Root(), host.ErrReadOnly)}})
	}
	if probs := staticProblems(edits); len(probs) > 0 {
		return stop(probs)
	}
	unlock, probs := w.lockAll(edits)
	defer unlock()
	if len(probs) > 0 {
		return stop(probs)
	}
	files, probs := w.check(edits)
	if len(probs) > 0 {
		return stop(probs)
	}
	// Stage every new version, then keep every backup: a full disk or a failing write
	// shows here, before any file changed.
	batch := &atomicfile.Batch{Fault: w.inject}
	backupOf := make([]string, len(files)) // on this machine; "" for a new file
	abort := func(err error) ([]FileResult, error) {
		batch.Abort()
		for _, b := range backupOf {
			if b != "" {
				removeBackup(b)
			}
		}
		return res, &TxError{Failed: err, Files: res}
	}
	for i, f := range files {
		if err := batch.Replace(f.target, []byte(edits[i].Old), f.existed, []byte(edits[i].New), f.mode); err != nil {
			return abort(fmt.Errorf("writing %s: %w", edits[i].Path, err))
		}
	}
	for i, f := range files {
		if !f.existed {
			continue
		}
		b, err := w.backup(edits[i].Path, []byte(edits[i].Old))
		if err != nil {
			return abort(fmt.Errorf("backup of %s: %w", edits[i].Path, err))
		}
		backupOf[i] = b
	}
	done, err := batch.Commit()
	for i, d := range done {
		switch d.State {
		case atomicfile.Done:
			res[i].Outcome = Written
		case atomicfile.Restored:
			res[i].Outcome = Restored
		case atomicfile.NotRestored:
			res[i].Outcome, res[i].Error = NotRestored, d.Err.Error()
		}
		switch {
		case backupOf[i] == "":
		case res[i].Outcome == Written || res[i].Outcome == NotRestored:
			res[i].Backup = filepath.Join(BackupDir, filepath.Base(backupOf[i]))
		default:
			removeBackup(backupOf[i]) // the file is as it was: nothing to keep
		}
	}
	var ce *atomicfile.CommitError
	if errors.As(err, &ce) {
		for i, f := range files {
			if f.target == ce.Path {
				return res, &TxError{Failed: fmt.Errorf("replacing %s: %w", edits[i].Path, ce.Err), Files: res}
			}
		}
	}
	if err != nil {
		return res, &TxError{Failed: err, Files: res}
	}
	// Retention: a failure to prune old backups loses nothing, so it does not fail the write.
	var paths []string
	for _, e := range edits {
		paths = append(paths, e.Path)
	}
	Prune(w.H, w.Keep, paths...)
	return res, nil
}

// Check reports every reason Commit would stop, changing nothing and waiting for no
// lock: a lock held now, a file changed since it was read, a guest locked by Proxmox, a
// file or directory that cannot be written, a result that does not parse back. On a
// snapshot it checks what it can read.
func (w *Writer) Check(edits []Edit) []Problem {
	w.defaults()
	edits = changed(edits)
	probs := staticProblems(edits)
	for _, l := range locksOf(edits) {
		if reason := w.probe(l); reason != "" {
			probs = append(probs, Problem{Path: l.path, Reason: reason})
		}
	}
	_, more := w.check(edits)
	return append(probs, more...)
}

func changed(edits []Edit) []Edit {
	var out []Edit
	for _, e := range edits {
		if e.Old != e.New {
			out = append(out, e)
		}
	}
	return out
}

// staticProblems are the edits' own faults: they need no lock to find.
func staticProblems(edits []Edit) []Problem {
	var probs []Problem
	seen := map[string]bool{}
	for _, e := range edits {
		if seen[e.Path] {
			probs = append(probs, Problem{e.Path, "changed twice in one transaction"})
		}
		seen[e.Path] = true
		if !writes(e.Path) {
			probs = append(probs, Problem{e.Path, "is not a file gpusplit writes (" + MappingPath + ", or /etc/pve/qemu-server/ID.conf or /etc/pve/lxc/ID.conf of this node)"})
			continue
		}
		if len(e.New) > MaxFile {
			probs = append(probs, Problem{e.Path, "would be larger than 1 MiB, the most Proxmox's file system holds"})
		}
		if err := parsesBack(e.Path, e.Old, e.New); err != nil {
			probs = append(probs, Problem{e.Path, fmt.Sprintf("the new version would not read back: %v", err)})
		}
	}
	return probs
}

// parsesBack checks a new version reads back as what it is: pci.cfg as a section config,
// a guest config line by line as Proxmox reads it (a line that Proxmox would skip with
// "unable to parse" is refused, unless the old version had it already).
func parsesBack(path, old, data string) error {
	switch {
	case path == MappingPath:
		_, err := ParseMappings(path, data)
		return err
	case isGuestPath(path):
		had := map[string]bool{}
		for _, l := range splitLines(old) {
			had[l.text] = true
		}
		for i, l := range splitLines(data) {
			t := strings.TrimSpace(l.text)
			if t == "" || strings.HasPrefix(t, "#") || had[l.text] || sectionHead.MatchString(t) || guestKey.MatchString(t) || rawLXC.MatchString(t) {
				continue
			}
			return &LineError{File: path, Line: i + 1, Msg: fmt.Sprintf("%q is not a key: value line", l.text)}
		}
	}
	return nil
}

// guestFile is the shape of the guest configs gpusplit writes: this node's VMs and
// containers by ID, through /etc/pve/qemu-server and /etc/pve/lxc, the names Proxmox
// locks them by (GuestPath). VMIDs run from 100 to 999999999.
var guestFile = lazyre.New(`^/etc/pve/(qemu-server|lxc)/[1-9][0-9]{0,8}\.conf$`)

func isGuestPath(p string) bool { return guestFile.MatchString(p) }

// writes says whether path is a file gpusplit writes: pci.cfg or a guest config of this
// node. Anything else, whatever its prefix, is refused before a lock is taken.
func writes(path string) bool { return path == MappingPath || isGuestPath(path) }

// file is an edit's target as found under the locks.
type file struct {
	target  string // the real path on this machine
	existed bool
	mode    fs.FileMode
}

// check re-reads every file and finds what would stop its replacement.
func (w *Writer) check(edits []Edit) ([]file, []Problem) {
	files := make([]file, len(edits))
	var probs []Problem
	bad := func(p, format string, args ...any) {
		probs = append(probs, Problem{p, fmt.Sprintf(format, args...)})
	}
	for i, e := range edits {
		files[i].mode = 0o640
		cur, err := w.H.ReadFile(e.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			cur = nil
		case err != nil:
			bad(e.Path, "cannot be read: %v", err)
			continue
		default:
			files[i].existed = true
		}
		if len(cur) > MaxFile {
			bad(e.Path, "is larger than 1 MiB, the most Proxmox's file system holds: not touching it")
			continue
		}
		if string(cur) != e.Old {
			bad(e.Path, "changed since gpusplit read it (someone else edited it): run again")
			continue
		}
		if isGuestPath(e.Path) {
			if g, _ := ParseGuest(e.Path, "", 0, string(cur)); g != nil {
				if l, ok := g.Locked(); ok {
					bad(e.Path, "has lock: %s: Proxmox is busy with the guest (backup, migration, snapshot); run again when it is done", l)
				}
			}
		}
		if !w.H.Writable() {
			continue
		}
		target, err := w.H.OSPath(e.Path)
		if err != nil {
			bad(e.Path, "%v", err)
			continue
		}
		files[i].target = target
		if reason := unwritable(target, files[i].existed); reason != "" {
			bad(e.Path, "%s", reason)
		}
		if fi, err := os.Stat(target); err == nil {
			files[i].mode = fi.Mode().Perm()
		}
	}
	return files, probs
}

// Inode flags (FS_IOC_GETFLAGS) that stop a file or directory being replaced.
const (
	fsImmutable = 0x10
	fsAppend    = 0x20
	fsIocGet    = 0x80086601
)

// unwritable says why target cannot be replaced by a rename into its directory, or "".
func unwritable(target string, exists bool) string {
	dir := filepath.Dir(target)
	if exists {
		fi, err := os.Lstat(target)
		if err != nil {
			return err.Error()
		}
		if !fi.Mode().IsRegular() {
			return fmt.Sprintf("is not a regular file (%s): not replacing it", fi.Mode().Type())
		}
		if f := inodeFlags(target); f&fsImmutable != 0 {
			return "is immutable (chattr +i): lift it with chattr -i " + target
		} else if f&fsAppend != 0 {
			return "is append-only (chattr +a): lift it with chattr -a " + target
		}
		if err := syscall.Access(target, 2); err != nil {
			return fmt.Sprintf("cannot be written: %v", err)
		}
	}
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Sprintf("its directory: %v", err)
	} else if !fi.IsDir() {
		return fmt.Sprintf("its directory %s is not a directory", dir)
	}
	if f := inodeFlags(dir); f&(fsImmutable|fsAppend) != 0 {
		return fmt.Sprintf("its directory %s is immutable or append-only (lsattr -d shows it): no file in it can be replaced", dir)
	}
	if err := syscall.Access(dir, 2|1); err != nil {
		return fmt.Sprintf("its directory %s cannot be written: %v", dir, err)
	}
	return ""
}

// inodeFlags returns a file's inode flags, 0 where the file system keeps none (pmxcfs).
func inodeFlags(p string) uint32 {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	var flags uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIocGet, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return 0
	}
	return flags
}

// lockRef is one of Proxmox's locks: the cluster lock directory of pci.cfg, or a
// guest's node-local lock file.
type lockRef struct {
	path    string
	cluster bool
}

// locksOf lists the locks edits need, in the order they are taken: the cluster lock
// first, then the guests' locks by path. Every writer taking them in one order cannot
// deadlock with another.
func locksOf(edits []Edit) []lockRef {
	var cluster []lockRef
	var guests []lockRef
	for _, e := range edits {
		switch {
		case e.Path == MappingPath:
			cluster = []lockRef{{path: "/etc/pve/priv/lock/file-mapping_pci_cfg", cluster: true}}
		case strings.HasPrefix(e.Path, "/etc/pve/qemu-server/"):
			guests = append(guests, lockRef{path: "/var/lock/qemu-server/lock-" + filepath.Base(e.Path)})
		case strings.HasPrefix(e.Path, "/etc/pve/lxc/"):
			guests = append(guests, lockRef{path: "/run/lock/lxc/pve-config-" + strings.TrimSuffix(filepath.Base(e.Path), ".conf") + ".lock"})
		}
	}
	slices.SortFunc(guests, func(a, b lockRef) int { return strings.Compare(a.path, b.path) })
	return append(cluster, slices.CompactFunc(guests, func(a, b lockRef) bool { return a.path == b.path })...)
}

// lockAll takes every lock of the edits, in order; on a failure it releases those taken
// and says which lock stopped it.
func (w *Writer) lockAll(edits []Edit) (func(), []Problem) {
	var held []func()
	release := func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
		held = nil
	}
	for _, l := range locksOf(edits) {
		unlock, err := w.take(l)
		if err != nil {
			release()
			return func() {}, []Problem{{Path: l.path, Reason: err.Error()}}
		}
		held = append(held, unlock)
	}
	return release, nil
}

func (w *Writer) take(l lockRef) (func(), error) {
	if err := w.inject(stepLock); err != nil {
		return nil, err
	}
	take := w.flock
	if l.cluster {
		take = w.clusterLock
	}
	unlock, err := take(l.path)
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("%w: taking Proxmox's locks needs root", err)
	}
	return unlock, err
}

// probe says whether a lock is held now, without waiting and without creating it.
func (w *Writer) probe(l lockRef) string {
	p, err := w.H.OSPath(l.path)
	if err != nil {
		return ""
	}
	if l.cluster {
		if fi, err := os.Stat(p); err == nil && w.Now().Sub(fi.ModTime()) <= w.StaleAfter {
			return fmt.Sprintf("is held by another writer of %s now: the write waits %s for it", MappingPath, w.LockTimeout)
		}
		return ""
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Sprintf("is held by another Proxmox tool now: the write waits %s for it", w.LockTimeout)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return ""
}

// clusterLock takes pmxcfs's lock for pci.cfg: a directory under /etc/pve/priv/lock
// (one older than StaleAfter is stale, as pmxcfs expires it).
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
			return nil, fmt.Errorf("%s is locked by another writer for more than %s; try again", MappingPath, w.LockTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// flock takes the node-local lock Proxmox's tools take for a guest's config.
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
			return nil, fmt.Errorf("held by another Proxmox tool for more than %s; try again", w.LockTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
