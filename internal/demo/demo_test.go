package demo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/persist"
)

// A fresh copy is the sample host less its GPUs' holders, private to its user, a
// simulated host whose kernel opens, with gpusplit installed as the checks want it.
func TestMake(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gpusplit", "demo")
	if h, err := Open(dir); h != nil || err != nil {
		t.Fatalf("Open with no copy: %v, %v", h, err)
	}
	made, err := Make(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"nvidia-persiste[2211]", "python3[48213]"}; !slices.Equal(made.Removed, want) || made.Replaced {
		t.Errorf("made %+v, want removed %v", made, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "proc/3982")); err != nil {
		t.Errorf("pvedaemon, which holds no GPU, was taken out: %v", err)
	}
	for _, pid := range []string{"2211", "48213"} {
		if _, err := os.Stat(filepath.Join(dir, "proc", pid)); err == nil {
			t.Errorf("process %s, which holds the GPUs, is still there", pid)
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the copy's mode: %v, %v", fi.Mode(), err)
	}
	h, err := Open(dir)
	if err != nil || h == nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := bind.OpenSim(h); err != nil {
		t.Errorf("the copy's kernel: %v", err)
	}
	if _, err := persist.CheckBinary(h, persist.DefaultBinary, false); err != nil {
		t.Errorf("the copy's gpusplit: %v", err)
	}
	if id, err := h.ReadString("/proc/sys/kernel/random/boot_id"); err != nil || len(id) != 36 {
		t.Errorf("boot id %q, %v", id, err)
	}

	// A reset starts over, here keeping the holders; nothing is left beside the copy.
	if err := os.WriteFile(filepath.Join(dir, "etc/changed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	made, err = Make(dir, Options{Held: true})
	if err != nil || !made.Replaced || len(made.Removed) != 0 {
		t.Fatalf("reset: %+v, %v", made, err)
	}
	for _, p := range []string{"etc/changed"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s survived the reset", p)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "proc/48213")); err != nil {
		t.Errorf("with Held the holder is gone: %v", err)
	}
	if names, _ := os.ReadDir(filepath.Dir(dir)); len(names) != 1 {
		t.Errorf("beside the copy: %v", names)
	}
}

// A scratch directory that is not the user's own private directory is never used, nor
// replaced.
func TestOpenRefuses(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "demo")
	real := filepath.Join(base, "elsewhere")
	if _, err := Make(real, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, dir); err != nil {
		t.Fatal(err)
	}
	check := func(what, want string) {
		t.Helper()
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Open: %v, want %q", what, err, want)
		}
		if _, err := Make(dir, Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Make: %v, want %q", what, err, want)
		}
	}
	check("a link", "is a symbolic link")
	os.Remove(dir)
	if err := os.Rename(real, dir); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	check("open to others", "is open to others")
	os.Chmod(dir, 0o700)
	if os.Geteuid() == 0 {
		os.Chown(dir, 65534, 65534)
		check("another user's", "is not this user's")
		os.Chown(dir, 0, 0)
	}
	os.Remove(filepath.Join(dir, ".gpusplit-simulation.json"))
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "gpusplit demo reset") {
		t.Errorf("a copy without its record: %v", err)
	}
}
