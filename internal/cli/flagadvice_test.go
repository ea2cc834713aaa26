package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Domain errors that a flag answers carry no flag; the command line names it: a host
// without GPUs (plan.NoGPUsError) gets --devices, a copy of a host that apply would
// change (bind.NotLiveError) gets --root and --dry-run.
func TestFlagAdvice(t *testing.T) {
	empty := t.TempDir()
	if err := os.MkdirAll(filepath.Join(empty, "sys/bus/pci/devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"plan", "--vfio", "numa:0"}, {"topo", "--vfio", "numa:0", "--format", "svg"}} {
		_, _, err := run(t, append([]string{"--root", empty}, args...)...)
		if want := "no GPUs on " + empty + ": nothing to split (use --devices to choose which devices count as GPUs)"; err == nil || err.Error() != want {
			t.Errorf("%s without GPUs: %v\nwant %s", args[0], err, want)
		}
	}
	dir := t.TempDir()
	if _, err := twoGPUs().Open(dir); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, "--root", dir, "apply", "--vfio", "0000:00:03.0", "--yes")
	if err == nil || !strings.HasSuffix(err.Error(), "so apply and rollback run on the host itself (no --root, or --root /); --dry-run shows here what they would do, and pve and persist edit the files of a copy") {
		t.Errorf("apply on a copy: %v", err)
	}
}
