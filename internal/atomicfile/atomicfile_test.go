package atomicfile

import (
	"os"
	"path/filepath"
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
