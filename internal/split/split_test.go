package split

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// sample is a copy of the sample host (a Proxmox node; container 129 holds the NUMA-1
// GPUs through nvidia-persistenced and a python3), in a directory the test may change.
func sample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// change works out the split of --vfio numa:1 on root, with the parts asked for.
func change(t *testing.T, root string, proxmox, boot bool, o Options) *Change {
	t.Helper()
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	choices, err := plan.ParseChoices([]string{"numa:1"})
	if err != nil {
		t.Fatal(err)
	}
	d := plan.ForVFIO(choices)
	d.SyncProxmox, d.Persist = proxmox, boot
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Make(h, inv, p, d, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func parts(c *Change) string {
	var out []string
	for _, d := range c.Drift() {
		out = append(out, d.Part)
	}
	return strings.Join(out, " ")
}

func stopsOf(c *Change, part string) []string {
	var out []string
	for _, s := range c.Stops {
		var st *Stop
		if errors.As(s, &st) && st.Part == part {
			out = append(out, st.Err.Error())
		}
	}
	return out
}

// Each part is in the change only when the desired state asks for it, and each part's
// drift is named.
func TestMakeParts(t *testing.T) {
	root := sample(t)
	if c := change(t, root, false, false, Options{}); parts(c) != "drivers" || c.Proxmox != nil || c.BootState != nil {
		t.Errorf("drivers alone: parts %q, proxmox %v, boot %v", parts(c), c.Proxmox, c.BootState)
	}
	c := change(t, root, true, true, Options{})
	if got := parts(c); got != "drivers proxmox boot" {
		t.Errorf("every part: %q", got)
	}
	var paths []string
	for _, ch := range c.Proxmox.Changes {
		paths = append(paths, ch.Path)
	}
	if got := strings.Join(paths, " "); got != "/etc/pve/mapping/pci.cfg /etc/pve/lxc/129.conf /etc/pve/qemu-server/131.conf" {
		t.Errorf("Proxmox's files: %s", got)
	}
	if len(c.BootState) != len(persist.Paths) {
		t.Errorf("boot files: %+v", c.BootState)
	}
}

// Every reason apply would stop is found before anything is written, by part: the
// holders of the GPUs (each named once with the way to release it) and a boot unit
// that could not run the installed binary (the copy has none).
func TestMakeStops(t *testing.T) {
	c := change(t, sample(t), true, true, Options{})
	drivers := stopsOf(c, "drivers")
	if len(drivers) != 1 || !strings.HasPrefix(drivers[0], "in use: 0000:81:00.0, 0000:91:00.0, 0000:e1:00.0, 0000:f1:00.0; release what holds them") ||
		strings.Count(drivers[0], "python3[48213] in CT 129") != 1 {
		t.Errorf("drivers' stops: %q", drivers)
	}
	if boot := stopsOf(c, "boot"); len(boot) != 1 || !strings.Contains(boot[0], persist.DefaultBinary) {
		t.Errorf("boot's stops: %q", boot)
	}
	msg := (&StopError{Stops: c.Stops}).Error()
	if !strings.HasPrefix(msg, "nothing was changed:\n  drivers: in use:") || !strings.Contains(msg, "\n  boot: ") {
		t.Errorf("StopError:\n%s", msg)
	}
}

// A split from --vfio carries its desired state file with the boot files, but never
// replaces one a person wrote; one --vfio wrote before it may.
func TestMakeKeepsAPersonsConfig(t *testing.T) {
	root := sample(t)
	cfg := filepath.Join(root, plan.DefaultConfig)
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	vfio := persist.File{Path: plan.DefaultConfig, Mode: 0o644, Content: persist.VFIOConfig("", []string{"numa:1"}, false)}
	for _, c := range []struct {
		now  string
		stop bool
	}{
		{"[[group]]\nname = \"mine\"\nselect = [\"numa:0\"]\ndriver = \"vfio-pci\"\n", true},
		{persist.VFIOConfig("", []string{"numa:0"}, false), false},
		{"# Written by gpusplit persist install --vfio numa:0\n[[group]]\n", false},
	} {
		if err := os.WriteFile(cfg, []byte(c.now), 0o644); err != nil {
			t.Fatal(err)
		}
		// The caller words each stop (Options.Word), keeping what it wraps.
		word := func(err error) error { return fmt.Errorf("%w, worded", err) }
		ch := change(t, root, false, true, Options{Config: &vfio, Word: word})
		var ce *ConfigExistsError
		if got := errors.As(errors.Join(ch.Stops...), &ce); got != c.stop {
			t.Errorf("over %q: stop %v, want %v (%v)", c.now, got, c.stop, ch.Stops)
		}
		for _, s := range ch.Stops {
			if !strings.HasSuffix(s.Error(), ", worded") {
				t.Errorf("over %q: the stop is not worded: %v", c.now, s)
			}
		}
		if c.stop && !slices.ContainsFunc(ch.Stops, func(s error) bool { return s.Error() == "boot: "+ce.Error()+", worded" }) {
			t.Errorf("over %q: no worded stop of the file: %v", c.now, ch.Stops)
		}
		if ch.BootFiles[0].Path != plan.DefaultConfig {
			t.Errorf("the desired state file is not the first boot file: %+v", ch.BootFiles)
		}
	}
}

// What was shown is what apply makes: a Proxmox file changed meanwhile makes the change
// worked out again under the lock differ, and says which.
func TestChanged(t *testing.T) {
	root := sample(t)
	shown := change(t, root, true, false, Options{})
	if got := Changed(shown, change(t, root, true, false, Options{})); len(got) != 0 {
		t.Fatalf("the same host: %q", got)
	}
	ct := filepath.Join(root, "etc/pve/nodes/kpro6/lxc/129.conf")
	b, err := os.ReadFile(ct)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ct, append(b, "dev13: /dev/nvidia5,gid=44,mode=0666\n"...), 0o640); err != nil {
		t.Fatal(err)
	}
	got := Changed(shown, change(t, root, true, false, Options{}))
	if len(got) != 1 || got[0] != "/etc/pve/lxc/129.conf changed since the change was shown" {
		t.Errorf("after the container changed: %q", got)
	}
}
