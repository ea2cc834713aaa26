package bind

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// simHost is the sample host unpacked and recorded as a simulated host.
func simHost(t *testing.T) (string, *host.Host, *Sim) {
	t.Helper()
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSim(h); err == nil {
		t.Fatal("OpenSim took a copy with no record")
	}
	if err := RecordSim(h); err != nil {
		t.Fatal(err)
	}
	k, err := OpenSim(h)
	if err != nil {
		t.Fatal(err)
	}
	return dir, h, k
}

func addr(t *testing.T, s string) pci.Address {
	t.Helper()
	a, err := pci.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// gpuState is what a fresh read of the copy says of a GPU: its driver, override and
// minor, as inventory reads them.
func gpuState(t *testing.T, dir, a string) (driver string, minor int) {
	t.Helper()
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range inv.GPUs {
		if g.Address.String() == a {
			return g.Driver, g.Minor
		}
	}
	t.Fatalf("no GPU %s", a)
	return "", 0
}

func move(t *testing.T, k Kernel, a pci.Address, to string) {
	t.Helper()
	from, err := k.Driver(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.SetOverride(a, to); err != nil {
		t.Fatal(err)
	}
	if from != "" {
		if err := k.Unbind(a, from); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Probe(a); err != nil {
		t.Fatal(err)
	}
}

// A GPU moved to vfio-pci and back shows in the copy as the kernel would show it: the
// links both ways, driver_override, the group's node, and nvidia's information file
// with the lowest free minor.
func TestSimMovesInTheCopy(t *testing.T) {
	dir, _, k := simHost(t)
	gpu, gpu2 := addr(t, "0000:81:00.0"), addr(t, "0000:91:00.0")
	move(t, k, gpu, "vfio-pci")
	if d, _ := gpuState(t, dir, gpu.String()); d != "vfio-pci" {
		t.Fatalf("after the move the copy says %s", d)
	}
	link := filepath.Join(dir, "sys/bus/pci/drivers/vfio-pci", gpu.String())
	if got, err := filepath.EvalSymlinks(link); err != nil || !strings.HasSuffix(got, "/sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0") {
		t.Errorf("vfio-pci's entry leads to %q, %v", got, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sys/bus/pci/drivers/nvidia", gpu.String())); err == nil {
		t.Error("nvidia keeps its entry of the GPU")
	}
	if !k.VFIOReady(72) {
		t.Error("no /dev/vfio/72")
	}
	if _, err := os.Stat(filepath.Join(dir, "proc/driver/nvidia/gpus", gpu.String())); err == nil {
		t.Error("nvidia's information file stayed")
	}
	if ov, _ := k.Override(gpu); ov != "vfio-pci" {
		t.Errorf("override %q", ov)
	}

	// Another GPU leaves nvidia, freeing minor 5; the first comes back first and takes 4.
	move(t, k, gpu2, "vfio-pci")
	move(t, k, gpu, "")
	if d, m := gpuState(t, dir, gpu.String()); d != "nvidia" || m != 4 {
		t.Errorf("back: %s minor %d, want nvidia minor 4", d, m)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sys/bus/pci/devices", gpu.String(), "driver_override")); string(b) != "(null)\n" {
		t.Errorf("driver_override reads %q", b)
	}
	if k.VFIOReady(72) {
		t.Error("/dev/vfio/72 stayed with no device of the group on vfio-pci")
	}
	move(t, k, gpu2, "nvidia")
	if d, m := gpuState(t, dir, gpu2.String()); d != "nvidia" || m != 5 {
		t.Errorf("second back: %s minor %d, want nvidia minor 5", d, m)
	}
}

// The kernel's own refusals: unbinding from a driver the device is not on, and a probe
// with override "none" or a driver the copy lacks, which binds nothing.
func TestSimRefusesAsTheKernel(t *testing.T) {
	dir, _, k := simHost(t)
	gpu := addr(t, "0000:01:00.0")
	if err := k.Unbind(gpu, "vfio-pci"); err == nil {
		t.Error("unbound from a driver it is not on")
	}
	if d, _ := gpuState(t, dir, gpu.String()); d != "nvidia" {
		t.Errorf("a refused unbind left it on %q", d)
	}
	move(t, k, gpu, "none")
	if d, _ := k.Driver(gpu); d != "" {
		t.Errorf("override none bound %q", d)
	}
	move(t, k, gpu, "amdgpu")
	if d, _ := k.Driver(gpu); d != "" {
		t.Errorf("a driver the copy lacks bound %q", d)
	}
	if k.Loaded("amdgpu") || k.Load(context.Background(), "amdgpu") == nil {
		t.Error("the copy loads a driver it lacks")
	}
	if _, ok := k.Loadable("vfio-pci"); !ok || k.Load(context.Background(), "vfio-pci") != nil {
		t.Error("vfio-pci, which the copy has, is not loadable")
	}
}

// A directory with a record but a running kernel's /sys is never simulated.
func TestSimRefusesTheLiveHost(t *testing.T) {
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := fsMagic("/sys"); err != nil || m != sysfsMagic {
		t.Skip("no sysfs at /sys here")
	}
	if err := RecordSim(h); err == nil || !strings.Contains(err.Error(), "running kernel") {
		t.Errorf("RecordSim on /: %v", err)
	}
	if err := notLive(h); err == nil {
		t.Error("notLive took /")
	}
}
