package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The default build is static (CGO_ENABLED=0), so the binary runs in a minimal initramfs
// and on any host: no program interpreter, no shared libraries.
func TestStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "gpusplit")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a program interpreter: it is dynamically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}

	// It runs the README's first command, and fails cleanly on a bad root.
	out, err := exec.Command(bin, "--demo", "topo").Output()
	if err != nil || !strings.Contains(string(out), "NODE") {
		t.Errorf("gpusplit --demo topo: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--root", filepath.Join(t.TempDir(), "missing"), "inventory")
	stderr, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.HasPrefix(string(stderr), "gpusplit: root ") {
		t.Errorf("bad root: %v, %q", err, stderr)
	}
}
