package inventory

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pciids"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

func TestSelectorChoices(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	choices, short, err := SelectorChoices(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, c := range choices {
		values = append(values, c.Value)
	}
	got := strings.Join(values, " ")
	for _, want := range []string{"numa:0 numa:1 ", "group:", "10de:2bb1 count:1 count:2", "count:8"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %s", want, got)
		}
	}
	if len(short) != 16 || strings.HasPrefix(short[0].Value, "0000:") || short[0].Desc != choices[0].Desc {
		t.Errorf("short forms: %v", short)
	}
	// The GPU numbers count in the order pci.Choose does: gpu:4 is what it chooses.
	if c := short[12]; c.Value != "gpu:4" || !strings.Contains(c.Desc, "GPU4, 0000:81:00.0") {
		t.Errorf("GPU number 4 is offered as %+v", c)
	}
	if got := choose(t, h, short[12].Value); got != "0000:81:00.0" {
		t.Errorf("gpu:4 chooses %s", got)
	}
	if !strings.Contains(choices[0].Desc, "NUMA node 0, IOMMU group") {
		t.Errorf("a GPU's description: %q", choices[0].Desc)
	}
}

// choose is the address of the one GPU of h that sel chooses, as plan would choose it.
func choose(t *testing.T, h *host.Host, sel string) string {
	t.Helper()
	tree, err := pci.Scan(h, pciids.Default())
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := pci.GPUs(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	var devs []*pci.Device
	for _, g := range gpus {
		devs = append(devs, g.Device)
	}
	sels, err := pci.ParseSelectors(sel)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pci.Choose(devs, devs, sels, "GPU", "GPU")
	if err != nil || len(got) != 1 {
		t.Fatalf("%s chooses %v, %v", sel, got, err)
	}
	return got[0].Address.String()
}
