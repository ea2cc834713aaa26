package pve

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// A pci.cfg of 10,000 map lines (about 900 KB, under pmxcfs's 1 MiB): the sample host's
// mappings plus a mapping of another node's 10,000 functions. The sync reads it, edits
// this node's lines and diffs it; peak-MB is the heap in use at its largest.
func BenchmarkSync10000Entries(b *testing.B) {
	sample, _ := demoWith(b, nil)
	ref := string(must(sample.ReadFile(MappingPath)))
	var big strings.Builder
	big.WriteString(ref)
	big.WriteString("farm\n")
	for i := range 10000 {
		fmt.Fprintf(&big, "\tmap id=10de:2bb1,iommugroup=%d,node=kpro%d,path=0000:%02x:%02x.%d,subsystem-id=10de:204b\n", i, 100+i/256, i/256%256, i%32, i%8)
	}
	big.WriteString("\n")
	if big.Len() > MaxFile {
		b.Fatalf("%d bytes: more than pmxcfs holds", big.Len())
	}
	h, inv := demoWith(b, map[string]string{"etc/pve/mapping/pci.cfg": big.String()})
	d := plan.ForVFIO([][]pci.Selector{mustSel(b, "numa:1")})
	p, err := plan.Make(inv, d)
	if err != nil {
		b.Fatal(err)
	}
	var peak uint64
	b.ReportAllocs()
	for b.Loop() {
		changes, _, err := Sync(h, inv, p, d, SyncOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range changes {
			_ = c.Diff()
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
}
