package proc

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

func TestGuest(t *testing.T) {
	cases := []struct {
		cgroup        string
		container, vm int
	}{
		{"0::/lxc/129/ns/system.slice/vllm.service\n", 129, 0},
		{"0::/lxc/129/ns\n", 129, 0},
		{"0::/lxc.payload.130/system.slice/x.service\n", 130, 0},
		{"0::/lxc.monitor/129\n", 0, 0},
		{"0::/qemu.slice/131.scope\n", 0, 131},
		{"0::/system.slice/nvidia-persistenced.service\n", 0, 0},
		{"12:devices:/lxc/200/ns\n11:memory:/lxc/200/ns\n", 200, 0},
		{"0::/user.slice/user-0.slice/session-3.scope\n", 0, 0},
		{"0::/lxc/abc/ns\n", 0, 0},
		{"", 0, 0},
	}
	for _, c := range cases {
		ct, vm := Guest(c.cgroup)
		if ct != c.container || vm != c.vm {
			t.Errorf("Guest(%q) = %d, %d; want %d, %d", c.cgroup, ct, vm, c.container, c.vm)
		}
	}
}

func TestOpenFiles(t *testing.T) {
	m := fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-3"}},
		Processes: []fakehost.Process{
			{PID: 10, Comm: "python3", Cmdline: []string{"python3", "-m", "vllm"}, Cgroup: "/lxc/129/ns/system.slice/vllm.service",
				Files: []string{"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia0"}},
			{PID: 20, Comm: "kvm", Cgroup: "/qemu.slice/131.scope", Files: []string{"/dev/vfio/72", "/dev/vfio/vfio"}},
			{PID: 30, Comm: "bash", Cgroup: "/user.slice", Files: []string{"/dev/pts/0"}},
		},
	}
	tree, err := m.Build()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := tree.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	// An entry that is not a process, and a process whose fd directory is gone.
	os.MkdirAll(filepath.Join(dir, "proc", "self-not-a-pid"), 0o755)
	os.MkdirAll(filepath.Join(dir, "proc", "40"), 0o755)
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenFiles(h, func(p string) bool { return strings.HasPrefix(p, "/dev/nvidia") || strings.HasPrefix(p, "/dev/vfio/") })
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{
		{PID: 10, Command: "python3", Cmdline: []string{"python3", "-m", "vllm"}, Container: 129, Files: []string{"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"}},
		{PID: 20, Command: "kvm", VM: 131, Files: []string{"/dev/vfio/72", "/dev/vfio/vfio"}},
	}
	if !reflect.DeepEqual(s.Processes, want) {
		t.Errorf("got %+v\nwant %+v", s.Processes, want)
	}
}

func TestOpenFilesWithoutProc(t *testing.T) {
	h, err := host.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenFiles(h, func(string) bool { return true })
	if err != nil || len(s.Processes) != 0 {
		t.Fatalf("got %+v, %v", s, err)
	}
}
