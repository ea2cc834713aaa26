// Package gpusplitbin builds the gpusplit binary for tests that run it as a separate
// process: inside a QEMU guest (vmtest) or under memory and time limits (hostile). It is
// built the way it ships, static and without cgo, so what the tests run is what runs in
// an initramfs.
package gpusplitbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build builds cmd/gpusplit into a new temporary folder and returns the binary's path and
// a function that removes the folder. It is meant for TestMain, before any test runs.
func Build() (binary string, cleanup func(), err error) {
	root, err := moduleRoot()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "gpusplit-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	binary = filepath.Join(dir, "gpusplit")
	build := exec.Command("go", "build", "-o", binary, "./cmd/gpusplit")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("building gpusplit: %v\n%s", err, out)
	}
	return binary, cleanup, nil
}

// moduleRoot is the folder of go.mod, wherever the test runs from.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the gpusplit module")
	}
	return filepath.Dir(mod), nil
}
