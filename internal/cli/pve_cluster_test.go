package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pve"
)

// clusterWithoutProblems takes the sample host's planted cluster problems out of the
// copy at root: VM 171's third hostpci, kpro4's entry and kpro5's RTX PRO 6000 in
// a6000-ws, and kpro6 from VM 120's HA rule.
func clusterWithoutProblems(t *testing.T, root string) string {
	t.Helper()
	edit(t, root, "etc/pve/nodes/kpro7/qemu-server/171.conf", func(s string) string {
		return strings.Replace(s, "hostpci2: mapping=pro6000,pcie=1\n", "", 1)
	})
	edit(t, root, "etc/pve/mapping/pci.cfg", func(s string) string {
		s = strings.Replace(s, "\tmap id=10de:2bb1,iommugroup=31,node=kpro4,path=0000:21:00,subsystem-id=10de:204b\n", "", 1)
		a, b, _ := strings.Cut(s, "pro6000\n")
		return strings.Replace(a, "\tmap id=10de:2bb1,iommugroup=52,node=kpro5,path=0000:81:00,subsystem-id=10de:204b\n", "", 1) + "pro6000\n" + b
	})
	edit(t, root, "etc/pve/ha/rules.cfg", func(s string) string {
		return strings.Replace(s, "nodes kpro5:2,kpro6:1", "nodes kpro5", 1)
	})
	return root
}

// The sample host's cluster: its three nodes, its mappings by node, its guests of every
// node, and the four planted problems, with exit status 1.
func TestPVEClusterDemo(t *testing.T) {
	// -o wide: the tables' cells and the problems on one line each.
	out, _, err := run(t, "--demo", "pve", "cluster", "-o", "wide")
	if status(err) != 1 || !strings.Contains(err.Error(), "4 problems in the cluster's configuration (listed above)") {
		t.Fatalf("exit status %d, %v; want 1 and the count", status(err), err)
	}
	for _, want := range []string{
		"demo:kpro6: cluster kpro, 3 nodes, quorate; this node is kpro6.",
		"kpro5  1   yes     10.20.0.15",
		"kpro7  3   yes     10.20.0.17",
		"MAPPING   kpro5  kpro6  kpro7  NOT IN CLUSTER  USED BY",
		"a6000-ws  3      -      -      -               VM 120",
		"pro6000   1      8      2      kpro4: 1        VM 125, VM 179, VM 131, VM 171",
		"VM 120  kpro5  ws-kpro5",
		"HA started, rule ws-kpro5 (strict): kpro5, kpro6",
		"CT 150  kpro5  notebook5                   /dev/nvidia0, 2 control nodes, cgroup 195",
		"CT 129  kpro6  infer01                     /dev/nvidia0-7, 5 control nodes",
		"VM 179  kpro5  render-template (template)  pro6000 ×1",
		"replication 171-0 → kpro6",
		"4 problems:\n  guest-node-short: VM 171 on kpro7 takes 3 devices of mapping pro6000, which has 2 entries on kpro7",
		"  entry-unknown-node: mapping pro6000 has an entry for node kpro4 (path=0000:21:00)",
		"  target-node-short: VM 120 (on kpro5) may move to kpro6",
		"  gpu-in-two-mappings: VM 120 and VM 125 on kpro5 can both take 0000:81:00",
		"note: read from /etc/pve alone: every node's guest configs, never a node's sysfs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "VM 179 and") || strings.Contains(out, "and VM 179") {
		t.Errorf("the template is counted as running:\n%s", out)
	}
}

func TestPVEClusterJSON(t *testing.T) {
	out, _, err := run(t, "--demo", "pve", "cluster", "-o", "json")
	if status(err) != 1 || !strings.Contains(err.Error(), "(in problems)") {
		t.Fatalf("exit status %d, %v", status(err), err)
	}
	var doc pve.ClusterReport
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Node != "kpro6" || doc.Cluster != "kpro" || !doc.Quorate || !doc.Members || len(doc.Nodes) != 3 || !doc.Nodes[1].ThisNode || doc.Nodes[0].IP != "10.20.0.15" {
		t.Errorf("nodes: %+v", doc)
	}
	kinds := map[string]pve.ClusterProblem{}
	for _, p := range doc.Problems {
		kinds[p.Kind] = p
	}
	if p := kinds["guest-node-short"]; p.Node != "kpro7" || len(p.Guests) != 1 || p.Guests[0] != 171 || p.Mappings[0] != "pro6000" {
		t.Errorf("a: %+v", p)
	}
	if p := kinds["entry-unknown-node"]; p.Node != "kpro4" || len(p.Guests) != 0 || p.Mappings[0] != "pro6000" || p.Paths[0] != "0000:21:00" {
		t.Errorf("b: %+v", p)
	}
	if p := kinds["target-node-short"]; p.Node != "kpro6" || p.Guests[0] != 120 || p.Mappings[0] != "a6000-ws" {
		t.Errorf("c: %+v", p)
	}
	if p := kinds["gpu-in-two-mappings"]; p.Node != "kpro5" || len(p.Guests) != 2 || p.Guests[0] != 120 || p.Guests[1] != 125 || p.Mappings[0] != "a6000-ws" || p.Mappings[1] != "pro6000" || p.Paths[0] != "0000:81:00" {
		t.Errorf("d: %+v", p)
	}
	var pro pve.ClusterMapping
	for _, m := range doc.Mappings {
		if m.ID == "pro6000" {
			pro = m
		}
	}
	if pro.PerNode["kpro5"] != 1 || pro.PerNode["kpro6"] != 8 || pro.PerNode["kpro7"] != 2 || pro.PerNode["kpro4"] != 1 || len(pro.Entries) != 12 || len(pro.UsedBy) != 4 {
		t.Errorf("pro6000: %+v", pro)
	}
	for _, g := range doc.Guests {
		if g.ID == 171 && (!g.HA.Managed || g.HA.Rule != "train" || !g.HA.Strict || len(g.Replication) != 1 || g.Replication[0].Target != "kpro6" || g.Mappings[0].Needs != 3) {
			t.Errorf("VM 171: %+v", g)
		}
		if g.ID == 150 && (g.Kind != "ct" || len(g.Devices) != 3 || g.CgroupAllow[0] != "c 195:* rwm") {
			t.Errorf("CT 150: %+v", g)
		}
	}
}

// With the planted problems taken out the cluster is clean: exit 0.
func TestPVEClusterClean(t *testing.T) {
	root, reset := pveRoot(t)
	defer reset()
	out, _, err := run(t, "--root", clusterWithoutProblems(t, root), "pve", "cluster")
	if err != nil || !strings.Contains(out, "No problems.") {
		t.Errorf("%v\n%s", err, out)
	}
}

// The entry of kpro4, a node outside the cluster, is another node's to this node: pve
// mappings lists it unchecked, and pve sync keeps it and refuses nothing for it.
func TestUnknownNodeEntryLeavesThisNodeAlone(t *testing.T) {
	var m struct {
		Entries []struct {
			Node     string
			Checked  bool
			Problems []string
		}
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--demo", "pve", "mappings", "-o", "json")), &m); err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, e := range m.Entries {
		if e.Node == "kpro4" {
			seen = true
			if e.Checked || len(e.Problems) != 0 {
				t.Errorf("kpro4's entry: %+v", e)
			}
		}
	}
	if !seen {
		t.Error("pve mappings does not list kpro4's entry")
	}
	root, reset := pveRoot(t)
	defer reset()
	var s syncDoc
	if err := json.Unmarshal([]byte(mustRun(t, "--root", root, "pve", "sync", "--vfio", "numa:1", "--apply", "-o", "json")), &s); err != nil {
		t.Fatal(err)
	}
	if !s.Applied || len(s.Problems) != 0 {
		t.Errorf("sync: applied %v, problems %q", s.Applied, s.Problems)
	}
	for _, c := range s.Changes {
		if strings.Contains(strings.Join(c.Refusals, " ")+strings.Join(c.Notes, " "), "kpro4") {
			t.Errorf("sync says something of kpro4: %+v", c)
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "etc/pve/mapping/pci.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\tmap id=10de:2bb1,iommugroup=52,node=kpro5,path=0000:81:00,subsystem-id=10de:204b\n\tmap id=10de:2bb1,iommugroup=31,node=kpro4,path=0000:21:00,subsystem-id=10de:204b\n") {
		t.Errorf("sync did not keep kpro4's entry where it was:\n%s", b)
	}
}
