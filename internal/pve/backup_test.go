package pve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Backups are listed with the file, time, size and command that wrote them; restoring
// one is a write like any other (itself backed up); old ones are pruned to Keep per file.
func TestBackups(t *testing.T) {
	rc := newRefCase(t)
	clock := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w := rc.writer()
	w.Command, w.Keep = "pve sync --apply", 3
	w.Now = func() time.Time { clock = clock.Add(time.Minute); return clock }
	if _, err := w.Commit(rc.edits); err != nil {
		t.Fatal(err)
	}
	list, err := ListBackups(rc.h)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("%d backups: %+v", len(list), list)
	}
	var cfg Backup
	for _, b := range list {
		if b.Command != "pve sync --apply" || b.Size == 0 || b.Time.IsZero() {
			t.Errorf("%+v", b)
		}
		if b.Path == MappingPath {
			cfg = b
		}
	}
	if cfg.Size != int64(len(rc.edits[0].Old)) {
		t.Fatalf("the backup of pci.cfg: %+v", cfg)
	}

	// Restore: pci.cfg is what it was; what it held is kept as a backup of its own.
	w.Command = "pve backups restore"
	res, err := w.Restore(cfg.ID)
	if err != nil || len(res) != 1 || res[0].Outcome != Written {
		t.Fatalf("restore: %v %+v", err, res)
	}
	if got, _ := rc.h.ReadFile(MappingPath); string(got) != rc.edits[0].Old {
		t.Error("pci.cfg is not the backup's version")
	}
	list, _ = ListBackups(rc.h)
	last := list[len(list)-1]
	if last.Path != MappingPath || last.Command != "pve backups restore" || last.Size != int64(len(rc.edits[0].New)) {
		t.Errorf("the version restore replaced: %+v", last)
	}
	// Restoring the same again changes nothing.
	if res, err := w.Restore(cfg.ID); err != nil || len(res) != 0 {
		t.Errorf("second restore: %v %+v", err, res)
	}

	// Retention: three more writes of pci.cfg leave three backups of it.
	cur := rc.edits[0].Old
	for i := range 3 {
		next := cur + "# edit " + string(rune('a'+i)) + "\n"
		if _, err := w.Commit([]Edit{{Path: MappingPath, Old: cur, New: next}}); err != nil {
			t.Fatal(err)
		}
		cur = next
	}
	list, _ = ListBackups(rc.h)
	n := 0
	for _, b := range list {
		if b.Path == MappingPath {
			n++
		}
	}
	if n != 3 || len(list) != 5 {
		t.Errorf("%d backups of pci.cfg, %d in all; want 3 and 5", n, len(list))
	}
	removed, err := Prune(rc.h, 1)
	if err != nil || len(removed) != 2 {
		t.Errorf("prune to 1: %v %v", removed, err)
	}
	dir := filepath.Join(rc.root, BackupDir)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3*2 { // a backup and its sidecar per file
		t.Errorf("%d entries left in %s", len(entries), dir)
	}
}

func TestRestoreRefuses(t *testing.T) {
	rc := newRefCase(t)
	w := rc.writer()
	if _, err := w.Commit(rc.edits); err != nil {
		t.Fatal(err)
	}
	list, _ := ListBackups(rc.h)
	for _, tc := range []struct{ id, want string }{
		{"../../etc/shadow", "not a backup id"},
		{"etc_pve_mapping_pci.cfg.20260101T000000.000000000Z", "no backup"},
		{list[0].ID + ".json", "not a backup id"},
	} {
		if _, err := w.Restore(tc.id); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("restore %q: %v", tc.id, err)
		}
	}
	// A restore is a transaction like any other: refused while the guest is locked.
	for _, b := range list {
		if strings.HasSuffix(b.Path, "131.conf") {
			p := filepath.Join(rc.root, "etc/pve/nodes/kpro6/qemu-server/131.conf")
			cur, _ := os.ReadFile(p)
			os.WriteFile(p, append([]byte("lock: migrate\n"), cur...), 0o640)
			if _, err := w.Restore(b.ID); err == nil || !strings.Contains(err.Error(), "has lock: migrate") {
				t.Errorf("restore into a locked VM: %v", err)
			}
		}
	}
}
