package vmlayout

import (
	"testing"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// A hostpci entry that names a GPU of PCI domain 0001 gives the VM that GPU and its
// audio function, from the GPU's own NUMA node and link.
func TestPredictSecondDomain(t *testing.T) {
	h, err := fakehost.SecondDomain().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Predict(h, inv.Tree, 150, now)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pathsOf(m), "hostpci0=0001:01:00.0@1c.0/00.0/fixed hostpci0=0001:01:00.1@1c.0/00.1/fixed"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if d := m.Devices[0]; d.HostNUMA != 1 || d.LinkSpeed == "" || d.LinkWidth != 16 {
		t.Errorf("GPU %+v", d)
	}
}
