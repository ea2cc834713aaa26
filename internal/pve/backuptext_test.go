package pve

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The list of backups: none, then one line per file the reference sync replaced, with
// the command that replaced it; its JSON keeps an empty list a list.
func TestBackupsReport(t *testing.T) {
	rc := newRefCase(t)
	rep, err := ReportBackups(rc.h, "/b")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := rep.WriteText(&out, 100); err != nil || out.String() != "No backups in /b: gpusplit has not replaced a Proxmox file here.\n" {
		t.Errorf("no backups: %v %q", err, out.String())
	}
	if b, _ := json.Marshal(rep); string(b) != `{"dir":"/b","backups":[]}` {
		t.Errorf("no backups, JSON: %s", b)
	}
	w := rc.writer()
	w.Command = "pve sync"
	if _, err := w.Commit(rc.edits); err != nil {
		t.Fatal(err)
	}
	if rep, err = ReportBackups(rc.h, "/b"); err != nil || len(rep.Backups) != 3 {
		t.Fatalf("%v %+v", err, rep)
	}
	out.Reset()
	if err := rep.WriteText(&out, 200); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 6 || lines[0] != "3 backups in /b:" || lines[1] != "" || !strings.HasPrefix(lines[2], "ID ") || !strings.HasSuffix(lines[2], " BY") {
		t.Fatalf("the list:\n%s", out.String())
	}
	for i, b := range rep.Backups {
		l := lines[3+i]
		if !strings.HasPrefix(l, b.ID+" ") || !strings.Contains(l, " "+b.Path+" ") || !strings.Contains(l, b.Time.Local().Format(time.DateTime)) || !strings.HasSuffix(l, " pve sync") {
			t.Errorf("the line of %s: %q", b.ID, l)
		}
	}
}

// A restore's check shows the diff and what stops it, a dry run says nothing was
// written; the restore says what it wrote and where the version it replaced is; a
// backup the file holds already is nothing to restore.
func TestRestoreReportText(t *testing.T) {
	rc := newRefCase(t)
	if _, err := rc.writer().Commit(rc.edits); err != nil {
		t.Fatal(err)
	}
	list, _ := ListBackups(rc.h)
	id := list[0].ID
	rep, err := RestoreBackup(rc.h, id, true, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	text := func(r *RestoreReport, dryRun, written bool) string {
		var b strings.Builder
		r.WriteText(&b, dryRun, written, "/b")
		return b.String()
	}
	if got := text(rep, false, false); got != rep.Diff {
		t.Errorf("the check:\n%s", got)
	}
	if got := text(rep, true, false); got != rep.Diff+"dry run: nothing was written; without --dry-run the backup is put back.\n" {
		t.Errorf("the dry run:\n%s", got)
	}
	stopped := *rep
	stopped.Problems = []string{"p1", "p2"}
	if got := text(&stopped, true, false); got != rep.Diff+"nothing was written; the restore would stop:\n  p1\n  p2\n" {
		t.Errorf("a stopped check:\n%s", got)
	}
	if rep, err = RestoreBackup(rc.h, id, false, "test", rep); err != nil {
		t.Fatal(err)
	}
	want := "written       " + list[0].Path + "\nrestored " + id + "; the version it replaced is in /b.\n"
	if got := text(rep, false, true); got != want {
		t.Errorf("the restore:\n%s\nwant:\n%s", got, want)
	}
	failed := *rep
	failed.Applied = false
	if got := text(&failed, false, true); got != "written       "+list[0].Path+"\n" {
		t.Errorf("a restore that failed says it restored:\n%s", got)
	}
	if rep, err = RestoreBackup(rc.h, id, true, "test", nil); err != nil {
		t.Fatal(err)
	}
	if got := text(rep, true, false); got != "the file already holds backup "+id+": nothing to restore.\n" {
		t.Errorf("nothing to restore:\n%s", got)
	}
}

// A prune's check lists the backups beyond the last Keep of each file, its JSON a dry
// run's; the prune removes them and says how many.
func TestPruneReport(t *testing.T) {
	rc := newRefCase(t)
	clock := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w := rc.writer()
	w.Now = func() time.Time { clock = clock.Add(time.Minute); return clock }
	if _, err := w.Commit(rc.edits); err != nil {
		t.Fatal(err)
	}
	back := make([]Edit, 0, len(rc.edits))
	for _, e := range rc.edits {
		back = append(back, Edit{Path: e.Path, Old: e.New, New: e.Old})
	}
	if _, err := w.Commit(back); err != nil {
		t.Fatal(err)
	}
	rep, err := CheckPrune(rc.h, 1)
	if err != nil || len(rep.Removed) != 3 {
		t.Fatalf("check: %v %+v", err, rep)
	}
	var out strings.Builder
	rep.WriteText(&out, "/b")
	want := "remove " + strings.Join(rep.Removed, "\nremove ") + "\n3 backups to remove; the last 1 of each file stay in /b.\n"
	if out.String() != want {
		t.Errorf("the check:\n%s\nwant:\n%s", out.String(), want)
	}
	if b, _ := json.Marshal(rep); !strings.HasPrefix(string(b), `{"keep":1,"dry_run":true,"removed":["`) {
		t.Errorf("the check's JSON: %s", b)
	}
	if list, _ := ListBackups(rc.h); len(list) != 6 {
		t.Errorf("the check removed backups: %d left", len(list))
	}
	if rep, err = PruneBackups(rc.h, 1); err != nil || len(rep.Removed) != 3 || rep.DryRun {
		t.Fatalf("prune: %v %+v", err, rep)
	}
	out.Reset()
	rep.WriteText(&out, "/b")
	if out.String() != "removed 3 backups.\n" {
		t.Errorf("the prune: %q", out.String())
	}
	if rep, err = CheckPrune(rc.h, 1); err != nil || rep.Removed == nil || len(rep.Removed) != 0 {
		t.Errorf("nothing to prune: %v %+v", err, rep)
	}
}
