package hook

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// The services of a simulated host run nothing: a unit is active while a process of
// the copy is in its cgroup, stop and start only say what they would run, and a device
// node is a file of the copy.
func TestSimulatedServices(t *testing.T) {
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	svc := Simulated(h, func(s string) { said = append(said, s) })
	ctx := context.Background()
	if on, err := svc.Active(ctx, Persistenced); !on || err != nil {
		t.Errorf("nvidia-persistenced, whose process 2211 runs: active %v, %v", on, err)
	}
	if on, _ := svc.Active(ctx, "pvedaemon"); !on {
		t.Error("pvedaemon, whose process 3982 runs, is not active")
	}
	if on, _ := svc.Active(ctx, "vllm"); on {
		t.Error("a unit of a container's own systemd is active on the host")
	}
	if err := svc.Stop(ctx, Persistenced); err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx, Persistenced); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"simulated: systemctl stop nvidia-persistenced.service (nothing was run)",
		"simulated: systemctl start nvidia-persistenced.service (nothing was run)",
	}
	if !slices.Equal(said, want) {
		t.Errorf("said %q, want %q", said, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "proc/2211")); err != nil {
		t.Errorf("the stop changed the copy: %v", err)
	}
	os.RemoveAll(filepath.Join(dir, "proc/2211"))
	if on, _ := svc.Active(ctx, Persistenced); on {
		t.Error("active with no process in its cgroup")
	}
	if err := svc.DeviceNode(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "dev/nvidia5")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("/dev/nvidia5 in the copy: %v", err)
	}
}
