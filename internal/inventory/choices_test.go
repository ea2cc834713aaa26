package inventory

import (
	"strings"
	"testing"

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
	if len(short) != 8 || strings.HasPrefix(short[0].Value, "0000:") || short[0].Desc != choices[0].Desc {
		t.Errorf("short forms: %v", short)
	}
	if !strings.Contains(choices[0].Desc, "NUMA node 0, IOMMU group") {
		t.Errorf("a GPU's description: %q", choices[0].Desc)
	}
}
