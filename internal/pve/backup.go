package pve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/host"
)

// DefaultKeep is how many backups of each file are kept: older ones are removed after
// each write.
const DefaultKeep = 20

// Backup is one previous version of a file that gpusplit replaced.
type Backup struct {
	ID      string    `json:"id"`   // the file's name in BackupDir
	Path    string    `json:"path"` // the file it is a version of
	Time    time.Time `json:"time"` // when it was replaced
	Size    int64     `json:"size"`
	Command string    `json:"command"` // what replaced it; "" when not recorded
}

// backupMeta is what a backup's sidecar (<ID>.json) records.
type backupMeta struct {
	Path    string    `json:"path"`
	Time    time.Time `json:"time"`
	Command string    `json:"command"`
}

const timeLayout = "20060102T150405.000000000Z"

// backupName is the backup's file name: the path with / as _, and the time.
func backupName(path string, t time.Time) string {
	return strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_") + "." + t.UTC().Format(timeLayout)
}

// ListBackups lists the backups under the host's BackupDir, oldest first.
func ListBackups(h *host.Host) ([]Backup, error) {
	names, err := h.ReadDir(BackupDir)
	if errors.Is(err, fs.ErrNotExist) {
		return []Backup{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []Backup{}
	for _, n := range names {
		if strings.HasSuffix(n, ".json") || strings.Contains(n, ".tmp") {
			continue
		}
		b, ok := readBackup(h, n)
		if ok {
			out = append(out, b)
		}
	}
	slices.SortStableFunc(out, func(a, b Backup) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// readBackup describes one backup, from its sidecar or, for one without, from its name.
func readBackup(h *host.Host, id string) (Backup, bool) {
	dot := len(id) - len(timeLayout) - 1
	if dot < 1 || id[dot] != '.' {
		return Backup{}, false
	}
	t, err := time.Parse(timeLayout, id[dot+1:])
	if err != nil {
		return Backup{}, false
	}
	b := Backup{ID: id, Path: "/" + strings.ReplaceAll(id[:dot], "_", "/"), Time: t}
	if data, err := h.ReadFile(BackupDir + "/" + id + ".json"); err == nil {
		var m backupMeta
		if json.Unmarshal(data, &m) == nil && m.Path != "" {
			b.Path, b.Command = m.Path, m.Command
		}
	}
	if data, err := h.ReadFile(BackupDir + "/" + id); err == nil {
		b.Size = int64(len(data))
	} else {
		return Backup{}, false
	}
	return b, true
}

// backup keeps the previous contents under BackupDir, with a sidecar saying what it is
// and which command replaced it, both written atomically and synced before any file is
// replaced; it returns the backup's path on this machine.
func (w *Writer) backup(path string, data []byte) (string, error) {
	dir, err := w.H.OSPath(BackupDir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := w.inject(stepWrite); err != nil {
		return "", err
	}
	now := w.Now()
	p := filepath.Join(dir, backupName(path, now))
	meta, err := json.Marshal(backupMeta{Path: path, Time: now.UTC(), Command: w.Command})
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(p+".json", append(meta, '\n'), 0o600); err != nil {
		return "", err
	}
	if err := atomicfile.Write(p, data, 0o600); err != nil {
		os.Remove(p + ".json")
		return "", err
	}
	return p, nil
}

// removeBackup removes a backup and its sidecar.
func removeBackup(p string) {
	os.Remove(p)
	os.Remove(p + ".json")
}

// Prune removes the oldest backups of each file beyond keep, and returns their IDs.
// paths limits it to those files; none means every file.
func Prune(h *host.Host, keep int, paths ...string) ([]string, error) {
	gone, err := Prunable(h, keep, paths...)
	if err != nil {
		return nil, err
	}
	dir, err := h.OSPath(BackupDir)
	if err != nil {
		return nil, err
	}
	for _, id := range gone {
		removeBackup(filepath.Join(dir, id))
	}
	return gone, nil
}

// Prunable is what Prune would remove, removing nothing: the oldest backups of each file
// beyond keep, by ID.
func Prunable(h *host.Host, keep int, paths ...string) ([]string, error) {
	if keep < 1 {
		return nil, fmt.Errorf("keeping %d backups of each file: keep at least 1", keep)
	}
	all, err := ListBackups(h)
	if err != nil {
		return nil, err
	}
	byPath := map[string][]Backup{}
	for _, b := range all {
		byPath[b.Path] = append(byPath[b.Path], b)
	}
	var gone []string
	for _, p := range slices.Sorted(maps.Keys(byPath)) {
		if len(paths) > 0 && !slices.Contains(paths, p) {
			continue
		}
		bs := byPath[p]
		for _, b := range bs[:max(len(bs)-keep, 0)] {
			gone = append(gone, b.ID)
		}
	}
	return gone, nil
}

// Restore puts a backup back in place as a transaction of its own, under the same locks
// and checks as any write; what the file holds now is itself backed up first. Nothing is
// written when the file holds the backup's text already. The command goes through
// RestoreBackup, which also refuses a file changed since its check was shown; the
// writer's tests use Restore.
func (w *Writer) Restore(id string) ([]FileResult, error) {
	e, err := w.restoreEdit(id)
	if err != nil || e.Old == e.New {
		return []FileResult{}, err
	}
	return w.Commit([]Edit{e})
}

// RestoreCheck is Restore's dry run: every reason it would stop, nothing written.
func (w *Writer) RestoreCheck(id string) ([]FileResult, error) {
	e, err := w.restoreEdit(id)
	if err != nil || e.Old == e.New {
		return []FileResult{}, err
	}
	res := []FileResult{{Path: e.Path, Outcome: Untouched}}
	if probs := w.Check([]Edit{e}); len(probs) > 0 {
		return res, &TxError{Problems: probs, Files: res}
	}
	return res, nil
}

// restoreEdit is the edit that puts backup id back: the file as it is now, to the backup.
func (w *Writer) restoreEdit(id string) (Edit, error) {
	if strings.ContainsAny(id, "/\x00") || id == "." || id == ".." || strings.HasSuffix(id, ".json") {
		return Edit{}, fmt.Errorf("%q is not a backup id (gpusplit pve backups lists them)", id)
	}
	b, ok := readBackup(w.H, id)
	if !ok {
		return Edit{}, fmt.Errorf("no backup %q in %s (gpusplit pve backups lists them)", id, BackupDir)
	}
	// The sidecar says where the backup goes, and anyone who can write BackupDir can
	// write it: the path is checked whole, never by prefix.
	if path.Clean(b.Path) != b.Path || slices.Contains(strings.Split(b.Path, "/"), "..") {
		return Edit{}, fmt.Errorf("backup %s names %q, which is not a clean absolute path: its sidecar %s/%s.json is damaged or forged", id, b.Path, BackupDir, id)
	}
	if !writes(b.Path) {
		return Edit{}, fmt.Errorf("backup %s is of %s, which is not a Proxmox file gpusplit writes (%s, or a guest config of this node)", id, b.Path, MappingPath)
	}
	data, err := w.H.ReadFile(BackupDir + "/" + id)
	if err != nil {
		return Edit{}, err
	}
	cur, err := w.H.ReadFile(b.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cur = nil
	case err != nil:
		return Edit{}, err
	}
	return Edit{Path: b.Path, Old: string(cur), New: string(data)}, nil
}

// RestoreReport is pve backups restore -o json (docs/json.md): the file restored, or
// checked, and what stopped it.
type RestoreReport struct {
	ID string `json:"id"`
	// Diff is the change: the file as it is, to the backup.
	Diff     string       `json:"diff"`
	Applied  bool         `json:"applied"`
	Files    []FileResult `json:"files"`
	Problems []string     `json:"problems"`
	// old is the file as it was read, for a restore of what was shown.
	old string
}

// RestoreBackup puts backup id back for command (Restore), or with check only checks
// that it would go through (RestoreCheck). shown, when not nil, is the check a person
// confirmed: a file that changed since writes nothing (*ShownError). A nil report comes
// with an error that found no backup to restore; a report with an error is a restore
// that its checks or its writes stopped.
func RestoreBackup(h *host.Host, id string, check bool, command string, shown *RestoreReport) (*RestoreReport, error) {
	w := &Writer{H: h, Command: command}
	e, err := w.restoreEdit(id)
	if err != nil {
		return nil, err
	}
	rep := &RestoreReport{ID: id, Diff: Diff(e.Path, e.Old, e.New), Files: []FileResult{}, Problems: []string{}, old: e.Old}
	if e.Old == e.New {
		rep.Applied = !check // nothing to write: the file holds the backup
		return rep, nil
	}
	if !check && shown != nil && (shown.old != e.Old || shown.Diff != rep.Diff) {
		return rep, &ShownError{Paths: []string{e.Path}}
	}
	var res []FileResult
	if check {
		res, err = w.RestoreCheck(id)
	} else {
		res, err = w.Commit([]Edit{e})
	}
	var tx *TxError
	if errors.As(err, &tx) {
		for _, p := range tx.Problems {
			rep.Problems = append(rep.Problems, p.String())
		}
	}
	if res != nil {
		rep.Files = res
	}
	rep.Applied = !check && err == nil
	return rep, err
}
