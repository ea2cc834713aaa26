package pve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// The report of the sample host's cluster: the nodes with this one marked, each
// mapping's entries per node and its users, guests as "vm" and "ct", the problems, and
// the note of what the view cannot see first.
func TestClusterReport(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ReadCluster(h)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Report()
	if r.Node != "kpro6" || r.Cluster != "kpro" || !r.Quorate || !r.Members || len(r.Nodes) != 3 || !r.Nodes[1].ThisNode || r.Nodes[0].ThisNode {
		t.Errorf("nodes: %+v", r)
	}
	if len(r.Notes) == 0 || !strings.HasPrefix(r.Notes[0], "read from /etc/pve alone") {
		t.Errorf("notes: %q", r.Notes)
	}
	for _, m := range r.Mappings {
		if m.ID == "pro6000" && (m.PerNode["kpro6"] != 8 || m.PerNode["kpro4"] != 1 || len(m.Entries) != 12 || len(m.UsedBy) != 4) {
			t.Errorf("pro6000: %+v", m)
		}
	}
	kinds := map[int]string{}
	for _, g := range r.Guests {
		kinds[g.ID] = g.Kind
		if g.ID == 171 && (!g.HA.Managed || g.HA.Rule != "train" || !g.HA.Strict || len(g.Replication) != 1 || g.Replication[0].Target != "kpro6") {
			t.Errorf("VM 171: %+v", g)
		}
	}
	if kinds[150] != "ct" || kinds[131] != "vm" {
		t.Errorf("kinds: %v", kinds)
	}
	if len(r.Problems) != 4 {
		t.Errorf("problems: %+v", r.Problems)
	}
	// Every list is [] when empty, never null.
	empty := (&Cluster{Node: "n1", Mappings: &MappingFile{}}).Report()
	b, err := json.Marshal(empty)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "null") {
		t.Errorf("an empty report has null lists: %s", b)
	}
}
