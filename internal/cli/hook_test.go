package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/syscmd"
)

// hookRoot is the sample host as a directory, with what apply's journal records of a
// host, and nvidia-persistenced's unit installed; drop removes processes by pid.
func hookRoot(t testing.TB, drop ...string) (string, *host.Host) {
	t.Helper()
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	for p, body := range map[string]string{
		"proc/sys/kernel/random/boot_id":                 "0b2f6c1e-5d7a-4c43-9f1e-2a8d3b6e7c10\n",
		"etc/machine-id":                                 "5f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f\n",
		"lib/systemd/system/nvidia-persistenced.service": "[Service]\nExecStart=/usr/bin/nvidia-persistenced\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, pid := range drop {
		if err := os.RemoveAll(filepath.Join(root, "proc", pid)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, h
}

// fakeServices records what the hook does to systemd units: systemd runs
// nvidia-persistenced while its process (pid 2211 on the sample host) is there, and
// stopping it takes that away. Making a device node makes /dev/nvidiaN in the tree.
func fakeServices(t testing.TB, root string) *[]string {
	t.Helper()
	var calls []string
	saved := hookServices
	t.Cleanup(func() { hookServices = saved })
	svc := hook.Services{
		Active: func(_ context.Context, unit string) (bool, error) {
			_, err := os.Stat(filepath.Join(root, "proc/2211"))
			return unit == hook.Persistenced && err == nil, nil
		},
		Stop: func(_ context.Context, unit string) error {
			calls = append(calls, "stop "+unit)
			return os.RemoveAll(filepath.Join(root, "proc/2211"))
		},
		Start: func(_ context.Context, unit string) error {
			calls = append(calls, "start "+unit)
			return nil
		},
		// nvidia-modprobe -c N: the node appears in the tree.
		DeviceNode: func(_ context.Context, minor int) error {
			return os.WriteFile(filepath.Join(root, "dev/nvidia"+strconv.Itoa(minor)), nil, 0o666)
		},
	}
	hookServices = func(*globals, *host.Host) hook.Services { return svc }
	return &calls
}

// setDeviceNode replaces the stand-in for nvidia-modprobe -c N.
func setDeviceNode(t *testing.T, f func(minor int) error) {
	t.Helper()
	svc := hookServices(nil, nil)
	svc.DeviceNode = func(_ context.Context, minor int) error { return f(minor) }
	hookServices = func(*globals, *host.Host) hook.Services { return svc }
}

// The sample host's VM 131 takes the first four GPUs of mapping pro6000 (NUMA node 0)
// when it starts.
var vm131GPUs = []string{"0000:01:00.0", "0000:11:00.0", "0000:61:00.0", "0000:71:00.0"}

// A VM start while container 129's python3 holds the GPUs: refused, naming the holder
// and the way to release it, with nothing written to the kernel, and
// nvidia-persistenced, stopped to let the GPUs go, started again.
func TestHookVMStartRefusedWhileHeld(t *testing.T) {
	root, h := hookRoot(t)
	calls := fakeServices(t, root)
	k := newSimKernel(t, h)
	k.use(t)
	out, _, err := run(t, "--root", root, "hook", "131", "pre-start")
	if err == nil || !strings.HasPrefix(err.Error(), "VM 131 start refused: ") || !strings.Contains(err.Error(), "python3 (pid 48213) in container 129") {
		t.Fatalf("err = %v\n%s", err, out)
	}
	if len(k.writes) > 0 {
		t.Errorf("the kernel was written: %v", k.writes)
	}
	if want := []string{"stop nvidia-persistenced", "start nvidia-persistenced"}; !slices.Equal(*calls, want) {
		t.Errorf("services %v, want %v", *calls, want)
	}
	if _, err := os.Stat(filepath.Join(root, bind.HookJournalDir, "vm-131.json")); err == nil {
		t.Error("a refused start left its journal")
	}
}

// A start moves the VM's GPUs, with their HDMI audio, to vfio-pci, a line per device;
// the stop gives them back to nvidia; a container start then finds its GPUs on nvidia.
func TestHookVMStartStop(t *testing.T) {
	root, h := hookRoot(t, "48213")
	calls := fakeServices(t, root)
	k := newSimKernel(t, h)
	k.use(t)
	out := mustRun(t, "--root", root, "hook", "131", "pre-start")
	for _, a := range vm131GPUs {
		if got := k.state(a); got != "vfio-pci/vfio-pci" {
			t.Errorf("after the start %s is %s", a, got)
		}
		if !strings.Contains(out, "gpusplit hook 131: "+a+"  nvidia → vfio-pci  ok") {
			t.Errorf("no line for %s:\n%s", a, out)
		}
	}
	if got := k.state("0000:01:00.1"); got != "vfio-pci/vfio-pci" {
		t.Errorf("the HDMI audio function is %s", got)
	}
	if got := k.state("0000:81:00.0"); got != "nvidia/" {
		t.Errorf("a GPU the VM does not get moved: %s", got)
	}
	if _, err := os.Stat(filepath.Join(root, bind.HookJournalDir, "vm-131.json")); err != nil {
		t.Errorf("no journal for the stop: %v", err)
	}
	// Running, the VM holds its GPUs: container 129 (all eight) may not start.
	res := filepath.Join(root, "run/qemu-server/pci-id-reservations")
	os.MkdirAll(filepath.Dir(res), 0o755)
	var lines []string
	for _, a := range vm131GPUs {
		lines = append(lines, a+" 131 time:"+itoa(time.Now().Add(time.Hour).Unix()))
	}
	os.WriteFile(res, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	_, _, err := run(t, "--root", root, "hook", "129", "pre-start")
	if err == nil || !strings.Contains(err.Error(), "container 129 start refused") || !strings.Contains(err.Error(), "GPU 0000:01:00.0 is held by running VM 131; stop it first (qm stop 131)") {
		t.Errorf("container start: %v", err)
	}

	// The VM stops: Proxmox's cleanup dropped its reservations before post-stop.
	os.Remove(res)
	out = mustRun(t, "--root", root, "hook", "131", "post-stop")
	for _, a := range append(vm131GPUs, "0000:01:00.1") {
		if got := k.state(a); got != "nvidia/" && got != "snd_hda_intel/" {
			t.Errorf("after the stop %s is %s", a, got)
		}
	}
	if !strings.Contains(out, "0000:01:00.0  restored to nvidia") {
		t.Errorf("stop output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(root, bind.HookJournalDir, "vm-131.json")); err == nil {
		t.Error("the journal of the start is left after the stop")
	}
	if want := []string{"stop nvidia-persistenced", "start nvidia-persistenced", "start nvidia-persistenced"}; !slices.Equal(*calls, want) {
		t.Errorf("services %v, want %v", *calls, want)
	}
	out = mustRun(t, "--root", root, "hook", "129", "pre-start")
	if !strings.Contains(out, "gpusplit hook 129: dev0 (/dev/nvidia0): GPU 0000:01:00.0 on nvidia") {
		t.Errorf("container start:\n%s", out)
	}
	// A second stop, and the phases that do nothing, are no-ops.
	for _, phase := range []string{"post-stop", "post-start", "pre-stop"} {
		mustRun(t, "--root", root, "hook", "131", phase)
	}
}

// A stop leaves a device that another running VM took in the meantime.
func TestHookVMStopLeavesAnotherVMsDevice(t *testing.T) {
	root, h := hookRoot(t, "48213")
	fakeServices(t, root)
	k := newSimKernel(t, h)
	k.use(t)
	mustRun(t, "--root", root, "hook", "131", "pre-start")
	res := filepath.Join(root, "run/qemu-server/pci-id-reservations")
	os.MkdirAll(filepath.Dir(res), 0o755)
	os.WriteFile(res, []byte("0000:11:00.0 140 time:"+itoa(time.Now().Add(time.Hour).Unix())+"\n"), 0o644)
	out := mustRun(t, "--root", root, "hook", "131", "post-stop")
	if !strings.Contains(out, "0000:11:00.0 stays on vfio-pci: VM 140 holds it now") {
		t.Errorf("output:\n%s", out)
	}
	if got := k.state("0000:11:00.0"); got != "vfio-pci/vfio-pci" {
		t.Errorf("the other VM's device is %s", got)
	}
	if got := k.state("0000:01:00.0"); got != "nvidia/" {
		t.Errorf("the VM's own device is %s", got)
	}
}

// mirroredHost is the sample host with its GPUs free (python3 of container 129 gone),
// the services stood in for, and a kernel that shows each binding in the tree.
func mirroredHost(t testing.TB) (string, *host.Host, *simKernel) {
	t.Helper()
	root, h := hookRoot(t, "48213")
	fakeServices(t, root)
	k := newSimKernel(t, h)
	k.mirrorTo(t, root)
	k.use(t)
	return root, h, k
}

// A start during another run (an apply, another guest's hook) waits for its lock, and
// goes ahead once it is let go.
func TestHookWaitsForAnother(t *testing.T) {
	root, h := hookRoot(t, "48213")
	fakeServices(t, root)
	k := newSimKernel(t, h)
	k.use(t)
	lock, err := bind.TakeLock(h, 0)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		released <- time.Now()
		lock.Unlock()
	}()
	mustRun(t, "--root", root, "hook", "131", "pre-start")
	select {
	case <-released:
	default:
		t.Fatal("the hook ran while another held the lock")
	}
	if got := k.state("0000:01:00.0"); got != "vfio-pci/vfio-pci" {
		t.Errorf("after waiting, %s is %s", "0000:01:00.0", got)
	}
}

// A run that keeps the lock past half the hook's deadline refuses the start, saying
// why, with nothing changed.
func TestHookLockWaitIsBounded(t *testing.T) {
	root, h := hookRoot(t, "48213")
	calls := fakeServices(t, root)
	k := newSimKernel(t, h)
	k.use(t)
	lock, err := bind.TakeLock(h, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	_, _, err = run(t, "--root", root, "hook", "--deadline", "1s", "131", "pre-start")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("another gpusplit (pid %d) is changing drivers on this host and has not let go for 500ms; nothing was changed", os.Getpid())) {
		t.Errorf("err = %v", err)
	}
	if len(k.writes) > 0 || len(*calls) > 0 {
		t.Errorf("changed while refused: %v %v", k.writes, *calls)
	}
}

// A VM's start keeps its own journal: apply's, which rollback reads, is left as it was.
func TestHookKeepsApplysJournal(t *testing.T) {
	root, h, _ := mirroredHost(t)
	applys := filepath.Join(root, bind.JournalPath)
	os.MkdirAll(filepath.Dir(applys), 0o700)
	const before = `{"format": 2, "devices": []}` + "\n"
	os.WriteFile(applys, []byte(before), 0o600)
	mustRun(t, "--root", root, "hook", "131", "pre-start")
	if b, _ := os.ReadFile(applys); string(b) != before {
		t.Errorf("a VM's start changed apply's journal:\n%s", b)
	}
	j, err := bind.ReadJournalAt(h, bind.HookJournalDir+"/vm-131.json")
	if err != nil || len(j.Devices) != 8 {
		t.Fatalf("the VM's journal: %v %+v", err, j)
	}
	// A start again after a VM killed without its stop finds its devices on vfio-pci,
	// and keeps what the first start found each device on.
	if out := mustRun(t, "--root", root, "hook", "131", "pre-start"); !strings.Contains(out, "0000:01:00.0 already on vfio-pci") {
		t.Errorf("a second start:\n%s", out)
	}
	if j2, err := bind.ReadJournalAt(h, bind.HookJournalDir+"/vm-131.json"); err != nil || j2.Devices[0].Driver != "nvidia" {
		t.Errorf("after a second start: %v %+v", err, j2)
	}
}

// A systemctl that never returns ends at the hook's deadline: the start is refused, and
// the daemon is started again. The commands are root's, found by absolute path, never
// through $PATH.
func TestHookDeadlineStopsAStuckCommand(t *testing.T) {
	root, h := hookRoot(t, "48213")
	k := newSimKernel(t, h)
	k.use(t)
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "calls")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\ncase $1 in\n  is-active) exit 0 ;;\n  stop) exec /bin/sleep 600 ;;\nesac\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := syscmd.Dirs
	t.Cleanup(func() { syscmd.Dirs = saved })
	syscmd.Dirs = []string{bin}
	t.Setenv("PATH", "/nonexistent")
	start := time.Now()
	_, _, err := run(t, "--root", root, "hook", "--deadline", "2s", "131", "pre-start")
	if err == nil || !strings.Contains(err.Error(), "VM 131 start refused: stopping nvidia-persistenced") || !strings.HasSuffix(err.Error(), "the hook's deadline of 2s passed (gpusplit hook --deadline, or pve hook install --deadline, sets another)") {
		t.Errorf("err = %v", err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("the hook took %s past a deadline of 2s", took)
	}
	if len(k.writes) > 0 {
		t.Errorf("the kernel was written: %v", k.writes)
	}
	b, _ := os.ReadFile(log)
	if want := "is-active --quiet nvidia-persistenced.service\nstop nvidia-persistenced.service\nstart nvidia-persistenced.service\n"; string(b) != want {
		t.Errorf("systemctl was called with:\n%s\nwant:\n%s", b, want)
	}
}

func TestHookRefusesBadInput(t *testing.T) {
	freshDemo(t) // a start of a guest that is not there makes the demo's scratch copy first
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--demo", "hook", "99", "pre-start"}, `"99" is not a Proxmox guest id`},
		{[]string{"--demo", "hook", "131", "start"}, `phase "start"`},
		{[]string{"--demo", "hook", "555", "pre-start"}, "no guest 555 on this node"},
		{[]string{"--demo", "hook", "--force", "131", "post-start"}, "--force is for gpusplit hook release"},
		{[]string{"--demo", "hook", "--deadline", "31m", "131", "post-start"}, "deadline 31m0s"},
		{[]string{"--demo", "hook", "release", "81:00"}, "invalid PCI address"},
	} {
		if _, _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// On a copy of a host (--root of a directory or a snapshot) the hook changes nothing,
// least of all this machine's services: the sample host's nvidia-persistenced is not
// this machine's. (--demo works on a simulated host: demo_test.go.)
func TestHookOnACopyTouchesNothing(t *testing.T) {
	root, _ := hookRoot(t, "48213") // the GPUs free but for nvidia-persistenced
	calls := fakeServices(t, root)
	_, _, err := run(t, "--root", root, "hook", "131", "pre-start")
	if err == nil || !strings.Contains(err.Error(), "VM 131 start refused: nothing was changed") {
		t.Errorf("on a directory: err = %v", err)
	}
	if _, _, err := run(t, "--root", sampleArchive(t), "hook", "131", "pre-start"); err == nil || !strings.Contains(err.Error(), "a snapshot cannot be changed") {
		t.Errorf("on a snapshot: err = %v", err)
	}
	if len(*calls) > 0 {
		t.Errorf("services touched: %v", *calls)
	}
}

// breakConfig makes a device's config space read all ones, as a GPU's does after a
// failed reset, or puts its first bytes back.
func breakConfig(t *testing.T, root, addr string, broken bool) {
	t.Helper()
	p := filepath.Join(root, "sys/bus/pci/devices", addr, "config")
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0xde, 0x10} // NVIDIA, little-endian
	if broken {
		b = []byte{0xff, 0xff}
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
}

// A GPU that comes back from the VM broken (its config space reads ffff) is
// quarantined: it and its HDMI function stay on vfio-pci, the others go back, the stop
// fails naming it, status lists it; release refuses while it is still broken, and once
// it answers, the VM's stop run again gives it back.
func TestHookQuarantine(t *testing.T) {
	root, h, k := mirroredHost(t)
	mustRun(t, "--root", root, "hook", "131", "pre-start")
	j, err := bind.ReadJournalAt(h, bind.HookJournalDir+"/vm-131.json")
	if err != nil || j.Devices[0].Link == nil || j.Devices[0].Link.Width != 16 {
		t.Fatalf("the start's journal keeps no link: %v %+v", err, j)
	}
	breakConfig(t, root, "0000:11:00.0", true)
	out, _, err := run(t, "--root", root, "hook", "131", "post-stop")
	if err == nil || !strings.Contains(err.Error(), "VM 131's stop quarantined 1 GPU(s)") || !strings.Contains(err.Error(), "gpusplit hook release 0000:11:00.0") {
		t.Fatalf("err = %v\n%s", err, out)
	}
	if !strings.Contains(out, "0000:11:00.0 QUARANTINED: config space reads ffff") {
		t.Errorf("output:\n%s", out)
	}
	for a, want := range map[string]string{"0000:11:00.0": "vfio-pci/vfio-pci", "0000:11:00.1": "vfio-pci/vfio-pci", "0000:01:00.0": "nvidia/", "0000:61:00.0": "nvidia/"} {
		if got := k.state(a); got != want {
			t.Errorf("after the stop %s is %s, want %s", a, got, want)
		}
	}
	j, err = bind.ReadJournalAt(h, bind.HookJournalDir+"/vm-131.json")
	if err != nil || len(j.Devices) != 2 || j.Devices[0].Device.String() != "0000:11:00.0" {
		t.Fatalf("the journal keeps the quarantined devices only: %v %+v", err, j)
	}
	status, _, _ := run(t, "--root", root, "-o", "json", "status", "--vfio", "numa:0")
	if !strings.Contains(status, `"quarantined": [`) || !strings.Contains(status, `"device": "0000:11:00.0"`) {
		t.Errorf("status does not list it:\n%s", status)
	}
	if doctor, _, _ := run(t, "--root", root, "doctor"); !strings.Contains(doctor, "0000:11:00.0") || !strings.Contains(doctor, "quarantine") {
		t.Errorf("doctor does not name it:\n%s", doctor)
	}
	// Nothing hands it out while it is quarantined: not a VM's start, not apply.
	if _, _, err := run(t, "--root", root, "hook", "131", "pre-start"); err == nil || !strings.Contains(err.Error(), "VM 131 start refused: GPU 0000:11:00.0 is quarantined (0000:11:00.0: config space reads ffff") {
		t.Errorf("a start with a quarantined GPU: %v", err)
	}
	if _, _, err := run(t, "--root", root, "apply", "--vfio", "numa:1", "--yes"); err == nil || !strings.Contains(err.Error(), "0000:11:00.0: GPU 0000:11:00.0 is quarantined") {
		t.Errorf("apply of a quarantined GPU: %v", err)
	}
	if _, _, err := run(t, "--root", root, "hook", "release", "0000:11:00.0"); err == nil || !strings.Contains(err.Error(), "still broken") {
		t.Errorf("release of a broken GPU: %v", err)
	}
	breakConfig(t, root, "0000:11:00.0", false)
	if out := mustRun(t, "--root", root, "hook", "release", "0000:11:00.0"); !strings.Contains(out, "Next: gpusplit hook 131 post-stop") {
		t.Errorf("release:\n%s", out)
	}
	mustRun(t, "--root", root, "hook", "131", "post-stop")
	if got := k.state("0000:11:00.0"); got != "nvidia/" {
		t.Errorf("after the release and a stop, 0000:11:00.0 is %s", got)
	}
	if _, err := os.Stat(filepath.Join(root, bind.HookJournalDir, "vm-131.json")); err == nil {
		t.Error("the journal is left after everything went back")
	}
}

// A GPU the driver takes back without its /dev/nvidiaN (nvidia-modprobe fails) is
// quarantined after the bind.
func TestHookQuarantineAfterBind(t *testing.T) {
	root, _, _ := mirroredHost(t)
	mustRun(t, "--root", root, "hook", "131", "pre-start")
	os.Remove(filepath.Join(root, "dev/nvidia1"))
	setDeviceNode(t, func(minor int) error {
		if minor == 1 {
			return fmt.Errorf("nvidia-modprobe: failed")
		}
		return os.WriteFile(filepath.Join(root, "dev/nvidia"+strconv.Itoa(minor)), nil, 0o666)
	})
	out, _, err := run(t, "--root", root, "hook", "131", "post-stop")
	// The GPUs come back in parallel, so which one the driver gives minor 1 varies.
	m := regexp.MustCompile(`(0000:[0-9a-f]{2}:00\.0): nvidia gave it minor 1, but /dev/nvidia1 does not exist`).FindStringSubmatch(fmt.Sprint(err))
	if err == nil || !strings.Contains(err.Error(), "VM 131's stop quarantined 1 GPU(s)") || m == nil {
		t.Fatalf("err = %v\n%s", err, out)
	}
	if !strings.Contains(out, "/dev/nvidia1 could not be made") {
		t.Errorf("output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(root, health.Dir, m[1]+".json")); err != nil {
		t.Errorf("no quarantine record: %v", err)
	}
}
