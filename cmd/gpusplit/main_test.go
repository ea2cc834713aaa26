package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildStatic builds the binary as it ships (CGO_ENABLED=0) and opens it.
func buildStatic(t *testing.T) (string, *elf.File) {
	t.Helper()
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
	return bin, f
}

// The default build is static (CGO_ENABLED=0), so the binary runs in a minimal initramfs
// and on any host: no program interpreter, no shared libraries.
func TestStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, f := buildStatic(t)
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

// The CUDA build (-tags cuda) loads libcuda.so.1 through purego, so it is dynamically
// linked. Without the CUDA driver (this machine has none) it says so and exits 4; the
// static build hands p2p over to it when it sits beside it, and without it says where to
// get it.
func TestCUDABuild(t *testing.T) {
	if out, _ := exec.Command("ldconfig", "-p").Output(); strings.Contains(string(out), "libcuda.so.1") {
		t.Skip("this machine has the CUDA driver, so p2p runs for real here: scripts/gpu-check.sh checks it")
	}
	dir := t.TempDir()
	static, withCUDA := filepath.Join(dir, "gpusplit"), filepath.Join(dir, "gpusplit-cuda")
	for _, b := range []struct{ out, tags string }{{static, ""}, {withCUDA, "cuda"}} {
		build := exec.Command("go", "build", "-tags", b.tags, "-o", b.out, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build -tags %q: %v\n%s", b.tags, err, out)
		}
	}
	lone := filepath.Join(t.TempDir(), "gpusplit")
	if err := os.Link(static, lone); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		bin  string
		want string
	}{
		{"the CUDA build", withCUDA, "the CUDA driver is not available: " + "libcuda.so.1"},
		{"the static build, handing over", static, "the CUDA driver is not available: " + "libcuda.so.1"},
		{"the static build alone", lone, "p2p needs gpusplit-cuda, the CUDA build of gpusplit"},
	} {
		cmd := exec.Command(c.bin, "p2p")
		cmd.Env = append(os.Environ(), "PATH=/nonexistent")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: %v, %q; want exit status 4 and %q", c.name, err, out, c.want)
		}
	}
	if out, err := exec.Command(withCUDA, "--demo", "topo").Output(); err != nil || !strings.Contains(string(out), "NODE") {
		t.Errorf("gpusplit-cuda --demo topo: %v\n%s", err, out)
	}
}
