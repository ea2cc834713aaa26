package pve

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// mapping:pro6000 on the sample host is this node's entries of pro6000: its 8 GPUs,
// written as slots, so each with its audio function; --vfio mapping:pro6000 moves them.
func TestMappingLookup(t *testing.T) {
	h, inv := demo(t)
	lookup := MappingLookup(h)
	paths, err := lookup("pro6000")
	want := []string{"0000:01:00", "0000:11:00", "0000:61:00", "0000:71:00", "0000:81:00", "0000:91:00", "0000:e1:00", "0000:f1:00"}
	if err != nil || !slices.Equal(paths, want) {
		t.Fatalf("pro6000 = %q, %v; want this node's %q", paths, err, want)
	}
	sels, err := pci.ParseSelectors("mapping:pro6000")
	if err != nil {
		t.Fatal(err)
	}
	if sels, err = pci.ResolveMappings(sels, lookup); err != nil {
		t.Fatal(err)
	}
	gpus, err := pci.GPUs(inv.Tree, sels)
	if err != nil || len(gpus) != 8 {
		t.Fatalf("GPUs(mapping:pro6000) = %d, %v", len(gpus), err)
	}
	for i, g := range gpus {
		if g.Address != inv.GPUs[i].Address || len(g.Functions) != 1 {
			t.Errorf("GPU %d = %s with %d functions, want %s and its audio function", i, g.Address, len(g.Functions), inv.GPUs[i].Address)
		}
	}
	p, err := plan.Make(inv, plan.ForVFIO([][]pci.Selector{sels}))
	if err != nil || len(p.Moves) != 16 {
		t.Fatalf("plan --vfio mapping:pro6000: %v, %v", p, err)
	}

	// A mapping of other nodes, one that does not exist: each says which there are.
	for name, msg := range map[string]string{
		"a6000-ws": `PCI mapping "a6000-ws" has no device on this node kpro6, only on kpro5 (the mappings of this node kpro6: pro6000)`,
		"pro600":   `no PCI mapping "pro600" in /etc/pve/mapping/pci.cfg (the mappings of this node kpro6: pro6000)`,
	} {
		if _, err := lookup(name); err == nil || err.Error() != msg {
			t.Errorf("lookup(%s): %v\nwant %s", name, err, msg)
		}
	}

	// Without pci.cfg there is no mapping.
	h, _ = demoDir(t, nil)
	if err := os.Remove(filepath.Join(h.Root(), MappingPath)); err != nil {
		t.Fatal(err)
	}
	if _, err := MappingLookup(h)("pro6000"); err == nil || !strings.Contains(err.Error(), "this host has no /etc/pve/mapping/pci.cfg") {
		t.Errorf("lookup without pci.cfg: %v", err)
	}
	// A node that no mapping holds a device of.
	h, _ = demoDir(t, map[string]string{"etc/hostname": "kpro9\n"})
	if _, err := MappingLookup(h)("pro6000"); err == nil || !strings.HasSuffix(err.Error(), "only on kpro6, kpro7, kpro5, kpro4 (no mapping holds a device of this node kpro9)") {
		t.Errorf("lookup on kpro9: %v", err)
	}
}
