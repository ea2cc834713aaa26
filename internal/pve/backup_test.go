package pve

import (
	"errors"
	"maps"
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

// A sidecar names where its backup goes, and anyone who can write the backup directory
// can write one: a path that climbs out of /etc/pve, or only starts like a guest
// config, is refused by restore and by its dry run, and nothing is written.
func TestRestoreRefusesForgedSidecar(t *testing.T) {
	rc := newRefCase(t)
	w := rc.writer()
	if _, err := w.Commit(rc.edits); err != nil {
		t.Fatal(err)
	}
	// A guest config's backup: its text reads back as a guest config, so only the
	// check of the path stands between it and the file the sidecar names.
	list, _ := ListBackups(rc.h)
	id := ""
	for _, b := range list {
		if strings.HasSuffix(b.Path, "131.conf") {
			id = b.ID
		}
	}
	sidecar := filepath.Join(rc.root, BackupDir, id+".json")
	hostname := filepath.Join(rc.root, "etc/hostname")
	if err := os.WriteFile(hostname, []byte("kpro6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"/etc/pve/lxc/../../../../etc/hostname", "not a clean absolute path"},
		{"/etc/pve/qemu-server/../../hostname", "not a clean absolute path"},
		{"/etc/pve/lxc/..", "not a clean absolute path"},
		{"/etc/pve/nodes/kpro6/../../../etc/hostname", "not a clean absolute path"},
		{"/etc/pve/qemu-server/131.conf.d/x", "not a Proxmox file gpusplit writes"},
		{"/etc/pve/lxc/hostname", "not a Proxmox file gpusplit writes"},
		{"/etc/pve/priv/authorized_keys", "not a Proxmox file gpusplit writes"},
		{"/etc/hostname", "not a Proxmox file gpusplit writes"},
	} {
		if err := os.WriteFile(sidecar, []byte(`{"path":"`+c.path+`","time":"2026-12-01T10:00:00Z"}`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		before := rc.files(t)
		for name, restore := range map[string]func(string) ([]FileResult, error){"restore": w.Restore, "dry run": w.RestoreCheck} {
			if _, err := restore(id); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s of a backup naming %s: %v, want %q", name, c.path, err, c.want)
			}
		}
		if got, _ := os.ReadFile(hostname); string(got) != "kpro6\n" {
			t.Fatalf("restoring a backup naming %s wrote /etc/hostname: %q", c.path, got)
		}
		if after := rc.files(t); !maps.Equal(before, after) {
			t.Errorf("a refused restore of a backup naming %s changed files", c.path)
		}
	}
}

// Every write goes through one check of where it goes: an edit of a file that is not
// pci.cfg or a guest config of this node is refused before a lock is taken.
func TestCommitRefusesOtherFiles(t *testing.T) {
	rc := newRefCase(t)
	w := rc.writer()
	for _, p := range []string{"/etc/pve/lxc/../../hostname", "/etc/pve/nodes/kpro6/qemu-server/131.conf", "/etc/pve/user.cfg", "/etc/pve/qemu-server/x.conf"} {
		e := rc.edits[1]
		e.Path = p
		_, err := w.Commit([]Edit{e})
		if err == nil || !strings.Contains(err.Error(), p+": is not a file gpusplit writes") {
			t.Errorf("commit of %s: %v", p, err)
		}
		if after := rc.files(t); !maps.Equal(rc.before, after) {
			t.Errorf("a refused commit of %s changed files", p)
		}
	}
}

// RestoreBackup's report: none for an id that names no backup; the problems of a check
// or a restore its checks stop; the file written by one that goes through.
func TestRestoreBackup(t *testing.T) {
	rc := newRefCase(t)
	if _, err := rc.writer().Commit(rc.edits); err != nil {
		t.Fatal(err)
	}
	if rep, err := RestoreBackup(rc.h, "etc_pve_mapping_pci.cfg.20260101T000000.000000000Z", true, "test", nil); rep != nil || err == nil {
		t.Errorf("no such backup: %+v %v", rep, err)
	}
	list, _ := ListBackups(rc.h)
	var vm Backup
	for _, b := range list {
		if strings.HasSuffix(b.Path, "131.conf") {
			vm = b
		}
	}
	p := filepath.Join(rc.root, "etc/pve/nodes/kpro6/qemu-server/131.conf")
	cur, _ := os.ReadFile(p)
	os.WriteFile(p, append([]byte("lock: migrate\n"), cur...), 0o640)
	for _, check := range []bool{true, false} {
		rep, err := RestoreBackup(rc.h, vm.ID, check, "test", nil)
		if err == nil || rep == nil || rep.Applied || rep.ID != vm.ID || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "has lock: migrate") {
			t.Errorf("check %v of a locked VM: %+v %v", check, rep, err)
		}
	}
	os.WriteFile(p, cur, 0o640)
	rep, err := RestoreBackup(rc.h, vm.ID, true, "test", nil)
	if err != nil || rep.Applied || len(rep.Files) != 1 || rep.Files[0].Outcome != Untouched || len(rep.Problems) != 0 {
		t.Errorf("check: %+v %v", rep, err)
	}
	if !strings.Contains(rep.Diff, "+hostpci0: mapping=pro6000,pcie=1\n") {
		t.Errorf("the check's diff:\n%s", rep.Diff)
	}
	// A restore writes what its check showed, or nothing.
	shown := rep
	os.WriteFile(p, append(cur, "tags: x\n"...), 0o640)
	var se *ShownError
	if rep, err := RestoreBackup(rc.h, vm.ID, false, "test", shown); !errors.As(err, &se) || rep.Applied {
		t.Errorf("restore of a file changed since its check: %+v %v", rep, err)
	}
	os.WriteFile(p, cur, 0o640)
	rep, err = RestoreBackup(rc.h, vm.ID, false, "test", shown)
	if err != nil || !rep.Applied || len(rep.Files) != 1 || rep.Files[0].Outcome != Written {
		t.Errorf("restore: %+v %v", rep, err)
	}
	rep, err = RestoreBackup(rc.h, vm.ID, false, "test", nil)
	if err != nil || !rep.Applied || len(rep.Files) != 0 || rep.Files == nil {
		t.Errorf("again: %+v %v", rep, err)
	}
}
