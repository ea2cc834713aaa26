package snapshot

import (
	"bytes"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// A snapshot of a host with SR-IOV keeps what inventory reads of it: each GPU's
// virtual functions (sriov_* and the virtfnN links) and what NVIDIA's vGPU manager says
// of each VF (its nvidia/ directory and files), so that a bug report shows them.
func TestCaptureKeepsVirtualFunctions(t *testing.T) {
	h, err := fakehost.SRIOVHost().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	archive, _ := snap(t, h)
	back, err := host.OpenArchive("sriov", bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(back, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[1]
	if g.TotalVFs != 32 || g.NumVFs != 4 || len(g.VFs) != 4 {
		t.Fatalf("%s from the snapshot: %d of %d VFs, %d read", g.Address, g.NumVFs, g.TotalVFs, len(g.VFs))
	}
	if vf := g.VFs[0]; !vf.VGPU || vf.VGPUType != 1234 || len(vf.Creatable) != 2 {
		t.Errorf("VF %s from the snapshot: %+v", vf.Address, vf)
	}
}
