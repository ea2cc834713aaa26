package inventory

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// TestReport: the JSON form of the sample host's inventory has its lists as [], never
// null, ids as hex strings, BAR addresses as hex strings, and the holders of a GPU.
func TestReport(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := inv.Report(2)
	if len(r.GPUs) != 8 || r.Warnings == nil || r.NUMANodes != 2 {
		t.Fatalf("%d GPUs, warnings %v", len(r.GPUs), r.Warnings)
	}
	g := r.GPUs[0]
	if g.Vendor != "10de" || g.Class != "030000" || g.RootPort == nil || len(g.Functions) == 0 || g.Functions[0].Holders == nil || len(g.BARs) == 0 || !strings.HasPrefix(g.BARs[0].Start, "0x") {
		t.Errorf("%+v", g)
	}
	held := 0
	for _, g := range r.GPUs {
		for _, x := range g.Holders {
			if x.Kind == "process" && (x.PID == nil || x.Cmdline == nil || x.Files == nil) {
				t.Errorf("process holder %+v", x)
			}
			held++
		}
	}
	if held == 0 {
		t.Error("no GPU of the sample host is held")
	}
	b, _ := json.Marshal(r)
	for _, list := range []string{"gpus", "warnings", "iommu_group_members", "parents", "bars", "device_nodes", "functions", "holders", "cmdline", "files"} {
		if strings.Contains(string(b), `"`+list+`":null`) {
			t.Errorf("%s is null", list)
		}
	}
	if hs := HolderReports(nil); hs == nil || len(hs) != 0 {
		t.Errorf("no holders: %v", hs)
	}
}

// TestStrangers: a GPU's group's other devices are strangers unless they are its own
// functions: the sample host's GPUs have none, a GPU in one group with its root port and
// a NIC has both, and two GPUs of one group are each other's.
func TestStrangers(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range inv.GPUs {
		if s := inv.Strangers(g); len(s) != 0 {
			t.Errorf("%s: strangers %v", g.Address, s)
		}
	}
	fh, err := fakehost.SharedGroups().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if inv, err = Build(fh, nil); err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 3 {
		t.Fatalf("%d GPUs", len(inv.GPUs))
	}
	var got []string
	for _, g := range inv.GPUs {
		var s []string
		for _, d := range inv.Strangers(g) {
			s = append(s, fmt.Sprintf("%04x", d.VendorID))
		}
		got = append(got, strings.Join(s, " "))
	}
	// In address order: B and C on bus 0, then A behind its root port, which is in its
	// group too.
	if strings.Join(got, ",") != "10de,10de,1022 8086" {
		t.Errorf("strangers %q", got)
	}
}
