package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if err != nil || string(b) != "new" || fi.Mode().Perm() != 0o644 {
		t.Errorf("%q %v %v", b, fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".f.tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// A directory that does not exist: an error, and nothing made.
	if err := Write(filepath.Join(dir, "no", "f"), []byte("x"), 0o644); err == nil {
		t.Error("wrote into a missing directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); err == nil {
		t.Error("made the missing directory")
	}
	// Over a directory: the rename fails and the temporary file is gone.
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "d"), []byte("x"), 0o644); err == nil {
		t.Error("replaced a directory")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".d.tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// The directory is synced after the rename, so that the new name is on disk too.
func TestWriteSyncsDirectory(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "journal.json")
	var synced []string
	saved := syncDir
	t.Cleanup(func() { syncDir = saved })
	syncDir = func(d string) error {
		// By now the rename is done: the file under its name holds the new data.
		if b, err := os.ReadFile(p); err != nil || string(b) != "new" {
			t.Errorf("directory synced before the rename: %q %v", b, err)
		}
		synced = append(synced, d)
		return saved(d)
	}
	if err := Write(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Errorf("synced %v, want [%s]", synced, dir)
	}
	// A failed directory sync is reported: the caller must not take the file as durable.
	syncDir = func(string) error { return errors.New("EIO") }
	if err := Write(p, []byte("newer"), 0o600); err == nil || !strings.Contains(err.Error(), "syncing its directory") {
		t.Errorf("failed directory sync: %v", err)
	}
}
