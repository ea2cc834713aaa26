package persist

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// demoFiles are the boot-time files for the reference split of the sample host.
func demoFiles(t *testing.T) ([]Pin, []File) {
	return demoFilesWith(t, Options{Binary: "/usr/local/bin/gpusplit", Config: plan.DefaultConfig})
}

func demoFilesWith(t *testing.T, o Options) ([]Pin, []File) {
	t.Helper()
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	sels, _ := pci.ParseSelectors("numa:1")
	p, err := plan.Make(inv, plan.ForVFIO([][]pci.Selector{sels}))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[pci.Address][2]uint16{}
	for _, d := range inv.Tree.Devices {
		ids[d.Address] = [2]uint16{d.VendorID, d.DeviceID}
	}
	pins := Pins(p, ids)
	files, err := Files(pins, o)
	if err != nil {
		t.Fatal(err)
	}
	return pins, files
}

func TestGolden(t *testing.T) {
	_, files := demoFiles(t)
	// With sync_proxmox, the unit is the one that differs; a packaged binary shows in it.
	_, synced := demoFilesWith(t, Options{Binary: "/usr/bin/gpusplit", Config: "/etc/gpusplit/split.toml", SyncProxmox: true})
	for _, f := range synced {
		if f.Path == Unit {
			f.Path = strings.TrimSuffix(Unit, ".service") + "-sync_proxmox.service"
			files = append(files, f)
		}
	}
	for _, f := range files {
		golden := filepath.Join("testdata", filepath.Base(f.Path)+".golden")
		if *update {
			if err := os.WriteFile(golden, []byte(f.Content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if f.Content != string(want) {
			t.Errorf("%s differs from %s (go test ./internal/persist -update rewrites it):\n%s", f.Path, golden, f.Content)
		}
	}
}

// The unit waits for Proxmox's cluster file system exactly when apply writes into it.
func TestUnitOrdering(t *testing.T) {
	for _, sync := range []bool{false, true} {
		_, files := demoFilesWith(t, Options{Binary: DefaultBinary, Config: plan.DefaultConfig, SyncProxmox: sync})
		var unit string
		for _, f := range files {
			if f.Path == Unit {
				unit = f.Content
			}
		}
		lines := map[string]bool{}
		for _, l := range strings.Split(unit, "\n") {
			lines[l] = true
		}
		if lines["After=pve-cluster.service"] != sync || lines["Wants=pve-cluster.service"] != sync {
			t.Errorf("sync_proxmox %v: unit\n%s", sync, unit)
		}
		// The ordering before what holds the GPUs and starts the guests stays.
		if !lines["Before=pve-guests.service pve-ha-lrm.service lxc.service nvidia-persistenced.service nvidia-fabricmanager.service multi-user.target"] {
			t.Errorf("sync_proxmox %v: the unit is no longer before the guests:\n%s", sync, unit)
		}
		if !lines["ExecStart="+DefaultBinary+" apply --config "+plan.DefaultConfig+" --persist=false --yes"] {
			t.Errorf("sync_proxmox %v: the unit does not run %s:\n%s", sync, DefaultBinary, unit)
		}
	}
}

// Paths the unit could not name as one word are refused, not written.
func TestFilesRefuseUnitUnsafePaths(t *testing.T) {
	for _, o := range []Options{
		{Binary: "/opt/my tools/gpusplit", Config: plan.DefaultConfig},
		{Binary: DefaultBinary, Config: "/etc/gpusplit/$HOME.toml"},
		{Binary: DefaultBinary, Config: "/etc/gpusplit/split\n.toml"},
		{Binary: `/opt/"x"/gpusplit`, Config: plan.DefaultConfig},
		{Binary: "", Config: plan.DefaultConfig},
	} {
		if files, err := Files(nil, o); err == nil {
			t.Errorf("%+v: accepted, wrote\n%v", o, files)
		}
	}
}

func TestPins(t *testing.T) {
	pins, files := demoFiles(t)
	got := map[string]string{}
	for _, p := range pins {
		got[p.Device.String()] = p.Driver
	}
	for _, bus := range []string{"01", "11", "61", "71"} {
		if got["0000:"+bus+":00.0"] != "nvidia" {
			t.Errorf("GPU %s is pinned to %q, want nvidia", bus, got["0000:"+bus+":00.0"])
		}
		if d, ok := got["0000:"+bus+":00.1"]; ok {
			t.Errorf("the audio function of host GPU %s is pinned to %s: it should go to its own driver", bus, d)
		}
	}
	for _, bus := range []string{"81", "91", "e1", "f1"} {
		for _, fn := range []string{".0", ".1"} {
			if got["0000:"+bus+":00"+fn] != "vfio-pci" {
				t.Errorf("%s:00%s is pinned to %q, want vfio-pci", bus, fn, got["0000:"+bus+":00"+fn])
			}
		}
	}
	// Every pin carries its guards: the address and the ids it was made for.
	rule := regexp.MustCompile(`^ACTION=="add", SUBSYSTEM=="pci", KERNEL=="(0000:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])", ATTR\{vendor\}=="0x10de", ATTR\{device\}=="0x(2bb1|22e8)", ATTR\{driver_override\}="(vfio-pci|nvidia)"$`)
	script := regexp.MustCompile(`^pin (0000:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) 0x10de 0x(2bb1|22e8) (vfio-pci|nvidia)$`)
	for _, f := range files {
		var re *regexp.Regexp
		switch f.Path {
		case UdevRule:
			re = rule
		case PinScript:
			re = script
		default:
			continue
		}
		n := 0
		for _, line := range strings.Split(f.Content, "\n") {
			if strings.HasPrefix(line, "ACTION") || strings.HasPrefix(line, "pin ") {
				n++
				if m := re.FindStringSubmatch(line); m == nil || got[m[1]] != m[3] {
					t.Errorf("%s: %q is not a guarded pin of the plan", f.Path, line)
				}
			}
		}
		if n != len(pins) {
			t.Errorf("%s has %d pins, want %d", f.Path, n, len(pins))
		}
	}
}

func TestInstallRemove(t *testing.T) {
	dir := t.TempDir()
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, files := demoFiles(t)
	changes, err := Install(h, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if c.Action != "written" {
			t.Errorf("%s %s on a fresh host", c.Path, c.Action)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, PinScript))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("pin script mode %v, %v", fi.Mode(), err)
	}
	if len(Installed(h)) != 4 {
		t.Errorf("installed %d files", len(Installed(h)))
	}
	again, _ := Install(h, files)
	for _, c := range again {
		if c.Action != "unchanged" {
			t.Errorf("second install: %s %s", c.Path, c.Action)
		}
	}
	removed, err := Remove(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range removed {
		if c.Action != "removed" {
			t.Errorf("remove: %s %s", c.Path, c.Action)
		}
	}
	if len(Installed(h)) != 0 {
		t.Error("files left after remove")
	}
	snap, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Install(snap, files); err == nil || !strings.Contains(err.Error(), "snapshot cannot be changed") {
		t.Errorf("install into a snapshot: %v", err)
	}
}

// Install and remove are all or nothing: each write and rename failed in turn leaves the
// boot files as they were (a previous install, here, with one file changed since), so
// that a boot never meets a rule without its unit.
func TestInstallRemoveFaults(t *testing.T) {
	_, files := demoFiles(t)
	snapshot := func(dir string) string {
		var b strings.Builder
		filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				data, _ := os.ReadFile(p)
				fmt.Fprintf(&b, "%s %v %q\n", p, fi.Mode(), data)
			}
			return nil
		})
		return b.String()
	}
	prepare := func(t *testing.T) (string, *host.Host) {
		dir := t.TempDir()
		h, err := host.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Install(h, files); err != nil {
			t.Fatal(err)
		}
		// An older version of two of them, so that install has something to replace.
		for _, p := range []string{UdevRule, Unit} {
			os.WriteFile(filepath.Join(dir, p), []byte("# older\n"), 0o644)
		}
		return dir, h
	}
	// Install replaces the two changed files (two versions staged, two renames); remove
	// removes all four (four removals, nothing staged).
	for _, tc := range []struct {
		op, step string
		steps    int
	}{{"install", "write", 2}, {"install", "rename", 2}, {"remove", "rename", 4}} {
		op, step := tc.op, tc.step
		for k := 1; k <= tc.steps; k++ {
			t.Run(fmt.Sprintf("%s-%s-%d", op, step, k), func(t *testing.T) {
				dir, h := prepare(t)
				before := snapshot(dir)
				n := 0
				fault = func(s string) error {
					if s == step {
						if n++; n == k {
							return errors.New("injected")
						}
					}
					return nil
				}
				defer func() { fault = nil }()
				var err error
				if op == "install" {
					_, err = Install(h, files)
				} else {
					_, err = Remove(h)
				}
				if err == nil || !strings.Contains(err.Error(), "injected") {
					t.Fatalf("error %v", err)
				}
				if strings.Contains(err.Error(), "by hand") {
					t.Errorf("%v", err)
				}
				if after := snapshot(dir); after != before {
					t.Errorf("files changed:\nbefore\n%s\nafter\n%s", before, after)
				}
			})
		}
	}
}
