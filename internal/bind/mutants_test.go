package bind

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// IOMMU group 0 is a group like any other: a vfio-pci bind in it waits for /dev/vfio/0.
func TestApplyChecksVFIONodeOfGroupZero(t *testing.T) {
	f := newFake()
	gpu := f.add("0000:81:00.0", "nvidia", 0)
	f.noNode[0] = true
	p := &plan.Plan{Moves: []plan.Move{{Device: gpu, Role: plan.RoleGPU, GPU: gpu, IOMMUGroup: 0, From: "nvidia", To: plan.VFIO}}}
	h, _ := gpuHost(t, f)
	res, err := Apply(context.Background(), lockOf(t, h), f, p, fast)
	if err == nil || !strings.Contains(err.Error(), "0000:81:00.0 is on vfio-pci but /dev/vfio/0 did not appear") {
		t.Fatalf("got %v, want the missing /dev/vfio/0", err)
	}
	if got := f.state(gpu); got != "nvidia/" || len(res.Restored) != 1 {
		t.Errorf("%s is %s, restored %v; want back on nvidia", gpu, got, res.Restored)
	}
}

// A journal and a host disagree on the machine id when one of them has none: a journal
// of an installation without /etc/machine-id is not this one's, nor the reverse.
func TestRollbackRefusesMissingMachineID(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, j *Journal, dir string)
		want   string
	}{
		{"journal without one", func(t *testing.T, j *Journal, dir string) { j.MachineID = "" },
			"machine id: the journal has none, the host 5f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f"},
		{"host without one", func(t *testing.T, j *Journal, dir string) {
			if err := os.Remove(filepath.Join(dir, "etc/machine-id")); err != nil {
				t.Fatal(err)
			}
		}, "machine id: the journal has 5f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f, the host none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, p, h, dir, j := appliedHost(t)
			c.tamper(t, j, dir)
			_, err := Rollback(context.Background(), lockOf(t, h), f, j, scopeOf(p), nil, fast)
			var ue *UntrustedError
			if !errors.As(err, &ue) || !strings.Contains(problemsText(ue), c.want) {
				t.Fatalf("got %v, want a refusal saying %q", err, c.want)
			}
			if len(f.writes) != 0 {
				t.Errorf("a refused rollback wrote %v", f.writes)
			}
		})
	}
}

// probeFails is the fake kernel with drivers_probe failing for some devices whatever
// their override, as when the driver's probe routine returns an error.
type probeFails struct {
	*fakeKernel
	fail map[pci.Address]bool
}

func (k probeFails) Probe(a pci.Address) error {
	if k.fail[a] {
		k.mu.Lock()
		k.writes = append(k.writes, "probe "+a.String())
		k.mu.Unlock()
		return errors.New("probe failed")
	}
	return k.fakeKernel.Probe(a)
}

// A device sent back to its default driver whose probe fails, leaving it with no driver
// at all, has not arrived: the run fails and the device goes back to vfio-pci.
func TestApplyDefaultProbeFailureLeavingNoDriver(t *testing.T) {
	f := newFake()
	a := f.add("0000:81:00.1", plan.VFIO, 72)
	f.devs[a].override = plan.VFIO
	f.devs[a].natural = "snd_hda_intel"
	k := probeFails{f, map[pci.Address]bool{a: true}}
	p := &plan.Plan{Moves: []plan.Move{{Device: a, Role: plan.RoleFunction, GPU: a, IOMMUGroup: 72, From: plan.VFIO, Override: plan.VFIO, To: plan.Default}}}
	h, _ := gpuHost(t, f)
	res, err := Apply(context.Background(), lockOf(t, h), k, p, fast)
	if err == nil || !strings.Contains(err.Error(), "binding 0000:81:00.1 to its default driver: probe failed") {
		t.Fatalf("got %v, want the failed probe", err)
	}
	if len(res.Moved) != 0 {
		t.Errorf("moved %v", res.Moved)
	}
}
