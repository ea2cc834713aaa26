package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// freshDemo points the demo's cache at an empty directory of the test's, where no
// scratch copy exists yet, and returns where the copy will be.
func freshDemo(t *testing.T) string {
	t.Helper()
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	return filepath.Join(cache, "gpusplit", "demo")
}

// sampleArchive is the sample host as a snapshot archive: read-only, as --demo was
// before a command wrote under it.
func sampleArchive(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kpro6.tar.gz")
	if err := os.WriteFile(p, samplehost.Archive(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// copyDrivers are the drivers of the devices of the copy at dir, read afresh.
func copyDrivers(t *testing.T, dir string, addrs ...string) []string {
	t.Helper()
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		d := "?"
		for _, n := range inv.Tree.Devices {
			if n.Address.String() == a {
				d = n.Driver
			}
		}
		out = append(out, d)
	}
	return out
}

var numa1Devices = []string{"0000:81:00.0", "0000:81:00.1", "0000:91:00.0", "0000:91:00.1", "0000:e1:00.0", "0000:e1:00.1", "0000:f1:00.0", "0000:f1:00.1"}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// The demo walks the split on its scratch copy with gpusplit's own kernel and services:
// the reading commands use the embedded sample host until a command writes; apply moves
// the NUMA-1 devices in the copy, as if nothing held the GPUs; status is in sync;
// rollback puts them back; nothing outside the copy changes; reset starts over.
func TestDemoSplitOnTheScratchCopy(t *testing.T) {
	dir := freshDemo(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	// This machine's own paths that apply, the hooks and pve sync write.
	own := []string{bind.StateDir, bind.LockDir, "/dev/vfio", "/etc/pve", "/run/qemu-server"}
	before := map[string]string{}
	for _, p := range own {
		if _, err := os.Lstat(p); err == nil {
			before[p] = fmt.Sprint(treeSum(t, p))
		}
	}

	plan, stderr, _ := run(t, "--demo", "plan", "--vfio", "numa:1")
	if !strings.Contains(plan, "nvidia-persistenced[2211]") || stderr != "" {
		t.Errorf("plan with no scratch copy is not the embedded sample's:\n%s%s", plan, stderr)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Fatal("a reading command made the scratch copy")
	}

	out, stderr, err := run(t, "--demo", "apply", "--vfio", "numa:1", "--yes")
	if err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, stderr)
	}
	if !strings.Contains(stderr, "made a scratch copy of the sample host in "+dir) || strings.Count(stderr, "demo: a simulation on the scratch copy "+dir+"; nothing on this machine changes (gpusplit demo reset starts over)") != 1 {
		t.Errorf("apply's notices:\n%s", stderr)
	}
	if got := copyDrivers(t, dir, numa1Devices...); !slices.Equal(got, repeat("vfio-pci", 8)) {
		t.Errorf("after apply the copy's NUMA-1 devices are on %v", got)
	}
	if got := copyDrivers(t, dir, "0000:01:00.0"); got[0] != "nvidia" {
		t.Errorf("a NUMA-0 GPU is on %v", got)
	}
	for _, g := range []string{"72", "90", "101", "117"} {
		if _, err := os.Stat(filepath.Join(dir, "dev/vfio", g)); err != nil {
			t.Errorf("/dev/vfio/%s in the copy: %v", g, err)
		}
	}

	out, stderr, err = run(t, "--demo", "status", "--vfio", "numa:1")
	if err != nil || !strings.Contains(out, "in sync") || strings.Count(stderr, "demo: a simulation") != 1 {
		t.Errorf("status after apply: %v\n%s%s", err, out, stderr)
	}

	if out, stderr, err := run(t, "--demo", "rollback", "--yes"); err != nil {
		t.Fatalf("rollback: %v\n%s%s", err, out, stderr)
	}
	want := []string{"nvidia", "snd_hda_intel", "nvidia", "snd_hda_intel", "nvidia", "snd_hda_intel", "nvidia", "snd_hda_intel"}
	if got := copyDrivers(t, dir, numa1Devices...); !slices.Equal(got, want) {
		t.Errorf("after rollback: %v", got)
	}

	// Only the scratch copy changed: this machine's paths are as they were, the cache
	// holds the copy and nothing else, HOME nothing.
	for _, p := range own {
		now := ""
		if _, err := os.Lstat(p); err == nil {
			now = fmt.Sprint(treeSum(t, p))
		}
		if now != before[p] {
			t.Errorf("%s of this machine changed", p)
		}
	}
	if names, _ := os.ReadDir(home); len(names) > 0 {
		t.Errorf("HOME holds %v", names)
	}
	if names, _ := os.ReadDir(filepath.Dir(dir)); len(names) != 1 {
		t.Errorf("beside the scratch copy: %v", names)
	}

	// reset starts over: a change to the copy is gone.
	marker := filepath.Join(dir, "etc/gpusplit-was-here")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out = mustRun(t, "demo", "reset")
	if !strings.Contains(out, "a fresh scratch copy of the sample host is in "+dir) {
		t.Errorf("reset says:\n%s", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the reset kept a change to the copy")
	}
	var path struct {
		Dir    string `json:"dir"`
		Exists bool   `json:"exists"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "demo", "path", "-o", "json")), &path); err != nil || path.Dir != dir || !path.Exists {
		t.Errorf("demo path: %+v, %v", path, err)
	}
}

// The pool of the README (docs/split-pool.toml) on the scratch copy: one apply, then
// a VM start takes the pool to vfio-pci, its stop gives it back with the device nodes
// made in the copy, through the simulated kernel and services.
func TestDemoPoolHooks(t *testing.T) {
	dir := freshDemo(t)
	mustRun(t, "demo", "reset")
	if err := os.MkdirAll(filepath.Join(dir, "etc/gpusplit"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/gpusplit/split.toml"), []byte(poolSplit(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	// One apply makes the whole split: Proxmox's files, the pool VM's hookscript, the
	// boot files.
	if out := mustRun(t, "--demo", "apply", "--yes"); !strings.Contains(out, "hookscript of VM 131: local:snippets/gpusplit-hook") || !strings.Contains(out, "/etc/systemd/system/gpusplit.service") {
		t.Errorf("apply:\n%s", out)
	}
	if conf, _ := os.ReadFile(filepath.Join(dir, "etc/pve/nodes/kpro6/qemu-server/131.conf")); !strings.Contains(string(conf), "hookscript: local:snippets/gpusplit-hook") {
		t.Errorf("VM 131 after hook install:\n%s", conf)
	}
	gpus := []string{"0000:81:00.0", "0000:91:00.0", "0000:e1:00.0", "0000:f1:00.0"}

	out := mustRun(t, "--demo", "hook", "131", "pre-start")
	if got := copyDrivers(t, dir, gpus...); !slices.Equal(got, repeat("vfio-pci", 4)) {
		t.Errorf("after pre-start: %v\n%s", got, out)
	}
	out = mustRun(t, "--demo", "hook", "131", "post-stop")
	if got := copyDrivers(t, dir, gpus...); !slices.Equal(got, repeat("nvidia", 4)) {
		t.Errorf("after post-stop: %v\n%s", got, out)
	}
	for _, n := range []string{"nvidia4", "nvidia5", "nvidia6", "nvidia7"} {
		if fi, err := os.Stat(filepath.Join(dir, "dev", n)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("/dev/%s in the copy: %v", n, err)
		}
	}
	if out, _, err := run(t, "--demo", "status"); err != nil || !strings.Contains(out, "0000:81:00.0  on nvidia, at rest") {
		t.Errorf("status after the stop: %v\n%s", err, out)
	}
}

// With reset --held the copy keeps the processes that hold the GPUs: apply refuses as
// on the host, naming them, and moves nothing.
func TestDemoHeld(t *testing.T) {
	dir := freshDemo(t)
	mustRun(t, "demo", "reset", "--held")
	_, _, err := run(t, "--demo", "apply", "--vfio", "numa:1", "--yes")
	if err == nil || !strings.Contains(err.Error(), "nvidia-persistenced") || !strings.Contains(err.Error(), "pct stop 129") {
		t.Errorf("apply with the holders kept: %v", err)
	}
	if got := copyDrivers(t, dir, "0000:81:00.0"); got[0] != "nvidia" {
		t.Errorf("a refused apply moved 0000:81:00.0 to %s", got[0])
	}
	// Without them, a dry run is the real run's preview, and passes.
	mustRun(t, "demo", "reset")
	if out, stderr, err := run(t, "--demo", "apply", "--vfio", "numa:1", "--dry-run"); err != nil || strings.Contains(stderr, "refused") {
		t.Errorf("dry run: %v\n%s%s", err, out, stderr)
	}
}

// --demo and --root both name a host: refused, --root / included.
func TestDemoAndRoot(t *testing.T) {
	freshDemo(t)
	for _, root := range []string{"/", t.TempDir()} {
		if _, _, err := run(t, "--demo", "--root", root, "topo"); err == nil || !strings.Contains(err.Error(), "--demo and --root both name a host") {
			t.Errorf("--demo --root %s: %v", root, err)
		}
	}
}

// A scratch copy that is not the user's own directory is never used.
func TestDemoRefusesAForeignCopy(t *testing.T) {
	dir := freshDemo(t)
	other := t.TempDir()
	os.MkdirAll(filepath.Dir(dir), 0o700)
	if err := os.Symlink(other, dir); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--demo", "topo"}, {"--demo", "apply", "--vfio", "numa:1", "--yes"}, {"demo", "reset"}} {
		if _, _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
			t.Errorf("%v with a link for the copy: %v", args, err)
		}
	}
	if names, _ := os.ReadDir(other); len(names) > 0 {
		t.Errorf("the link's target was written: %v", names)
	}
}

// A user other than root walks the demo on a scratch copy of their own: needRoot checks
// the copy as any directory copy, and the copy is theirs.
func TestDemoNeedsNoRoot(t *testing.T) {
	freshDemo(t) // a dry run under --demo makes the scratch copy
	cache := openTempDir(t)
	if os.Geteuid() == 0 {
		if err := os.Chown(cache, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"XDG_CACHE_HOME=" + cache}
	if out, code := runAsNobodyWith(t, env, "--demo", "apply", "--vfio", "numa:1", "--yes"); code != 0 || !strings.Contains(out, "moved 8 devices") {
		t.Fatalf("apply as nobody: exit status %d\n%s", code, out)
	}
	if out, code := runAsNobodyWith(t, env, "--demo", "pve", "hook", "install", "--vm", "131", "--apply"); code != 0 {
		t.Errorf("pve hook install as nobody: exit status %d\n%s", code, out)
	}
	dir := filepath.Join(cache, "gpusplit", "demo")
	fi, err := os.Stat(filepath.Join(dir, "var/lib/gpusplit/journal.json"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Errorf("the journal in the copy: %v", err)
	}
}

// The README opens with the split in five commands: on a fresh checkout they take the
// sample host through the whole of it, Proxmox and the boot files included, each
// exiting 0, and a VM start through the hook finds its GPUs ready.
func TestReadmeStory(t *testing.T) {
	dir := freshDemo(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	try := string(readme)[strings.Index(string(readme), "## Try it\n"):]
	block := try[strings.Index(try, "```sh\n")+6:]
	block = block[:strings.Index(block, "```")]
	var cmds [][]string
	for l := range strings.Lines(block) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "go run ./cmd/gpusplit "); ok {
			cmds = append(cmds, strings.Fields(rest))
		}
	}
	if len(cmds) != 5 {
		t.Fatalf("the story is %d commands, want 5:\n%s", len(cmds), block)
	}
	outs := make([]string, len(cmds))
	for i, args := range cmds {
		out, stderr, err := run(t, args...)
		if err != nil {
			t.Fatalf("gpusplit %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		outs[i] = out
	}
	for i, want := range []string{"GPU4  SYS", "Proxmox: 3 files change:", "written       /etc/pve/qemu-server/131.conf", "in sync", "0000:81:00.0 already on vfio-pci"} {
		if !strings.Contains(outs[i], want) {
			t.Errorf("gpusplit %s lacks %q:\n%s", strings.Join(cmds[i], " "), want, outs[i])
		}
	}
	if !strings.Contains(outs[1], "next: gpusplit --demo apply --vfio numa:1\n") {
		t.Errorf("plan does not end with the command that follows:\n%s", outs[1])
	}
	if !strings.Contains(outs[3], "the boot files: as the split asks") {
		t.Errorf("status does not check every part:\n%s", outs[3])
	}
	if conf, _ := os.ReadFile(filepath.Join(dir, "etc/pve/nodes/kpro6/lxc/129.conf")); strings.Contains(string(conf), "/dev/nvidia4") {
		t.Errorf("container 129 still passes /dev/nvidia4:\n%s", conf)
	}
}
