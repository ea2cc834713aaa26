package bind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/proc"
)

// fakeKernel follows the PCI core's rules for driver_override, unbind and drivers_probe:
// probe binds an unbound device to its override if set (nothing if that driver is not
// loaded, as with "none"), else to the driver that matches it.
type fakeKernel struct {
	mu       sync.Mutex
	devs     map[pci.Address]*fakeDev
	loaded   map[string]bool
	modules  map[string]bool // loadable
	hang     map[pci.Address]chan struct{}
	failOn   map[pci.Address]string // "override", "probe": the step that fails
	vanishOn map[pci.Address]bool   // gone once its override is written
	// silentOn are devices whose probe for vfio-pci reports success and binds nothing,
	// as when vfio-pci's probe refuses the device (a group it cannot take): the write
	// to drivers_probe returns without error all the same.
	silentOn map[pci.Address]bool
	// noNode are IOMMU groups whose /dev/vfio/<group> never appears, as when udev or
	// the vfio module's device creation fails, though the devices sit on vfio-pci.
	noNode map[int]bool
	writes []string
	// delay is how long each driver_override write takes, outside the lock.
	delay time.Duration
	// onWrite, when set, is called after each write the kernel sees (driver_override,
	// unbind, drivers_probe, a module load), with its number from 1 and the write, under
	// the fake's lock, whether the write succeeded or not.
	onWrite func(n int, write string)
}

type fakeDev struct {
	driver, override, natural string
	group                     int
}

func newFake() *fakeKernel {
	return &fakeKernel{
		devs: map[pci.Address]*fakeDev{}, loaded: map[string]bool{"nvidia": true, "snd_hda_intel": true, "vfio-pci": true},
		modules: map[string]bool{}, hang: map[pci.Address]chan struct{}{}, failOn: map[pci.Address]string{}, vanishOn: map[pci.Address]bool{},
		silentOn: map[pci.Address]bool{}, noNode: map[int]bool{},
	}
}

// wrote calls onWrite for the last write recorded; callers hold the lock.
func (f *fakeKernel) wrote() {
	if f.onWrite != nil {
		f.onWrite(len(f.writes), f.writes[len(f.writes)-1])
	}
}

func (f *fakeKernel) add(addr string, driver string, group int) pci.Address {
	a, err := pci.ParseAddress(addr)
	if err != nil {
		panic(err)
	}
	f.devs[a] = &fakeDev{driver: driver, natural: driver, group: group}
	return a
}

func (f *fakeKernel) dev(a pci.Address) (*fakeDev, error) {
	d, ok := f.devs[a]
	if !ok {
		return nil, fmt.Errorf("no device %s", a)
	}
	return d, nil
}

func (f *fakeKernel) Present(a pci.Address) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.devs[a]
	return ok
}

func (f *fakeKernel) Driver(a pci.Address) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.dev(a)
	if err != nil {
		return "", err
	}
	return d.driver, nil
}

func (f *fakeKernel) Override(a pci.Address) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.dev(a)
	if err != nil {
		return "", err
	}
	return d.override, nil
}

func (f *fakeKernel) SetOverride(a pci.Address, driver string) error {
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, fmt.Sprintf("override %s %q", a, driver))
	defer f.wrote()
	d, err := f.dev(a)
	if err != nil {
		return err
	}
	if f.failOn[a] == "override" {
		return errors.New("write error")
	}
	d.override = driver
	if f.vanishOn[a] {
		delete(f.devs, a)
	}
	return nil
}

func (f *fakeKernel) Unbind(a pci.Address, driver string) error {
	f.mu.Lock()
	hang := f.hang[a]
	f.writes = append(f.writes, fmt.Sprintf("unbind %s %s", a, driver))
	f.mu.Unlock()
	if hang != nil {
		<-hang
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.wrote()
	d, err := f.dev(a)
	if err != nil {
		return err
	}
	if d.driver != driver {
		return errors.New("no such device")
	}
	d.driver = ""
	return nil
}

func (f *fakeKernel) Probe(a pci.Address) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, fmt.Sprintf("probe %s", a))
	defer f.wrote()
	d, err := f.dev(a)
	if err != nil {
		return err
	}
	if f.failOn[a] == "probe" && d.override == plan.VFIO {
		return errors.New("probe failed")
	}
	if d.driver != "" || (f.silentOn[a] && d.override == plan.VFIO) {
		return nil
	}
	want := d.natural
	if d.override != "" {
		want = d.override
	}
	if f.loaded[want] {
		d.driver = want
	}
	return nil
}

func (f *fakeKernel) Loaded(driver string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loaded[driver]
}

func (f *fakeKernel) Loadable(driver string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return driver, f.modules[driver]
}

func (f *fakeKernel) Load(_ context.Context, driver string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, "load "+driver)
	defer f.wrote()
	f.loaded[driver] = true
	return nil
}

func (f *fakeKernel) VFIOReady(group int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noNode[group] {
		return false
	}
	for _, d := range f.devs {
		if d.group == group && d.driver == plan.VFIO {
			return true
		}
	}
	return false
}

func (f *fakeKernel) state(a pci.Address) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.devs[a]
	if !ok {
		return "gone"
	}
	return d.driver + "/" + d.override
}

// fourGPUs is the NUMA-1 half of the reference host: four GPUs with audio functions,
// each pair in its own IOMMU group, and the plan that sends them to vfio-pci.
func fourGPUs() (*fakeKernel, *plan.Plan) {
	f := newFake()
	p := &plan.Plan{}
	for i, bus := range []string{"81", "91", "e1", "f1"} {
		group := 72 + i
		gpu := f.add("0000:"+bus+":00.0", "nvidia", group)
		audio := f.add("0000:"+bus+":00.1", "snd_hda_intel", group)
		p.Moves = append(p.Moves,
			plan.Move{Device: gpu, Role: plan.RoleGPU, GPU: gpu, IOMMUGroup: group, NUMANode: 1, From: "nvidia", To: plan.VFIO},
			plan.Move{Device: audio, Role: plan.RoleFunction, GPU: gpu, IOMMUGroup: group, NUMANode: 1, From: "snd_hda_intel", To: plan.VFIO})
	}
	return f, p
}

// tempHost is a directory root that says who it is, as a live host does.
func tempHost(t *testing.T) (*host.Host, string) {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"proc/sys/kernel/hostname":       "kpro6\n",
		"proc/sys/kernel/random/boot_id": "0b2f6c1e-5d7a-4c43-9f1e-2a8d3b6e7c10\n",
		"etc/machine-id":                 "5f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f\n",
	})
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h, dir
}

// heldLocks are the locks lockOf took, by host: one test may run several changes of one
// host, as a command does under one lock.
var heldLocks sync.Map

// lockOf is h's driver lock, taken once per test and host and let go when the test ends.
func lockOf(t *testing.T, h *host.Host) *Lock {
	t.Helper()
	if l, ok := heldLocks.Load(h); ok {
		return l.(*Lock)
	}
	l, err := TakeLock(h, 0)
	if err != nil {
		t.Fatal(err)
	}
	heldLocks.Store(h, l)
	t.Cleanup(func() { heldLocks.Delete(h); l.Unlock() })
	return l
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// deviceFiles writes the ids sysfs shows for a device.
func deviceFiles(t *testing.T, dir string, a pci.Address, vendor, device, class string) {
	t.Helper()
	base := "sys/bus/pci/devices/" + a.String() + "/"
	writeFiles(t, dir, map[string]string{base + "vendor": vendor + "\n", base + "device": device + "\n", base + "class": class + "\n"})
}

// gpuHost is tempHost with the ids of fourGPUs' devices: RTX PRO 6000 GPUs and their
// HDMI audio functions.
func gpuHost(t *testing.T, f *fakeKernel) (*host.Host, string) {
	t.Helper()
	h, dir := tempHost(t)
	for a := range f.devs {
		if a.Function == 0 {
			deviceFiles(t, dir, a, "0x10de", "0x2bb1", "0x030000")
		} else {
			deviceFiles(t, dir, a, "0x10de", "0x22e8", "0x040300")
		}
	}
	return h, dir
}

// scopeOf makes every device of the plan movable, as the inventory would.
func scopeOf(p *plan.Plan) Scope {
	s := Scope{Movable: map[pci.Address]bool{}}
	for _, m := range p.Moves {
		s.Movable[m.Device] = true
	}
	return s
}

// fast bounds the waits of the fake kernel's binds, which return at once: short enough
// that the tests of a bind that hangs end soon, long enough that a goroutine left
// unscheduled by the race detector on a loaded machine is not taken for a hang (200 ms
// was, once in a while).
var fast = Options{UnbindTimeout: 2 * time.Second, BindTimeout: 2 * time.Second}

func TestApplyAndRollback(t *testing.T) {
	f, p := fourGPUs()
	h, dir := gpuHost(t, f)
	var events []Event
	var mu sync.Mutex
	opts := fast
	opts.Progress = func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
	res, err := Apply(context.Background(), lockOf(t, h), f, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Moved) != 8 {
		t.Errorf("moved %d devices, want 8", len(res.Moved))
	}
	for _, m := range p.Moves {
		if got := f.state(m.Device); got != "vfio-pci/vfio-pci" {
			t.Errorf("%s is %s, want on vfio-pci, pinned", m.Device, got)
		}
	}
	var done int
	for _, e := range events {
		if e.Step == StepDone {
			done++
		}
	}
	if done != 8 {
		t.Errorf("%d done events, want 8", done)
	}
	// The journal holds the prior state; rollback restores it.
	j, err := ReadJournal(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Devices) != 8 || j.Devices[0].Driver != "nvidia" || j.Devices[1].Driver != "snd_hda_intel" {
		t.Fatalf("journal %+v", j)
	}
	if _, err := os.Stat(filepath.Join(dir, "var/lib/gpusplit/journal.json")); err != nil {
		t.Errorf("journal not under the root: %v", err)
	}
	res, err = Rollback(context.Background(), lockOf(t, h), f, j, scopeOf(p), nil, fast)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Restored) != 8 {
		t.Errorf("restored %v", res.Restored)
	}
	for _, m := range p.Moves {
		if got, want := f.state(m.Device), m.From+"/"; got != want {
			t.Errorf("after rollback %s is %s, want %s", m.Device, got, want)
		}
	}
}

func TestApplyRefusesHeldDevice(t *testing.T) {
	f, p := fourGPUs()
	p.Moves[4].Holders = []holders.Holder{holders.ProcessHolder(proc.Process{PID: 48213, Command: "python3", Container: 129})}
	h, dir := gpuHost(t, f)
	_, err := Apply(context.Background(), lockOf(t, h), f, p, fast)
	var held *HeldError
	if !errors.As(err, &held) || !strings.Contains(err.Error(), "0000:e1:00.0 is held by python3 (pid 48213) in container 129") || !strings.HasPrefix(err.Error(), "nothing was changed") {
		t.Fatalf("got %v, want a HeldError naming e1:00.0 and its holder", err)
	}
	if len(f.writes) != 0 {
		t.Errorf("a refused run wrote %v", f.writes)
	}
	if _, err := os.Stat(filepath.Join(dir, "var/lib/gpusplit/journal.json")); err == nil {
		t.Error("a refused run wrote a journal")
	}
}

func TestApplyChecksDrivers(t *testing.T) {
	f, p := fourGPUs()
	delete(f.loaded, plan.VFIO)
	h, _ := gpuHost(t, f)
	_, err := Apply(context.Background(), lockOf(t, h), f, p, fast)
	if err == nil || !strings.Contains(err.Error(), "driver vfio-pci is not loaded") || len(f.writes) != 0 {
		t.Fatalf("missing driver: %v, writes %v", err, f.writes)
	}
	// A loadable module is loaded first, then the devices move.
	f.modules[plan.VFIO] = true
	if _, err := Apply(context.Background(), lockOf(t, h), f, p, fast); err != nil {
		t.Fatal(err)
	}
	if f.writes[0] != "load vfio-pci" {
		t.Errorf("first write %q, want the module load", f.writes[0])
	}
}

// A failure half-way puts every device touched back as it was. A bind that reports
// success is not taken at its word: the device must show on its target, and for
// vfio-pci its group's /dev/vfio node must exist, or the run fails and is put back.
func TestApplyFailureRollsBack(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(f *fakeKernel, a pci.Address)
		want  string // in the error
		// bad is the state f1:00.0 is left in ("" for back as it was), and restored
		// how many devices are put back: the seven touched, less one the run cannot.
		bad      string
		restored int
	}{
		{"device vanishes", func(f *fakeKernel, a pci.Address) { f.vanishOn[a] = true }, "is gone", "gone", 6},
		{"bind fails", func(f *fakeKernel, a pci.Address) { f.failOn[a] = "probe" }, "probe failed", "", 7},
		// The unbind is pending: nothing more is written to the device.
		{"unbind hangs", func(f *fakeKernel, a pci.Address) { f.hang[a] = make(chan struct{}) }, "did not finish within", "nvidia/vfio-pci", 6},
		{"bind reports success, binds nothing", func(f *fakeKernel, a pci.Address) { f.silentOn[a] = true },
			"0000:f1:00.0 did not bind to vfio-pci: its driver is none", "", 7},
		{"no /dev/vfio node", func(f *fakeKernel, a pci.Address) { f.noNode[75] = true },
			"0000:f1:00.0 is on vfio-pci but /dev/vfio/75 did not appear", "", 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, p := fourGPUs()
			bad := p.Moves[6].Device // f1:00.0, in group 75
			c.setup(f, bad)
			h, _ := gpuHost(t, f)
			var mu sync.Mutex
			var failed []pci.Address
			opts := fast
			opts.Parallel = 1 // the groups in order: three move, the fourth fails
			opts.Progress = func(e Event) {
				if e.Step == StepFailed {
					mu.Lock()
					failed = append(failed, e.Device)
					mu.Unlock()
				}
			}
			res, err := Apply(context.Background(), lockOf(t, h), f, p, opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if len(failed) != 1 || failed[0] != bad {
				t.Errorf("failed events for %v, want one for %s", failed, bad)
			}
			for _, m := range p.Moves {
				want := m.From + "/"
				if m.Device == bad && c.bad != "" {
					want = c.bad
				}
				if got := f.state(m.Device); got != want {
					t.Errorf("%s is %s after the failure, want %s", m.Device, got, want)
				}
			}
			// The devices touched are put back, the last first: f1:00.0, then the
			// three groups before it; f1:00.1 was never touched.
			var order []string
			for i := 6; i >= 0; i-- {
				if a := p.Moves[i].Device; a != bad || c.restored == 7 {
					order = append(order, a.String())
				}
			}
			var got []string
			for _, a := range res.Restored {
				got = append(got, a.String())
			}
			if len(res.Moved) != 0 || len(res.Restored) != c.restored || strings.Join(got, " ") != strings.Join(order, " ") {
				t.Errorf("moved %v restored %v, want none moved and %v restored", res.Moved, got, order)
			}
			if c.restored == 7 && len(res.Unrestored) != 0 {
				t.Errorf("unrestored %v, want none", res.Unrestored)
			}
			if c.restored == 6 && (len(res.Unrestored) != 1 || res.Unrestored[bad] == nil) {
				t.Errorf("unrestored %v, want %s", res.Unrestored, bad)
			}
			if ch := f.hang[bad]; ch != nil {
				close(ch)
			}
		})
	}
}

// The lock: one holder at a time, named to the next; a bounded wait that ends when the
// holder lets go; a directory and file only root can open, so that no other user can
// hold it; a lock file of another owner refused.
func TestLock(t *testing.T) {
	h, dir := tempHost(t)
	l, err := TakeLock(h, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TakeLock(h, 0); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("second lock: %v", err)
	}
	if _, err := TakeLock(h, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "has not let go for 300ms") {
		t.Errorf("a wait that ends: %v", err)
	}
	for p, want := range map[string]os.FileMode{"run/gpusplit": 0o700 | os.ModeDir, "run/gpusplit/driver.lock": 0o600} {
		if fi, err := os.Lstat(filepath.Join(dir, p)); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want %v", p, fi.Mode(), err, want)
		}
	}
	// Another user cannot open it, for reading either: flock works on any descriptor.
	nobody := exec.Command("/bin/sh", "-c", "exec 3<"+filepath.Join(dir, "run/gpusplit/driver.lock"))
	nobody.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := nobody.CombinedOutput(); err == nil {
		t.Errorf("user nobody opened the lock (this test needs root to act as nobody): %s", out)
	}
	// A waiting run takes it once the holder lets go.
	go func() { time.Sleep(200 * time.Millisecond); l.Unlock() }()
	l2, err := TakeLock(h, 5*time.Second)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l2.Unlock()
	// An earlier gpusplit's looser directory is tightened.
	os.Chmod(filepath.Join(dir, "run/gpusplit"), 0o755)
	l3, err := TakeLock(h, 0)
	if err != nil {
		t.Fatal(err)
	}
	l3.Unlock()
	if fi, _ := os.Stat(filepath.Join(dir, "run/gpusplit")); fi.Mode().Perm() != 0o700 {
		t.Errorf("the directory stayed %v", fi.Mode())
	}
	// A lock file that is not the caller's is refused, and so is a link.
	os.Chown(filepath.Join(dir, "run/gpusplit/driver.lock"), 65534, 65534)
	if _, err := TakeLock(h, 0); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("another user's lock file: %v", err)
	}
	os.Remove(filepath.Join(dir, "run/gpusplit/driver.lock"))
	os.Symlink("/tmp/elsewhere", filepath.Join(dir, "run/gpusplit/driver.lock"))
	if _, err := TakeLock(h, 0); err == nil {
		t.Error("a link for a lock file was followed")
	}
}

// A change runs only under the lock.
func TestApplyNeedsTheLock(t *testing.T) {
	f, p := fourGPUs()
	_, err := Apply(context.Background(), nil, f, p, fast)
	if err == nil || !strings.Contains(err.Error(), "lock is not held") || len(f.writes) != 0 {
		t.Errorf("without the lock: %v, writes %v", err, f.writes)
	}
}

func TestApplyOnSnapshotRefused(t *testing.T) {
	h, err := host.OpenArchive("snap", strings.NewReader(""))
	if err == nil {
		_, err = TakeLock(h, 0)
	}
	if err == nil {
		t.Fatal("locking a snapshot succeeded")
	}
}

func TestReadJournalErrors(t *testing.T) {
	h, dir := tempHost(t)
	if _, err := ReadJournal(h); err == nil || !strings.Contains(err.Error(), "nothing to roll back") {
		t.Errorf("no journal: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, "var/lib/gpusplit"), 0o755)
	os.WriteFile(filepath.Join(dir, "var/lib/gpusplit/journal.json"), []byte("{not json"), 0o644)
	if _, err := ReadJournal(h); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged journal: %v", err)
	}
}

func TestWriteErrorsSayWhatToDo(t *testing.T) {
	err := explainWrite("/sys/bus/pci/drivers_probe", &os.PathError{Op: "open", Path: "/x", Err: os.ErrPermission})
	if !strings.Contains(err.Error(), "needs root") || !strings.Contains(err.Error(), "/sys/bus/pci/drivers_probe") {
		t.Errorf("permission: %v", err)
	}
	// A real write into a directory root: the value lands in the file, under the root.
	h, dir := tempHost(t)
	os.MkdirAll(filepath.Join(dir, "sys/bus/pci"), 0o755)
	os.WriteFile(filepath.Join(dir, "sys/bus/pci/drivers_probe"), nil, 0o644)
	a, _ := pci.ParseAddress("0000:81:00.0")
	if err := (Sysfs{H: h}).Probe(a); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sys/bus/pci/drivers_probe")); string(b) != "0000:81:00.0" {
		t.Errorf("drivers_probe holds %q", b)
	}
	if err := (Sysfs{H: h}).SetOverride(a, "vfio-pci"); err == nil || !strings.Contains(err.Error(), "driver_override") {
		t.Errorf("override of a missing device: %v", err)
	}
}

// The journal says which host, which boot and which cards it is of.
func TestApplyJournalsIdentity(t *testing.T) {
	f, p := fourGPUs()
	h, _ := gpuHost(t, f)
	if _, err := Apply(context.Background(), lockOf(t, h), f, p, fast); err != nil {
		t.Fatal(err)
	}
	j, err := ReadJournal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{Hostname: "kpro6", MachineID: "5f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f", BootID: "0b2f6c1e-5d7a-4c43-9f1e-2a8d3b6e7c10"}
	if j.Format != JournalFormat || j.Identity != want {
		t.Errorf("journal format %d identity %+v, want %d %+v", j.Format, j.Identity, JournalFormat, want)
	}
	for _, d := range j.Devices {
		id, class := "10de:2bb1", "0x030000"
		if d.Device.Function == 1 {
			id, class = "10de:22e8", "0x040300"
		}
		if d.ID != id || d.Class != class {
			t.Errorf("%s recorded as %s %s, want %s %s", d.Device, d.ID, d.Class, id, class)
		}
	}
}

// A host that cannot say who it is gets no journal, and nothing moves.
func TestApplyNeedsIdentity(t *testing.T) {
	for _, missing := range []string{"proc/sys/kernel/random/boot_id", "proc/sys/kernel/hostname", "sys/bus/pci/devices/0000:e1:00.1/class"} {
		t.Run(missing, func(t *testing.T) {
			f, p := fourGPUs()
			h, dir := gpuHost(t, f)
			os.Remove(filepath.Join(dir, missing))
			_, err := Apply(context.Background(), lockOf(t, h), f, p, fast)
			if err == nil || !strings.HasPrefix(err.Error(), "nothing was changed") {
				t.Fatalf("got %v, want a refusal", err)
			}
			if len(f.writes) != 0 {
				t.Errorf("wrote %v", f.writes)
			}
			if _, err := os.Stat(filepath.Join(dir, "var/lib/gpusplit/journal.json")); err == nil {
				t.Error("wrote a journal")
			}
		})
	}
	// Without /etc/machine-id (an initramfs) the journal records none.
	f, p := fourGPUs()
	h, dir := gpuHost(t, f)
	os.Remove(filepath.Join(dir, "etc/machine-id"))
	if _, err := Apply(context.Background(), lockOf(t, h), f, p, fast); err != nil {
		t.Fatal(err)
	}
	if j, err := ReadJournal(h); err != nil || j.MachineID != "" {
		t.Errorf("journal %+v %v", j, err)
	}
}

// appliedHost is fourGPUs applied on a host with a disk controller beside the GPUs:
// the state a rollback starts from.
func appliedHost(t *testing.T) (*fakeKernel, *plan.Plan, *host.Host, string, *Journal) {
	t.Helper()
	f, p := fourGPUs()
	nvme := f.add("0000:01:00.0", "nvme", 5)
	f.loaded["nvme"] = true
	h, dir := gpuHost(t, f)
	deviceFiles(t, dir, nvme, "0x144d", "0xa80a", "0x010802")
	os.MkdirAll(filepath.Join(dir, "sys/bus/pci/drivers/nvme"), 0o755)
	if _, err := Apply(context.Background(), lockOf(t, h), f, p, fast); err != nil {
		t.Fatal(err)
	}
	j, err := ReadJournal(h)
	if err != nil {
		t.Fatal(err)
	}
	f.writes = nil
	return f, p, h, dir, j
}

func mustAddr(s string) pci.Address {
	a, err := pci.ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

// A journal that does not describe this host as it is now is refused with every field
// named, the journal's value and the host's, and nothing changes; --force sets aside the
// host, the boot and a device that is gone, never a device's ids, its role or a driver.
func TestRollbackRefusesUntrustedJournal(t *testing.T) {
	nvme := mustAddr("0000:01:00.0")
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, j *Journal, dir string, f *fakeKernel)
		want   []string // in the error
		final  bool     // refused even when forced
		way    Way      // a problem's way out, NoWay for none to check
	}{
		{"another host", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			writeFiles(t, dir, map[string]string{"proc/sys/kernel/hostname": "pve2\n", "etc/machine-id": "0123456789abcdef0123456789abcdef\n"})
		}, []string{`host name: the journal has "kpro6", the host "pve2"`, "machine id: the journal has 5f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f, the host 0123456789abcdef0123456789abcdef"}, false, ForceIfRenamed},
		{"another boot", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			writeFiles(t, dir, map[string]string{"proc/sys/kernel/random/boot_id": "77e0d1c2-0000-4000-8000-000000000001\n"})
		}, []string{"boot id: the journal has 0b2f6c1e-5d7a-4c43-9f1e-2a8d3b6e7c10, the host 77e0d1c2-0000-4000-8000-000000000001", "rebooted", "gpusplit apply"}, false, NoWay},
		{"another card", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			deviceFiles(t, dir, mustAddr("0000:91:00.0"), "0x10de", "0x2684", "0x030000")
		}, []string{"0000:91:00.0 vendor:device: the journal has 10de:2bb1, the host 10de:2684"}, true, NoWay},
		{"another class", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			deviceFiles(t, dir, mustAddr("0000:91:00.1"), "0x10de", "0x22e8", "0x0c0330")
		}, []string{"0000:91:00.1 class: the journal has 0x040300, the host 0x0c0330"}, true, NoWay},
		{"a device gone", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			delete(f.devs, mustAddr("0000:f1:00.1"))
		}, []string{"0000:f1:00.1 device: the journal has present, the host absent"}, false, ForceTheOthers},
		{"older journal", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			j.Format, j.Identity = 0, Identity{}
			for i := range j.Devices {
				j.Devices[i].ID, j.Devices[i].Class = "", ""
			}
		}, []string{"format: the journal has none", "predates the identity fields"}, false, ForceIfNotRebooted},
		{"a disk controller bound to vfio-pci", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			f.devs[nvme].driver = plan.VFIO
			j.Devices = append(j.Devices, Prior{Device: nvme, ID: "144d:a80a", Class: "0x010802", Driver: "nvme", IOMMUGroup: 5, GPU: mustAddr("0000:81:00.0")})
		}, []string{"0000:01:00.0 role: the journal has moved with GPU 0000:81:00.0, the host not a GPU"}, true, SameDevices},
		{"a NIC listed with a GPU's ids", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			// The journal of the right host and boot, naming the host's NIC as a
			// GPU's function, with the GPU's ids: forced, it would go to vfio-pci.
			f.add("0000:02:00.0", "ixgbe", 6)
			deviceFiles(t, dir, mustAddr("0000:02:00.0"), "0x8086", "0x10fb", "0x020000")
			j.Devices = append(j.Devices, Prior{Device: mustAddr("0000:02:00.0"), ID: "10de:22e8", Class: "0x040300", Driver: plan.VFIO, IOMMUGroup: 6, GPU: mustAddr("0000:81:00.0")})
		}, []string{"0000:02:00.0 vendor:device: the journal has 10de:22e8, the host 8086:10fb", "0000:02:00.0 role:"}, true, SameDevices},
		{"the boot disk unbound", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			j.Devices = append(j.Devices, Prior{Device: nvme, ID: "144d:a80a", Class: "0x010802", Driver: "", IOMMUGroup: 5, GPU: mustAddr("0000:81:00.0")})
		}, []string{"0000:01:00.0 role:", "without a driver"}, true, SameDevices},
		{"a driver that climbs", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			j.Devices[0].Driver = "../../x"
		}, []string{`0000:81:00.0 driver: the journal has "../../x", the host on vfio-pci`, "'/'"}, true, NoWay},
		{"a driver with a newline", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			j.Devices[2].Driver = "nvidia\n"
		}, []string{`0000:91:00.0 driver: the journal has "nvidia\n"`, "white space"}, true, NoWay},
		{"an override with a newline", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			j.Devices[3].Override = "vfio-pci\nnvidia"
		}, []string{`0000:91:00.1 driver_override: the journal has "vfio-pci\nnvidia"`}, true, NoWay},
		{"a device twice", func(t *testing.T, j *Journal, dir string, f *fakeKernel) {
			d := j.Devices[0]
			d.Driver = "nouveau"
			j.Devices = append(j.Devices, d)
		}, []string{"0000:81:00.0 entry: the journal has two entries"}, true, NoWay},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, force := range []bool{false, true} {
				f, p, h, dir, j := appliedHost(t)
				c.tamper(t, j, dir, f)
				before := map[pci.Address]string{}
				for a := range f.devs {
					before[a] = f.state(a)
				}
				s := scopeOf(p)
				s.Force = force
				res, err := Rollback(context.Background(), lockOf(t, h), f, j, s, nil, fast)
				if !force || c.final {
					var ue *UntrustedError
					if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "nothing was changed") {
						t.Fatalf("force %v: got %v, want a refusal", force, err)
					}
					// The message is one line; each field and why are its problems,
					// and the command line words the ways out.
					if strings.Contains(err.Error(), "\n") {
						t.Errorf("force %v: the refusal runs past a line:\n%v", force, err)
					}
					if ue.Forcible() != (!force && !c.final) {
						t.Errorf("force %v: forcible %v, want %v", force, ue.Forcible(), !force && !c.final)
					}
					full := err.Error() + "\n" + problemsText(ue)
					for _, w := range c.want {
						if !strings.Contains(full, w) {
							t.Errorf("force %v: the refusal does not say %q:\n%v", force, w, full)
						}
					}
					if c.way != NoWay && !slices.ContainsFunc(ue.Problems, func(p Problem) bool { return p.Way == c.way }) {
						t.Errorf("force %v: no problem has the way out %d: %+v", force, c.way, ue.Problems)
					}
					if len(f.writes) != 0 || len(res.Restored) != 0 {
						t.Errorf("force %v: a refused rollback wrote %v", force, f.writes)
					}
					for a, st := range before {
						if f.state(a) != st {
							t.Errorf("force %v: %s went from %s to %s", force, a, st, f.state(a))
						}
					}
					continue
				}
				// Forced: what is still there goes back; a device that is gone is reported.
				if c.name == "a device gone" {
					if err == nil || len(res.Unrestored) != 1 {
						t.Errorf("forced with a device gone: %v, unrestored %v", err, res.Unrestored)
					}
				} else if err != nil {
					t.Fatalf("forced: %v", err)
				}
				for _, m := range p.Moves {
					if _, ok := f.devs[m.Device]; ok && f.state(m.Device) != m.From+"/" {
						t.Errorf("forced: %s is %s, want %s", m.Device, f.state(m.Device), m.From+"/")
					}
				}
				if c.name == "a disk controller bound to vfio-pci" && f.state(nvme) != "nvme/" {
					t.Errorf("forced: the disk controller is %s, want back on nvme", f.state(nvme))
				}
			}
		})
	}
}

// The journal of the apply passes the checks: the GPUs, their functions and unbound
// devices ("" in the journal) go back.
func TestRollbackOfUnboundGPU(t *testing.T) {
	f, p := fourGPUs()
	a := p.Moves[0].Device
	f.devs[a].driver = ""
	p.Moves[0].From = ""
	h, _ := gpuHost(t, f)
	if _, err := Apply(context.Background(), lockOf(t, h), f, p, fast); err != nil {
		t.Fatal(err)
	}
	j, _ := ReadJournal(h)
	if _, err := Rollback(context.Background(), lockOf(t, h), f, j, scopeOf(p), nil, fast); err != nil {
		t.Fatal(err)
	}
	if got := f.state(a); got != "/" {
		t.Errorf("%s is %s after rollback, want unbound with no override", a, got)
	}
}

// A journal written before the identity fields still reads, and is refused until forced.
func TestReadOldJournal(t *testing.T) {
	h, dir := tempHost(t)
	writeFiles(t, dir, map[string]string{"var/lib/gpusplit/journal.json": `{"time": "2025-05-01T10:00:00Z", "host": "/",
  "devices": [{"device": "0000:81:00.0", "driver": "nvidia", "driver_override": "", "iommu_group": 72, "gpu": "0000:81:00.0", "to": "vfio-pci"}]}`})
	j, err := ReadJournal(h)
	if err != nil {
		t.Fatal(err)
	}
	if j.Format != 0 || len(j.Devices) != 1 || j.Devices[0].Driver != "nvidia" {
		t.Fatalf("journal %+v", j)
	}
	f := newFake()
	f.add("0000:81:00.0", "vfio-pci", 72)
	_, err = CheckJournal(h, f, j, Scope{Movable: map[pci.Address]bool{mustAddr("0000:81:00.0"): true}})
	if ue, ok := err.(*UntrustedError); !ok || !strings.Contains(problemsText(ue), "predates the identity fields") {
		t.Errorf("old journal: %v", err)
	}
}

// A write replaces the attribute's value: a regular file standing in for one is
// truncated, not left with the tail of a longer value.
func TestSysfsWriteTruncates(t *testing.T) {
	h, dir := tempHost(t)
	a := mustAddr("0000:81:00.0")
	p := filepath.Join(dir, "sys/bus/pci/devices", a.String(), "driver_override")
	writeFiles(t, dir, map[string]string{"sys/bus/pci/devices/0000:81:00.0/driver_override": "vfio-pci\n"})
	if err := (Sysfs{H: h}).SetOverride(a, "nvidia"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "nvidia\n" {
		t.Errorf("driver_override holds %q, want %q", b, "nvidia\n")
	}
}

// Only a root whose /sys and /proc are the kernel's own can have drivers moved.
func TestLive(t *testing.T) {
	h, dir := tempHost(t)
	os.MkdirAll(filepath.Join(dir, "sys/bus/pci/devices"), 0o755)
	if _, err := Live(h); err == nil || !strings.Contains(err.Error(), "its /sys is not a sysfs mount") || !strings.Contains(err.Error(), dir) {
		t.Errorf("a directory copy: %v", err)
	}
	snap, err := host.OpenArchive("snap.tar.gz", strings.NewReader(""))
	if err == nil {
		_, err = Live(snap)
	}
	if err == nil || !strings.Contains(err.Error(), "snapshot") {
		t.Errorf("a snapshot: %v", err)
	}
	// This machine's own root is a live kernel: Linux mounts sysfs on /sys and procfs on
	// /proc wherever tests run.
	root, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Live(root); err != nil {
		t.Errorf("/: %v", err)
	}
}

// Progress is called one event at a time, though four groups move at once: a caller's
// function that appends without a lock of its own loses no event (the hook's did, and
// its task log missed lines).
func TestProgressOneAtATime(t *testing.T) {
	f, p := fourGPUs()
	f.delay = 5 * time.Millisecond // each write takes a while, so the groups overlap
	h, _ := gpuHost(t, f)
	var events []Event
	var inside, overlaps atomic.Int32
	opts := fast
	opts.Parallel = 4
	opts.Progress = func(e Event) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(time.Millisecond)
		events = append(events, e) // no lock: Apply's is the only one
		inside.Add(-1)
	}
	if _, err := Apply(context.Background(), lockOf(t, h), f, p, opts); err != nil {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n > 0 {
		t.Errorf("Progress was called %d times while another call ran", n)
	}
	if len(events) != 16 { // moving and done, for 8 devices
		t.Errorf("%d events, want 16", len(events))
	}
}

// A device moved since the plan (another run, a guest's start) is not moved from where
// the plan did not find it: the run stops, naming it, and puts back what it moved.
func TestApplyOnlyFromThePlannedDriver(t *testing.T) {
	f, p := fourGPUs()
	h, _ := gpuHost(t, f)
	moved := p.Moves[6].Device // the third GPU: a guest's start took it to vfio-pci
	f.devs[moved].driver = plan.VFIO
	opts := fast
	opts.Parallel = 1
	_, err := Apply(context.Background(), lockOf(t, h), f, p, opts)
	if err == nil || !strings.Contains(err.Error(), moved.String()+" is on vfio-pci now, not on nvidia as planned") {
		t.Fatalf("err = %v", err)
	}
	for _, w := range f.writes {
		if strings.Contains(w, moved.String()) {
			t.Errorf("the moved device was written: %s", w)
		}
	}
	for _, m := range p.Moves {
		if m.Device != moved && f.state(m.Device) != m.From+"/" {
			t.Errorf("%s was not put back: %s", m.Device, f.state(m.Device))
		}
	}
}

// A journal goes where the caller says (a hook's own), never over apply's, and Apply
// returns what it wrote.
func TestApplyJournalWhereAsked(t *testing.T) {
	f, p := fourGPUs()
	h, dir := gpuHost(t, f)
	opts := fast
	opts.Journal = HookJournalDir + "/vm-131.json"
	res, err := Apply(context.Background(), lockOf(t, h), f, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, JournalPath)); err == nil {
		t.Error("a hook's apply wrote apply's journal")
	}
	j, err := ReadJournalAt(h, opts.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if res.Journal == nil || len(res.Journal.Devices) != 8 || len(j.Devices) != 8 || res.Journal.Devices[0] != j.Devices[0] {
		t.Errorf("returned %+v, written %+v", res.Journal, j)
	}
	if fi, err := os.Stat(filepath.Join(dir, HookJournalDir)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the hooks' directory: %v %v", fi, err)
	}
}

// problemsText is each problem of a refused journal, a line each.
func problemsText(e *UntrustedError) string {
	var b strings.Builder
	for _, p := range e.Problems {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}
