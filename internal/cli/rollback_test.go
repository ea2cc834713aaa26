package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// simKernel stands in for the kernel of a fixture tree: it reads the devices and their
// drivers from the tree, then keeps the bindings in memory, following the PCI core's
// rules (probe binds an unbound device to its override, else to the driver that
// matches it), so that apply and rollback run through the command line unchanged.
type simKernel struct {
	sysfs    bind.Sysfs
	mu       sync.Mutex
	driver   map[pci.Address]string
	override map[pci.Address]string
	natural  map[pci.Address]string
	writes   []string
	// With mirror, each binding is also written to the tree, as the kernel shows it:
	// the driver link, driver_override, and the nvidia driver's information file with
	// the minor it gives, the lowest free.
	mirror bool
	root   string
	info   map[pci.Address]string // the information files as the tree had them
}

func newSimKernel(t testing.TB, h *host.Host) *simKernel {
	t.Helper()
	k := &simKernel{sysfs: bind.Sysfs{H: h}, driver: map[pci.Address]string{}, override: map[pci.Address]string{}, natural: map[pci.Address]string{}}
	names, err := h.ReadDir("/sys/bus/pci/devices")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		a, err := pci.ParseAddress(n)
		if err != nil {
			t.Fatal(err)
		}
		d, err := k.sysfs.Driver(a)
		if err != nil {
			t.Fatal(err)
		}
		k.driver[a], k.natural[a] = d, d
	}
	return k
}

// use makes apply and rollback of this test run on k.
func (k *simKernel) use(t testing.TB) {
	saved := openKernel
	t.Cleanup(func() { openKernel = saved })
	openKernel = func(*host.Host) (bind.Kernel, error) { return k, nil }
}

func (k *simKernel) Present(a pci.Address) bool { return k.sysfs.Present(a) }
func (k *simKernel) Driver(a pci.Address) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.driver[a], nil
}
func (k *simKernel) Override(a pci.Address) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.override[a], nil
}
func (k *simKernel) SetOverride(a pci.Address, driver string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writes = append(k.writes, fmt.Sprintf("override %s %q", a, driver))
	k.override[a] = driver
	return k.reflectOverride(a)
}
func (k *simKernel) Unbind(a pci.Address, driver string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writes = append(k.writes, "unbind "+a.String())
	was := k.driver[a]
	k.driver[a] = ""
	return k.reflectUnbind(a, was)
}
func (k *simKernel) Probe(a pci.Address) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writes = append(k.writes, "probe "+a.String())
	if k.driver[a] == "" {
		want := k.natural[a]
		if ov := k.override[a]; ov != "" {
			want = ov
		}
		if want != "none" {
			k.driver[a] = want
			return k.reflectBind(a)
		}
	}
	return nil
}

// mirrorTo makes k write its bindings to the tree at root (see mirror).
func (k *simKernel) mirrorTo(t testing.TB, root string) {
	t.Helper()
	k.mirror, k.root, k.info = true, root, map[pci.Address]string{}
	dir := filepath.Join(root, "proc/driver/nvidia/gpus")
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		a, err := pci.ParseAddress(n.Name())
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, n.Name(), "information"))
		if err != nil {
			t.Fatal(err)
		}
		k.info[a] = string(b)
	}
}

func (k *simKernel) devDir(a pci.Address) string {
	return filepath.Join(k.root, "sys/bus/pci/devices", a.String())
}

func (k *simKernel) infoDir(a pci.Address) string {
	return filepath.Join(k.root, "proc/driver/nvidia/gpus", a.String())
}

// reflectOverride writes a's driver_override to the tree, as the kernel shows it.
func (k *simKernel) reflectOverride(a pci.Address) error {
	if !k.mirror {
		return nil
	}
	ov := k.override[a]
	if ov == "" {
		ov = "(null)"
	}
	return os.WriteFile(filepath.Join(k.devDir(a), "driver_override"), []byte(ov+"\n"), 0o644)
}

// reflectUnbind takes a's driver link away, and its information file when it leaves
// nvidia.
func (k *simKernel) reflectUnbind(a pci.Address, was string) error {
	if !k.mirror || was == "" {
		return nil
	}
	if err := os.Remove(filepath.Join(k.devDir(a), "driver")); err != nil {
		return err
	}
	if was == "nvidia" {
		return os.RemoveAll(k.infoDir(a))
	}
	return nil
}

// reflectBind links a to its driver, and on nvidia writes the information file with
// the minor the driver gives.
func (k *simKernel) reflectBind(a pci.Address) error {
	if !k.mirror {
		return nil
	}
	dev, info := k.devDir(a), k.infoDir(a)
	drv := k.driver[a]
	real, err := filepath.EvalSymlinks(dev)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(real, filepath.Join(k.root, "sys/bus/pci/drivers", drv))
	if err != nil {
		return err
	}
	if err := os.Symlink(rel, filepath.Join(dev, "driver")); err != nil {
		return err
	}
	text, ok := k.info[a]
	if drv != "nvidia" || !ok {
		return nil
	}
	minor := k.freeMinor()
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "Device Minor:") {
			lines[i] = fmt.Sprintf("Device Minor: \t %d", minor)
		}
	}
	if err := os.MkdirAll(info, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(info, "information"), []byte(strings.Join(lines, "\n")), 0o644)
}

// freeMinor is the lowest minor no information file of the tree has.
func (k *simKernel) freeMinor() int {
	used := map[int]bool{}
	dir := filepath.Join(k.root, "proc/driver/nvidia/gpus")
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		b, _ := os.ReadFile(filepath.Join(dir, n.Name(), "information"))
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Device Minor:"); ok {
				var m int
				fmt.Sscan(strings.TrimSpace(v), &m)
				used[m] = true
			}
		}
	}
	n := 0
	for used[n] {
		n++
	}
	return n
}
func (k *simKernel) Loaded(string) bool                 { return true }
func (k *simKernel) Loadable(d string) (string, bool)   { return d, true }
func (k *simKernel) Load(context.Context, string) error { return nil }
func (k *simKernel) VFIOReady(int) bool                 { return true }

func (k *simKernel) state(a string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, _ := pci.ParseAddress(a)
	return k.driver[p] + "/" + k.override[p]
}

// twoGPUs is a small host: two GPUs with their HDMI audio, each pair in its own IOMMU
// group, and the NVMe controller of the boot disk in a group of its own.
func twoGPUs() fakehost.Machine {
	gpu := func(slot uint8, group int) []fakehost.Device {
		return []fakehost.Device{
			{Slot: slot, Func: 0, Vendor: 0x10de, Device: 0x2bb1, SubVendor: 0x10de, SubDevice: 0x204b, Class: 0x030000, Driver: "nvidia", Group: group, Speed: "32.0 GT/s PCIe", Width: 16},
			{Slot: slot, Func: 1, Vendor: 0x10de, Device: 0x22e8, SubVendor: 0x10de, SubDevice: 0x204b, Class: 0x040300, Driver: "snd_hda_intel", Group: group, Speed: "32.0 GT/s PCIe", Width: 16},
		}
	}
	devs := append(gpu(2, 10), gpu(3, 11)...)
	devs = append(devs, fakehost.Device{Slot: 4, Vendor: 0x144d, Device: 0xa80a, Class: 0x010802, Driver: "nvme", Group: 12, Speed: "16.0 GT/s PCIe", Width: 4})
	return fakehost.Machine{
		Nodes:         []fakehost.Node{{ID: 0, CPUs: "0-7"}},
		IOMMU:         true,
		Bridges:       []fakehost.HostBridge{{NUMA: 0, Devices: devs}},
		Drivers:       []string{"vfio-pci"},
		NvidiaVersion: "580.95.05",
		Files: map[string]string{
			"proc/sys/kernel/hostname":       "kpro6\n",
			"proc/sys/kernel/random/boot_id": "0b2f6c1e-5d7a-4c43-9f1e-2a8d3b6e7c10\n",
			"etc/machine-id":                 "5f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f\n",
		},
	}
}

// applied is twoGPUs after apply --vfio moved the second GPU and its audio to vfio-pci,
// on a simulated kernel: the journal is the one apply wrote.
func applied(t *testing.T) (string, *simKernel) {
	t.Helper()
	dir := t.TempDir()
	h, err := twoGPUs().Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := newSimKernel(t, h)
	k.use(t)
	if _, stderr, err := run(t, "--root", dir, "apply", "--vfio", "0000:00:03.0", "--yes"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	if got := k.state("0000:00:03.0") + " " + k.state("0000:00:03.1"); got != "vfio-pci/vfio-pci vfio-pci/vfio-pci" {
		t.Fatalf("after apply: %s", got)
	}
	k.writes = nil
	return dir, k
}

const journalFile = "var/lib/gpusplit/journal.json"

// editJournal changes the journal on disk.
func editJournal(t *testing.T, dir string, edit func(j map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, journalFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	edit(j)
	if b, err = json.Marshal(j); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func devicesOf(j map[string]any) []any { return j["devices"].([]any) }

// The journal of the apply rolls back: both functions of the GPU return to their drivers.
func TestRollbackRestores(t *testing.T) {
	dir, k := applied(t)
	out, stderr, err := run(t, "--root", dir, "rollback", "--yes")
	if err != nil {
		t.Fatalf("rollback: %v\n%s", err, stderr)
	}
	if got := k.state("0000:00:03.0") + " " + k.state("0000:00:03.1"); got != "nvidia/ snd_hda_intel/" {
		t.Errorf("after rollback: %s", got)
	}
	if !strings.Contains(out, "restored 2 devices") {
		t.Errorf("output:\n%s", out)
	}
}

// Each tampered journal is refused, by the real run and by the dry run, naming the
// field with the journal's value and the host's, and nothing is changed.
func TestRollbackRefusesTamperedJournal(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, dir string, k *simKernel)
		want   []string
		final  bool // refused with --force too
	}{
		{"another host", func(t *testing.T, dir string, k *simKernel) {
			writeFile(t, dir, "proc/sys/kernel/hostname", "pve2\n")
		}, []string{`host name: the journal has "kpro6", the host "pve2"`}, false},
		{"another machine", func(t *testing.T, dir string, k *simKernel) {
			writeFile(t, dir, "etc/machine-id", "0123456789abcdef0123456789abcdef\n")
		}, []string{"machine id: the journal has 5f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f, the host 0123456789abcdef0123456789abcdef"}, false},
		{"another boot", func(t *testing.T, dir string, k *simKernel) {
			writeFile(t, dir, "proc/sys/kernel/random/boot_id", "77e0d1c2-0000-4000-8000-000000000001\n")
		}, []string{"boot id: the journal has 0b2f6c1e-5d7a-4c43-9f1e-2a8d3b6e7c10, the host 77e0d1c2-0000-4000-8000-000000000001", "gpusplit status"}, false},
		{"another card", func(t *testing.T, dir string, k *simKernel) {
			writeFile(t, dir, "sys/devices/pci0000:00/0000:00:03.0/device", "0x2684\n")
		}, []string{"0000:00:03.0 vendor:device: the journal has 10de:2bb1, the host 10de:2684"}, true},
		{"a disk controller listed as a GPU's function", func(t *testing.T, dir string, k *simKernel) {
			// Right host, right boot; the entry names the NVMe controller with the GPU's
			// function's ids. Forced, it would go to vfio-pci.
			editJournal(t, dir, func(j map[string]any) {
				j["devices"] = append(devicesOf(j), map[string]any{"device": "0000:00:04.0", "id": "10de:22e8", "class": "0x040300",
					"driver": "vfio-pci", "driver_override": "vfio-pci", "iommu_group": 11, "gpu": "0000:00:03.0", "to": "nvidia"})
			})
		}, []string{"0000:00:04.0 vendor:device: the journal has 10de:22e8, the host 144d:a80a", "0000:00:04.0 role:", "--force sets aside only"}, true},
		{"a journal without identity", func(t *testing.T, dir string, k *simKernel) {
			editJournal(t, dir, func(j map[string]any) {
				for _, f := range []string{"format", "hostname", "machine_id", "boot_id"} {
					delete(j, f)
				}
				j["host"] = "/"
			})
		}, []string{"predates the identity fields"}, false},
		{"the boot disk's controller", func(t *testing.T, dir string, k *simKernel) {
			editJournal(t, dir, func(j map[string]any) {
				j["devices"] = append(devicesOf(j), map[string]any{"device": "0000:00:04.0", "id": "144d:a80a", "class": "0x010802",
					"driver": "", "driver_override": "", "iommu_group": 11, "gpu": "0000:00:03.0", "to": "vfio-pci"})
			})
		}, []string{"0000:00:04.0 role:", "without a driver"}, true},
		{"a driver that climbs", func(t *testing.T, dir string, k *simKernel) {
			editJournal(t, dir, func(j map[string]any) { devicesOf(j)[0].(map[string]any)["driver"] = "../../x" })
		}, []string{`0000:00:03.0 driver: the journal has "../../x"`}, true},
		{"a driver with a newline", func(t *testing.T, dir string, k *simKernel) {
			editJournal(t, dir, func(j map[string]any) { devicesOf(j)[1].(map[string]any)["driver"] = "nvidia\n" })
		}, []string{`0000:00:03.1 driver: the journal has "nvidia\n"`}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, k := applied(t)
			c.tamper(t, dir, k)
			for _, args := range [][]string{{"rollback", "--yes"}, {"rollback", "--dry-run"}, {"rollback", "--yes", "--force"}} {
				if args[len(args)-1] == "--force" && !c.final {
					continue
				}
				_, _, err := run(t, append([]string{"--root", dir}, args...)...)
				if err == nil || !strings.HasPrefix(err.Error(), "nothing was changed") {
					t.Fatalf("%v: got %v, want a refusal", args, err)
				}
				if n := strings.Count(err.Error(), "\n"); n > 1 {
					t.Errorf("%v: the refusal is %d lines, not 2 with the details under -v:\n%v", args, n+1, err)
				}
				full := err.Error() + "\n" + strings.Join(details(err), "\n")
				for _, w := range c.want {
					if !strings.Contains(full, w) {
						t.Errorf("%v: the refusal does not say %q:\n%v", args, w, err)
					}
				}
				if len(k.writes) != 0 {
					t.Errorf("%v: a refused rollback wrote %v", args, k.writes)
				}
			}
			if c.final {
				return
			}
			// --force overrides, says what it overrode, and rolls back.
			_, stderr, err := run(t, "--root", dir, "rollback", "--yes", "--force")
			if err != nil {
				t.Fatalf("--force: %v", err)
			}
			if !strings.Contains(stderr, "warning: --force: ") || !strings.Contains(stderr, c.want[0]) {
				t.Errorf("--force does not say what it overrode:\n%s", stderr)
			}
			if got := k.state("0000:00:03.0"); got != "nvidia/" {
				t.Errorf("after a forced rollback 0000:00:03.0 is %s", got)
			}
		})
	}
}

// A device --devices does not count as a GPU is not rolled back without --force: a
// journal of an apply with --devices needs a rollback with the same --devices.
func TestRollbackRespectsDevices(t *testing.T) {
	dir := t.TempDir()
	h, err := twoGPUs().Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := newSimKernel(t, h)
	k.use(t)
	mustRun(t, "--root", dir, "--devices", "class:0x0108", "apply", "--vfio", "0000:00:04.0", "--yes")
	k.writes = nil
	_, _, err = run(t, "--root", dir, "rollback", "--yes")
	if full := strings.Join(details(err), "\n"); err == nil || !strings.Contains(full, "0000:00:04.0 role:") || !strings.Contains(full, "the same --devices") || len(k.writes) != 0 {
		t.Fatalf("rollback without --devices: %v, wrote %v", err, k.writes)
	}
	mustRun(t, "--root", dir, "--devices", "class:0x0108", "rollback", "--yes")
	if got := k.state("0000:00:04.0"); got != "nvme/" {
		t.Errorf("after rollback with --devices: %s", got)
	}
}

// The dry run shows each device's driver and driver_override now and before the apply,
// so a damaged override is seen for what it is.
func TestRollbackDryRunShowsOverrides(t *testing.T) {
	dir, k := applied(t)
	// What a failed run on a copy left: back on nvidia, with a mangled override.
	a, _ := pci.ParseAddress("0000:00:03.0")
	k.driver[a], k.override[a] = "nvidia", "nvidia\ni"
	out, stderr, err := run(t, "--root", dir, "rollback", "--dry-run")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{
		"0000:00:03.0  nvidia (driver_override \"nvidia\\ni\") → nvidia\n",
		"0000:00:03.1  vfio-pci (driver_override vfio-pci) → snd_hda_intel\n",
		"dry run: nothing was changed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run does not say %q:\n%s", want, out)
		}
	}
	if len(k.writes) != 0 {
		t.Errorf("dry run wrote %v", k.writes)
	}
}

// apply and rollback change nothing under a root that is a copy of a host, or a
// snapshot; a dry run still shows the plan, and says a real run needs the host.
func TestChangesNeedALiveKernel(t *testing.T) {
	dir := t.TempDir()
	if _, err := twoGPUs().Open(dir); err != nil {
		t.Fatal(err)
	}
	override := filepath.Join(dir, "sys/devices/pci0000:00/0000:00:03.0/driver_override")
	before, err := os.ReadFile(override)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "--root", dir, "apply", "--vfio", "0000:00:03.0", "--yes")
	if err == nil || !strings.Contains(err.Error(), dir+" is not a running kernel (its /sys is not a sysfs mount but a copy)") || !strings.HasPrefix(err.Error(), "nothing was changed") {
		t.Errorf("apply on a copy: %v", err)
	}
	if after, _ := os.ReadFile(override); string(after) != string(before) {
		t.Errorf("apply on a copy wrote driver_override: %q", after)
	}
	if _, err := os.Stat(filepath.Join(dir, journalFile)); err == nil {
		t.Error("apply on a copy wrote a journal")
	}
	out, stderr, err := run(t, "--root", dir, "apply", "--vfio", "0000:00:03.0", "--dry-run")
	if err != nil || !strings.Contains(out, "dry run: nothing was changed") || !strings.Contains(stderr, "note: without --dry-run this is refused") {
		t.Errorf("dry run on a copy: %v\n%s%s", err, out, stderr)
	}

	// A journal on the copy (the copy of a host that applied a split) is not rolled back.
	writeFile(t, dir, journalFile, `{"format": 2, "time": "2025-05-01T10:00:00Z", "hostname": "kpro6", "machine_id": "5f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f", "boot_id": "0b2f6c1e-5d7a-4c43-9f1e-2a8d3b6e7c10",
  "devices": [{"device": "0000:00:03.0", "id": "10de:2bb1", "class": "0x030000", "driver": "vfio-pci", "driver_override": "vfio-pci", "iommu_group": 11, "gpu": "0000:00:03.0", "to": "nvidia"}]}`)
	_, _, err = run(t, "--root", dir, "rollback", "--yes")
	if err == nil || !strings.Contains(err.Error(), "is not a running kernel") {
		t.Errorf("rollback on a copy: %v", err)
	}
	if after, _ := os.ReadFile(override); string(after) != string(before) {
		t.Errorf("rollback on a copy wrote driver_override: %q", after)
	}

	_, _, err = run(t, "--root", sampleArchive(t), "apply", "--vfio", "numa:1", "--yes")
	if err == nil || !strings.Contains(err.Error(), "is not a running kernel (it is a snapshot)") {
		t.Errorf("apply on the sample host's snapshot: %v", err)
	}
}
