package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// BuildGPUs reads the devices that do not move with a GPU briefly, and must give the
// commands that use it (inventory, topo) what Build gives them: the same GPUs, read in
// full, with the same functions, nodes and holders, from every fixture and selector.
func TestBuildGPUsEqualsBuild(t *testing.T) {
	roots := map[string]func() (*host.Host, error){"sample": samplehost.Open}
	archives, err := filepath.Glob("../../testdata/hosts/*.tar.gz")
	if err != nil || len(archives) == 0 {
		t.Fatalf("no fixture archives (%v)", err)
	}
	for _, a := range archives {
		roots[filepath.Base(a)] = func() (*host.Host, error) { return host.Open(a) }
	}
	// The sample's directory form takes the read path of a live root.
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	roots["sample as a directory"] = func() (*host.Host, error) { return host.Open(dir) }
	// And with a NIC in a GPU's IOMMU group (as behind a switch without ACS): a device
	// that moves with the GPU from another slot.
	shared := t.TempDir()
	if err := samplehost.Unpack(shared); err != nil {
		t.Fatal(err)
	}
	nic := filepath.Join(shared, "sys/devices/pci0000:80/0000:80:03.1/0000:82:00.0")
	if err := os.Remove(nic + "/iommu_group"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../kernel/iommu_groups/72", nic+"/iommu_group"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../devices/pci0000:80/0000:80:03.1/0000:82:00.0", filepath.Join(shared, "sys/kernel/iommu_groups/72/devices/0000:82:00.0")); err != nil {
		t.Fatal(err)
	}
	roots["sample, a NIC in a GPU's group"] = func() (*host.Host, error) { return host.Open(shared) }

	selectors := []string{"", "numa:1", "count:3", "0000:82:00.0", "class:02", "10de:2bb1,numa:0", "group:72"}
	for name, open := range roots {
		for _, sel := range selectors {
			var sels []pci.Selector
			if sel != "" {
				if sels, err = pci.ParseSelectors(sel); err != nil {
					t.Fatal(err)
				}
			}
			h1, err := open()
			if err != nil {
				t.Fatal(err)
			}
			h2, _ := open()
			full, ferr := Build(h1, sels)
			brief, berr := BuildGPUs(h2, sels)
			if (ferr == nil) != (berr == nil) || (ferr != nil && ferr.Error() != berr.Error()) {
				t.Errorf("%s, %q: errors %v and %v", name, sel, ferr, berr)
				continue
			}
			if ferr != nil {
				continue
			}
			if !reflect.DeepEqual(full.GPUs, brief.GPUs) {
				t.Errorf("%s, %q: the GPUs differ:\n full %+v\nbrief %+v", name, sel, full.GPUs, brief.GPUs)
			}
			if !reflect.DeepEqual(full.Holders, brief.Holders) {
				t.Errorf("%s, %q: holders differ", name, sel)
			}
			for _, g := range full.GPUs {
				for _, d := range full.Tree.Group(g.IOMMUGroup) {
					if !reflect.DeepEqual(d, brief.Tree.Lookup(d.Address)) {
						t.Errorf("%s, %q: group member %s differs", name, sel, d.Address)
					}
				}
			}
			// BuildTopology is BuildGPUs that has not looked for holders.
			h3, _ := open()
			top, err := BuildTopology(h3, sels)
			if err != nil {
				t.Fatalf("%s, %q: BuildTopology: %v", name, sel, err)
			}
			unheld := slices.Clone(full.GPUs)
			for i := range unheld {
				unheld[i].Holders = nil
			}
			if !reflect.DeepEqual(top.GPUs, unheld) || len(top.Holders) != 0 {
				t.Errorf("%s, %q: BuildTopology's GPUs differ, or it found holders", name, sel)
			}
			if len(full.Tree.Devices) != len(brief.Tree.Devices) {
				t.Errorf("%s, %q: %d devices, brief %d", name, sel, len(full.Tree.Devices), len(brief.Tree.Devices))
			}
		}
	}
}
