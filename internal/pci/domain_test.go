package pci_test

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pciids"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// A GPU in PCI domain 0001 is found, placed under its own host bridge, and chosen by
// every selector as one in domain 0000 is: its address, its slot, its NUMA node, its
// IOMMU group, and the paths of a mapping. A short address ("01:00.0") is domain 0000,
// as qemu-server reads it.
func TestSelectorsSecondDomain(t *testing.T) {
	h, err := fakehost.SecondDomain().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := pci.Scan(h, pciids.Default())
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := pci.GPUs(tree, nil)
	if err != nil || len(gpus) != 2 {
		t.Fatalf("%d GPUs, %v", len(gpus), err)
	}
	g := gpus[1]
	if g.Address.String() != "0001:01:00.0" || g.HostBridge.String() != "pci0001:00" || len(g.Parents) != 1 || g.Parents[0].String() != "0001:00:01.1" || g.NUMANode != 1 || len(g.Functions) != 1 || g.Functions[0].Address.String() != "0001:01:00.1" {
		t.Errorf("the second domain's GPU: %s under %s %v, node %d, functions %d", g.Address, g.HostBridge, g.Parents, g.NUMANode, len(g.Functions))
	}
	for _, c := range []struct{ sel, want string }{
		{"0001:01:00.0", "0001:01:00.0"},
		{"0001:01:00", "0001:01:00.0"},
		{"01:00.0", "0000:01:00.0"},
		{"numa:1", "0001:01:00.0"},
		{"group:5", "0001:01:00.0"},
		{"10de:2bb1,numa:1", "0001:01:00.0"},
		{"GPU1", "0001:01:00.0"},
	} {
		sels, err := pci.ParseSelectors(c.sel)
		if err != nil {
			t.Errorf("%s: %v", c.sel, err)
			continue
		}
		got, err := pci.GPUs(tree, sels)
		var as []string
		for _, d := range got {
			as = append(as, d.Address.String())
		}
		if err != nil || strings.Join(as, " ") != c.want {
			t.Errorf("%s: %v, %v; want %s", c.sel, as, err, c.want)
		}
	}
	sels, _ := pci.ParseSelectors("mapping:pro6000,numa:1")
	sels, err = pci.ResolveMappings(sels, func(string) ([]string, error) { return []string{"0000:01:00", "0001:01:00"}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pci.GPUs(tree, sels); err != nil || len(got) != 1 || got[0].Address.String() != "0001:01:00.0" {
		t.Errorf("mapping:pro6000,numa:1: %v %v", got, err)
	}
}
