package cuda_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpusplit/gpusplit/internal/cuda"
)

// cudaCache is where scripts/vm-deps puts Debian's libcuda1 package.
func cudaCache() string {
	if d := os.Getenv("GPUSPLIT_CUDA_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "gpusplit-cuda")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "gpusplit-cuda")
}

// realLibrary unpacks NVIDIA's libcuda.so.1 from Debian's libcuda1 package (non-free) in
// the cache, where scripts/vm-deps downloads it without installing it, and returns the
// folder that holds it. Without the package the test fails and says why: a missing
// package would otherwise pass unnoticed as a test never run.
func realLibrary(t *testing.T) string {
	t.Helper()
	cache := cudaCache()
	arch := map[string]string{"amd64": "amd64", "arm64": "arm64"}[runtime.GOARCH]
	debs, _ := filepath.Glob(filepath.Join(cache, "libcuda1_*_"+arch+".deb"))
	if len(debs) == 0 {
		why := "not downloaded"
		if b, err := os.ReadFile(filepath.Join(cache, "libcuda1.unavailable")); err == nil {
			why = strings.TrimRight(strings.TrimSpace(string(b)), ".")
		}
		t.Fatalf("Debian's libcuda1 package (%s) is not in %s: %s. ./scripts/vm-deps downloads it (from Debian's non-free component, without installing it)", arch, cache, why)
	}
	slices.Sort(debs)
	dpkg, err := exec.LookPath("dpkg-deb")
	if err != nil {
		t.Fatalf("dpkg-deb, to unpack %s, is missing: ./scripts/vm-deps installs dpkg", debs[len(debs)-1])
	}
	dir := t.TempDir()
	if out, err := exec.Command(dpkg, "-x", debs[len(debs)-1], dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x %s: %v\n%s", debs[len(debs)-1], err, out)
	}
	var found string
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Name() == cuda.Library {
			found = p
		}
		return err
	})
	if found == "" {
		t.Fatalf("%s holds no %s", debs[len(debs)-1], cuda.Library)
	}
	return filepath.Dir(found)
}

// errorWords asks a CUDA library itself for its name and description of a code.
func errorWords(t *testing.T, lib string, code uint32) (name, text string) {
	t.Helper()
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	defer purego.Dlclose(h)
	var cuGetErrorName, cuGetErrorString func(res uint32, s **byte) uint32
	purego.RegisterLibFunc(&cuGetErrorName, h, "cuGetErrorName")
	purego.RegisterLibFunc(&cuGetErrorString, h, "cuGetErrorString")
	str := func(f func(uint32, **byte) uint32) string {
		var p *byte
		if res := f(code, &p); res != 0 || p == nil {
			t.Fatalf("%s has no words for CUresult %d (%d)", lib, code, res)
		}
		var b []byte
		for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
			b = append(b, *(*byte)(q))
		}
		return string(b)
	}
	return str(cuGetErrorName), str(cuGetErrorString)
}

// NVIDIA's own libcuda.so.1, loaded by gpusplit-cuda on a machine without an NVIDIA
// GPU: every symbol the binding needs resolves (Open resolves them all before cuInit),
// and cuInit's missing device is reported in the library's own words, with exit status
// 4. On a machine with NVIDIA's kernel driver whatever cuInit answers is reported so.
func TestRealLibrary(t *testing.T) {
	bin, _ := binaries(t)
	dir := realLibrary(t)
	lib := filepath.Join(dir, cuda.Library)
	have := exported(t, lib)
	for _, s := range cuda.Symbols {
		if _, ok := slices.BinarySearch(have, s); !ok {
			t.Errorf("NVIDIA's %s does not define %s", lib, s)
		}
	}
	cmd := exec.Command(bin, "p2p")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	out, err := cmd.CombinedOutput()
	status := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		status = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), " has no ") {
		t.Fatalf("a symbol does not resolve: %s", out)
	}
	m := regexp.MustCompile(`cuInit: (\S+) \((\d+)\): (.*)`).FindStringSubmatch(string(out))
	_, err = os.Stat("/proc/driver/nvidia/version")
	nvidia := err == nil
	if m == nil {
		if !nvidia {
			t.Fatalf("exit status %d, and no cuInit error on a machine without NVIDIA's kernel driver:\n%s", status, out)
		}
		return // cuInit succeeded: the GPUs are real
	}
	code, _ := strconv.ParseUint(m[2], 10, 32)
	name, text := errorWords(t, lib, uint32(code))
	if m[1] != name || strings.TrimSpace(m[3]) != text || status != 4 {
		t.Errorf("exit status %d, %q; want status 4 and cuInit: %s (%d): %s", status, out, name, code, text)
	}
	if !nvidia && (code != 100 || name != "CUDA_ERROR_NO_DEVICE") {
		t.Errorf("cuInit without NVIDIA's kernel driver: %s (%d); want CUDA_ERROR_NO_DEVICE (100), cuda.h's code for no device", name, code)
	}
}
