package pve

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// guestEdit is the reference case's edit of VM 131's config.
func guestEdit(t *testing.T, rc *refCase) Edit {
	t.Helper()
	for _, e := range rc.edits {
		if e.Path == GuestPath(QEMU, 131) {
			return e
		}
	}
	t.Fatal("the reference case does not edit VM 131")
	return Edit{}
}

// A check writes nothing, and says what would stop the write; with apply the edit is
// written, with a backup.
func TestWriteGuest(t *testing.T) {
	rc := newRefCase(t)
	e := guestEdit(t, rc)
	files, problems, applied, err := WriteGuest(rc.h, "test", false, e)
	if err != nil || applied || len(files) != 0 || len(problems) != 0 || files == nil || problems == nil {
		t.Fatalf("check: %v %v %v %v", files, problems, applied, err)
	}
	rc.unchanged(t)

	conf := filepath.Join(rc.root, "etc/pve/nodes/kpro6/qemu-server/131.conf")
	if err := os.WriteFile(conf, []byte("lock: backup\n"+e.Old), 0o640); err != nil {
		t.Fatal(err)
	}
	locked := Edit{Path: e.Path, Old: "lock: backup\n" + e.Old, New: "lock: backup\n" + e.New}
	files, problems, applied, err = WriteGuest(rc.h, "test", false, locked)
	if !errors.Is(err, ErrWouldStop) || applied || len(files) != 0 || len(problems) != 1 || !strings.Contains(problems[0], "lock: backup") {
		t.Fatalf("check of a locked VM: %v %v %v %v", files, problems, applied, err)
	}
	files, problems, applied, err = WriteGuest(rc.h, "test", true, locked)
	var tx *TxError
	if !errors.As(err, &tx) || applied || len(problems) != 1 {
		t.Fatalf("apply to a locked VM: %v %v %v %v", files, problems, applied, err)
	}

	if err := os.WriteFile(conf, []byte(e.Old), 0o640); err != nil {
		t.Fatal(err)
	}
	files, problems, applied, err = WriteGuest(rc.h, "test", true, e)
	if err != nil || !applied || len(problems) != 0 || len(files) != 1 || files[0].Outcome != Written || files[0].Backup == "" {
		t.Fatalf("apply: %v %v %v %v", files, problems, applied, err)
	}
	if b, _ := os.ReadFile(conf); string(b) != e.New {
		t.Errorf("the config after apply:\n%s", b)
	}
}
