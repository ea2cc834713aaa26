package vmtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// BenchmarkApplyInGuest moves the four NICs of the two-socket guest to vfio-pci and back,
// one IOMMU group at a time and four at once, and reports the median time of an apply as
// gpusplit measures it (from the first change to the end). One boot serves every round:
// run it with -benchtime=1x. Under TCG the figures are slower than on hardware; the
// comparison between the two modes is what they show.
func BenchmarkApplyInGuest(b *testing.B) {
	vm, err := NewVM(binary, "e1000e", "vfio-pci", "vfio_iommu_type1")
	if err != nil {
		b.Fatal(err)
	}
	const rounds = 5
	var script strings.Builder
	script.WriteString(`g="gpusplit --devices ` + E1000E + `"` + "\n")
	for _, par := range []int{1, 4} {
		for i := range rounds {
			fmt.Fprintf(&script, "emit apply-%d-%d $g apply --vfio numa:0 --vfio numa:1 --yes --parallel %d -o json\n", par, i, par)
			script.WriteString("$g rollback --yes >/dev/null 2>&1\n")
		}
	}
	for b.Loop() {
		res, err := vm.Run(b.Context(), TwoSockets(), script.String())
		if res != nil && res.Retried != "" {
			b.Logf("booted a second time, the first boot failed before the benchmark ran: %s", res.Retried)
		}
		if err != nil {
			b.Fatal(err)
		}
		for _, par := range []int{1, 4} {
			var secs []float64
			for i := range rounds {
				name := fmt.Sprintf("apply-%d-%d", par, i)
				var doc struct {
					Seconds float64  `json:"seconds"`
					Moved   []string `json:"moved"`
				}
				if err := json.Unmarshal(res.Files[name], &doc); err != nil || len(doc.Moved) != 4 {
					b.Fatalf("%s: %v %s", name, err, res.Files[name])
				}
				secs = append(secs, doc.Seconds)
			}
			slices.Sort(secs)
			b.ReportMetric(secs[rounds/2]*1000, fmt.Sprintf("ms/apply-parallel-%d", par))
		}
	}
}
