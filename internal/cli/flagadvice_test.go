package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// Domain errors that a flag answers carry no flag; the command line names it: a host
// without GPUs (plan.NoGPUsError) gets --devices, a copy of a host that apply would
// change (bind.NotLiveError) gets --root and --dry-run, a choice of GPUs that fails
// (plan.InputError) --vfio, a device chosen that is no GPU (plan.NotAGPUError)
// --devices, a group shared with the host (plan.SharedGroupError)
// --allow-shared-groups, and a split.toml that --vfio would replace
// (split.ConfigExistsError) --vfio.
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
	// A split.toml written by hand is no --vfio's to replace.
	demo := freshDemo(t)
	mustRun(t, "demo", "reset")
	writeFile(t, demo, "etc/gpusplit/split.toml", "[[group]]\nname = \"mine\"\nselect = [\"numa:0\"]\ndriver = \"vfio-pci\"\n")
	// The change shows the stop as the error says it, in text and in JSON.
	const refusal = "/etc/gpusplit/split.toml says what the split is, and --vfio says otherwise: the boot unit applies that file, which --vfio would replace"
	t.Setenv("COLUMNS", "400")
	out, _, err := run(t, "--demo", "apply", "--vfio", "numa:1", "--dry-run")
	if err == nil || !strings.Contains(err.Error(), refusal) || !strings.Contains(out, "  boot: "+refusal+"\n") {
		t.Errorf("apply --vfio over a split.toml: %v\n%s", err, out)
	}
	out, _, _ = run(t, "--demo", "plan", "--vfio", "numa:1", "-o", "json")
	var doc struct{ Stops []string }
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Stops) != 1 || doc.Stops[0] != "boot: "+refusal {
		t.Errorf("plan -o json: %v %q", err, doc.Stops)
	}
	_, _, err = run(t, "--demo", "plan", "--vfio", "0000:02:00.0")
	if err == nil || !strings.HasPrefix(err.Error(), "--vfio: selector 0000:02:00.0 matches no GPU") ||
		!strings.HasSuffix(err.Error(), "(class 0x020000, driver i40e), not a GPU: --devices chooses which devices count as GPUs") {
		t.Errorf("a NIC chosen: %v", err)
	}
	shared := t.TempDir()
	if _, err := fakehost.SharedGroups().Open(shared); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "--root", shared, "plan", "--vfio", "0000:01:00.0")
	if err == nil || !strings.Contains(err.Error(), "from the host. Allow it with allow_shared_groups (--allow-shared-groups), or move the GPU") {
		t.Errorf("a shared group: %v", err)
	}
}
