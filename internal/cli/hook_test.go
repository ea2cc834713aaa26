package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// hookRoot is the sample host as a directory, with what apply's journal records of a
// host, and nvidia-persistenced's unit installed; drop removes processes by pid.
func hookRoot(t *testing.T, drop ...string) (string, *host.Host) {
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

// fakeServices records what the hook does to systemd units; stopping
// nvidia-persistenced takes its process (pid 2211 on the sample host) away.
func fakeServices(t *testing.T, root string) *[]string {
	t.Helper()
	var calls []string
	saved := services
	t.Cleanup(func() { services = saved })
	services.stop = func(unit string) error {
		calls = append(calls, "stop "+unit)
		return os.RemoveAll(filepath.Join(root, "proc/2211"))
	}
	services.start = func(unit string) error {
		calls = append(calls, "start "+unit)
		return nil
	}
	return &calls
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
	if _, err := os.Stat(filepath.Join(root, hookDir, "vm-131.json")); err == nil {
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
	if _, err := os.Stat(filepath.Join(root, hookDir, "vm-131.json")); err != nil {
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
	if _, err := os.Stat(filepath.Join(root, hookDir, "vm-131.json")); err == nil {
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

// Two hooks at once take turns: the second waits for the first's lock.
func TestHookWaitsForAnother(t *testing.T) {
	root, h := hookRoot(t, "48213")
	fakeServices(t, root)
	k := newSimKernel(t, h)
	k.use(t)
	p := filepath.Join(root, hookLockPath)
	os.MkdirAll(filepath.Dir(p), 0o755)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		released <- time.Now()
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
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

func TestHookRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--demo", "hook", "99", "pre-start"}, `"99" is not a Proxmox guest id`},
		{[]string{"--demo", "hook", "131", "start"}, `phase "start"`},
		{[]string{"--demo", "hook", "555", "pre-start"}, "no guest 555 on this node"},
	} {
		if _, _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// On a copy of a host (--demo, --root) the hook changes nothing, least of all this
// machine's services: the sample host's nvidia-persistenced is not this machine's.
func TestHookOnACopyTouchesNothing(t *testing.T) {
	root, _ := hookRoot(t, "48213") // the GPUs free but for nvidia-persistenced
	calls := fakeServices(t, root)
	_, _, err := run(t, "--root", root, "hook", "131", "pre-start")
	if err == nil || !strings.Contains(err.Error(), "VM 131 start refused: nothing was changed") {
		t.Errorf("on a directory: err = %v", err)
	}
	if _, _, err := run(t, "--demo", "hook", "131", "pre-start"); err == nil || !strings.Contains(err.Error(), "a snapshot cannot be changed") {
		t.Errorf("on the demo: err = %v", err)
	}
	if len(*calls) > 0 {
		t.Errorf("services touched: %v", *calls)
	}
}
