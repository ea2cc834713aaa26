package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	if err := CheckWritable(filepath.Join(dir, "new.tar.gz")); err != nil {
		t.Fatalf("a new file in a writable directory: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".new.tar.gz.tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		want Obstacle
		why  string
	}{
		{dir, IsDir, "it is a directory"},
		{filepath.Join(dir, "no", "f"), NoDir, "directory " + filepath.Join(dir, "no") + " does not exist"},
		{filepath.Join(file, "g"), NotDir, "or a directory above it, is not a directory"},
	} {
		var we *WriteError
		err := CheckWritable(c.file)
		if !errors.As(err, &we) || we.Obstacle != c.want || !strings.Contains(we.Why, c.why) || !strings.HasPrefix(err.Error(), "cannot write "+c.file+": ") {
			t.Errorf("%s: %v, want obstacle %d saying %q", c.file, err, c.want, c.why)
		}
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		var we *WriteError
		if err := CheckWritable(filepath.Join(ro, "f")); !errors.As(err, &we) || we.Obstacle != NoPermission {
			t.Errorf("a file in a directory not writable: %v", err)
		}
	}
}

func TestExplainUnknown(t *testing.T) {
	err := errors.New("something else")
	if got := Explain("/x/f", err); got.Obstacle != Unknown || got.Error() != "cannot write /x/f: something else" || !errors.Is(got, err) {
		t.Errorf("%v", got)
	}
}
