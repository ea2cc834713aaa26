package pve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
)

func deviceID(d *pci.Device) string { return d.Address.String() }

// This node's entries are checked and point to their devices; other nodes' are listed
// as they are; without pci.cfg there are no entries, an empty list.
func TestReportMappings(t *testing.T) {
	h, inv := demo(t)
	rep, err := ReportMappings(h, inv.Tree, deviceID)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Node != "kpro6" || rep.Missing || rep.Mappings == 0 || len(rep.Entries) == 0 {
		t.Fatalf("%+v", rep)
	}
	var here, other int
	for _, r := range rep.Entries {
		switch {
		case r.Node == "kpro6":
			here++
			if !r.Checked || r.Device == "" || r.NUMANode == nil || r.Problems == nil {
				t.Errorf("this node's entry: %+v", r)
			}
			if r.Mapping == "pro6000" && (len(r.Problems) != 0 || !strings.HasPrefix(r.Device, "0000:") || r.Driver != "nvidia") {
				t.Errorf("pro6000's entry: %+v", r)
			}
		default:
			other++
			if r.Checked || r.Device != "" || r.NUMANode != nil {
				t.Errorf("another node's entry: %+v", r)
			}
		}
	}
	if here == 0 || other == 0 {
		t.Errorf("%d entries of this node, %d of others", here, other)
	}

	h, inv = demoDir(t, nil)
	root := h.Root()
	if err := os.Remove(filepath.Join(root, MappingPath)); err != nil {
		t.Fatal(err)
	}
	rep, err = ReportMappings(h, inv.Tree, deviceID)
	if err != nil || !rep.Missing {
		t.Fatalf("without pci.cfg: %v %+v", err, rep)
	}
	if b, _ := json.Marshal(rep); string(b) != `{"node":"kpro6","entries":[],"problems":[]}` {
		t.Errorf("without pci.cfg: %s", b)
	}
}
