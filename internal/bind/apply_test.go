package bind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	writes   []string
}

type fakeDev struct {
	driver, override, natural string
	group                     int
}

func newFake() *fakeKernel {
	return &fakeKernel{
		devs: map[pci.Address]*fakeDev{}, loaded: map[string]bool{"nvidia": true, "snd_hda_intel": true, "vfio-pci": true},
		modules: map[string]bool{}, hang: map[pci.Address]chan struct{}{}, failOn: map[pci.Address]string{}, vanishOn: map[pci.Address]bool{},
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
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, fmt.Sprintf("override %s %q", a, driver))
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
	d, err := f.dev(a)
	if err != nil {
		return err
	}
	if f.failOn[a] == "probe" && d.override == plan.VFIO {
		return errors.New("probe failed")
	}
	if d.driver != "" {
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

func (f *fakeKernel) Load(driver string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, "load "+driver)
	f.loaded[driver] = true
	return nil
}

func (f *fakeKernel) VFIOReady(group int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
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

func tempHost(t *testing.T) (*host.Host, string) {
	t.Helper()
	dir := t.TempDir()
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h, dir
}

var fast = Options{UnbindTimeout: 200 * time.Millisecond, BindTimeout: 200 * time.Millisecond}

func TestApplyAndRollback(t *testing.T) {
	f, p := fourGPUs()
	h, dir := tempHost(t)
	var events []Event
	var mu sync.Mutex
	opts := fast
	opts.Progress = func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
	res, err := Apply(context.Background(), h, f, p, opts)
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
	res, err = Rollback(context.Background(), h, f, j, nil, fast)
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
	p.Moves[4].Holders = []proc.Process{{PID: 48213, Command: "python3", Container: 129}}
	h, dir := tempHost(t)
	_, err := Apply(context.Background(), h, f, p, fast)
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
	h, _ := tempHost(t)
	_, err := Apply(context.Background(), h, f, p, fast)
	if err == nil || !strings.Contains(err.Error(), "driver vfio-pci is not loaded") || len(f.writes) != 0 {
		t.Fatalf("missing driver: %v, writes %v", err, f.writes)
	}
	// A loadable module is loaded first, then the devices move.
	f.modules[plan.VFIO] = true
	if _, err := Apply(context.Background(), h, f, p, fast); err != nil {
		t.Fatal(err)
	}
	if f.writes[0] != "load vfio-pci" {
		t.Errorf("first write %q, want the module load", f.writes[0])
	}
}

// A failure half-way puts every device touched back as it was.
func TestApplyFailureRollsBack(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(f *fakeKernel, a pci.Address)
		want  string
	}{
		{"device vanishes", func(f *fakeKernel, a pci.Address) { f.vanishOn[a] = true }, "is gone"},
		{"bind fails", func(f *fakeKernel, a pci.Address) { f.failOn[a] = "probe" }, "probe failed"},
		{"unbind hangs", func(f *fakeKernel, a pci.Address) { f.hang[a] = make(chan struct{}) }, "did not finish within"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, p := fourGPUs()
			bad := p.Moves[6].Device // f1:00.0
			c.setup(f, bad)
			h, _ := tempHost(t)
			opts := fast
			opts.Parallel = 1 // the groups in order: three move, the fourth fails
			res, err := Apply(context.Background(), h, f, p, opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			for _, m := range p.Moves {
				want := m.From + "/"
				switch {
				case m.Device == bad && c.name == "device vanishes":
					want = "gone"
				case m.Device == bad && c.name == "unbind hangs":
					want = "nvidia/vfio-pci" // the unbind is pending: nothing more is written
				}
				if got := f.state(m.Device); got != want {
					t.Errorf("%s is %s after the failure, want %s", m.Device, got, want)
				}
			}
			restored := 7
			if c.name != "bind fails" {
				restored = 6 // the bad device is gone, or its unbind is pending
				if len(res.Unrestored) != 1 || res.Unrestored[bad] == nil {
					t.Errorf("unrestored %v, want %s", res.Unrestored, bad)
				}
			}
			if len(res.Moved) != 0 || len(res.Restored) != restored {
				t.Errorf("moved %v restored %v, want %d restored", res.Moved, res.Restored, restored)
			}
			if ch := f.hang[bad]; ch != nil {
				close(ch)
			}
		})
	}
}

func TestLock(t *testing.T) {
	h, _ := tempHost(t)
	l, err := TakeLock(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TakeLock(h); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("second lock: %v", err)
	}
	l.Unlock()
	l2, err := TakeLock(h)
	if err != nil {
		t.Errorf("lock after unlock: %v", err)
	}
	l2.Unlock()
}

func TestApplyOnSnapshotRefused(t *testing.T) {
	f, p := fourGPUs()
	h, err := host.OpenArchive("snap", strings.NewReader(""))
	if err == nil {
		_, err = Apply(context.Background(), h, f, p, fast)
	}
	if err == nil {
		t.Fatal("applying to a snapshot succeeded")
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
