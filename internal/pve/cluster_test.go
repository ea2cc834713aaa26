package pve

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

func TestParseMembers(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       Members
		err        string
	}{
		{
			name: "a cluster, nodes in hash order, one without an ip",
			data: "{\n\"nodename\": \"pve2\",\n\"version\": 12,\n\"cluster\": { \"name\": \"lab\", \"version\": 4, \"nodes\": 3, \"quorate\": 1 },\n\"nodelist\": {\n" +
				"  \"pve3\": { \"id\": 3, \"online\": 0},\n  \"pve1\": { \"id\": 1, \"online\": 1, \"ip\": \"10.0.0.1\"},\n  \"pve2\": { \"id\": 2, \"online\": 1, \"ip\": \"10.0.0.2\"}\n  }\n}\n",
			want: Members{Node: "pve2", Cluster: "lab", Quorate: true, Nodes: []Member{
				{Name: "pve1", ID: 1, Online: true, IP: "10.0.0.1"}, {Name: "pve2", ID: 2, Online: true, IP: "10.0.0.2"}, {Name: "pve3", ID: 3},
			}},
		},
		{
			name: "a cluster without quorum",
			data: `{"nodename": "pve1", "version": 3, "cluster": { "name": "lab", "version": 2, "nodes": 2, "quorate": 0 }, "nodelist": {"pve1": { "id": 1, "online": 1}, "pve2": { "id": 2, "online": 0}}}`,
			want: Members{Node: "pve1", Cluster: "lab", Nodes: []Member{{Name: "pve1", ID: 1, Online: true}, {Name: "pve2", ID: 2}}},
		},
		{
			name: "a node in no cluster: its name and version only",
			data: "{\n\"nodename\": \"solo\",\n\"version\": 0\n}\n",
			want: Members{Node: "solo", Quorate: true, Nodes: []Member{{Name: "solo", Online: true}}},
		},
		{name: "not JSON", data: "nodename: pve1\n", err: "invalid character"},
		{name: "no nodename", data: `{"version": 1}`, err: "no valid nodename"},
		{name: "a nodename that is no node name", data: `{"nodename": "-x", "version": 1}`, err: "no valid nodename"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMembers([]byte(tc.data))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%+v", *m) != fmt.Sprintf("%+v", tc.want) {
				t.Errorf("got  %+v\nwant %+v", *m, tc.want)
			}
		})
	}
}

// The SectionConfig traps, read as Proxmox reads them.
func TestParseSections(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       string // type:id{key=value,…} per section, ";"-joined
		warns      string
	}{
		{name: "two sections", data: "vm: 100\n\tstate started\n\tgroup g1\n\nct: 101\n\n", want: "vm:100{group=g1,state=started};ct:101{}"},
		{name: "comments anywhere, also inside a section", data: "# top\nvm: 100\n# inside\n\tstate stopped\n    # indented\n\tmax_restart 2\n", want: "vm:100{max_restart=2,state=stopped}"},
		{name: "spaces indent as well as a tab", data: "node-affinity: r1\n        resources vm:100\n        nodes node1\n", want: "node-affinity:r1{nodes=node1,resources=vm:100}"},
		{name: "types are lower-cased", data: "VM: 100\n\tstate started\n", want: "vm:100{state=started}"},
		{name: "a bare key has no value", data: "group: g\n\tnodes a\n\trestricted\n", want: "group:g{nodes=a,restricted=}"},
		{name: "a blank line of spaces does not end the section: the next header is lost", data: "vm: 100\n\tstate started\n \nvm: 101\n\tstate disabled\n",
			want: "vm:100{state=started}", warns: "holds spaces or tabs"},
		{name: "a repeated key keeps the first", data: "vm: 100\n\tstate started\n\tstate disabled\n", want: "vm:100{state=started}", warns: "set twice"},
		{name: "a repeated section keeps the last", data: "vm: 100\n\tstate started\n\nvm: 100\n\tstate disabled\n", want: "vm:100{state=disabled}", warns: "defined twice"},
		{name: "a line 0 ends a section as Perl's false does", data: "vm: 100\n0\n\tstate stopped\n", want: "vm:100{}", warns: "not a section header"},
		{name: "a key line outside a section is ignored", data: "\tstate started\nvm: 100\n", want: "vm:100{}", warns: "not a section header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secs, warns := parseSections("f.cfg", tc.data)
			var got []string
			for _, s := range secs {
				var kv []string
				for _, k := range slices.Sorted(maps.Keys(s.Props)) {
					kv = append(kv, k+"="+s.Props[k])
				}
				got = append(got, fmt.Sprintf("%s:%s{%s}", s.Type, s.ID, strings.Join(kv, ",")))
			}
			if g := strings.Join(got, ";"); g != tc.want {
				t.Errorf("got %s, want %s", g, tc.want)
			}
			w := strings.Join(warns, "\n")
			if (tc.warns == "") != (w == "") || !strings.Contains(w, tc.warns) {
				t.Errorf("warnings %q, want %q", w, tc.warns)
			}
		})
	}
}

// clusterBase is a clean three-node cluster: the mapping gpu has two GPUs on each node,
// and VM 100 on n1 takes both of n1's.
var clusterBase = map[string]string{
	"etc/hostname":     "n1\n",
	"etc/pve/.members": `{"nodename": "n1", "version": 5, "cluster": { "name": "c", "version": 3, "nodes": 3, "quorate": 1 }, "nodelist": {"n1": {"id": 1, "online": 1}, "n2": {"id": 2, "online": 1}, "n3": {"id": 3, "online": 1}}}`,
	"etc/pve/mapping/pci.cfg": "gpu\n" +
		"\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n" +
		"\tmap id=10de:2bb1,node=n2,path=0000:01:00\n\tmap id=10de:2bb1,node=n2,path=0000:02:00\n" +
		"\tmap id=10de:2bb1,node=n3,path=0000:01:00\n\tmap id=10de:2bb1,node=n3,path=0000:02:00\n\n",
	"etc/pve/nodes/n1/qemu-server/100.conf": "hostpci0: mapping=gpu,pcie=1\nhostpci1: mapping=gpu,pcie=1\nmachine: q35\nname: a\n",
}

// withMapping is pci.cfg of clusterBase plus more sections.
func withMapping(more string) string { return clusterBase["etc/pve/mapping/pci.cfg"] + more }

// clusterHost lays out clusterBase with files changed ("" removes one) and opens it.
func clusterHost(t *testing.T, files map[string]string) *host.Host {
	t.Helper()
	root := t.TempDir()
	all := maps.Clone(clusterBase)
	maps.Copy(all, files)
	for p, body := range all {
		if body == "" {
			continue
		}
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// problemKey is what a test compares of a problem: kind, node, guests, mappings, paths.
func problemKey(p ClusterProblem) string {
	return fmt.Sprintf("%s %s %v %v %v", p.Kind, p.Node, p.Guests, p.Mappings, p.Paths)
}

// Each rule, with the cases next to it that must not count.
func TestClusterProblems(t *testing.T) {
	const ha120 = "vm: 100\n\tstate started\n\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string // problemKey of each problem, in order
		says  string   // a phrase of the (first) message, or of a note
	}{
		{name: "the clean cluster", want: nil},

		// a: too few entries on the guest's node.
		{name: "three entries on a mapping with two on the node",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/100.conf": "hostpci0: mapping=gpu\nhostpci1: mapping=gpu\nhostpci2: mapping=gpu\n"},
			want:  []string{"guest-node-short n1 [100] [gpu] []"}, says: "could not find a free device for 'hostpci2'"},
		{name: "a mapping without an entry on the guest's node",
			files: map[string]string{"etc/pve/nodes/n2/qemu-server/200.conf": "hostpci0: mapping=solo\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:03:00\n\n")},
			want:  []string{"guest-node-short n2 [200] [solo] []"}, says: "PCI device mapping not found for 'solo'"},
		{name: "two entries on a mapping with one on the node",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/200.conf": "hostpci0: mapping=solo\nhostpci3: mapping=solo\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:03:00\n\n")},
			want:  []string{"guest-node-short n1 [200] [solo] []"}, says: "device '0000:03:00.0' assigned more than once"},
		{name: "a mapping pci.cfg lacks",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/200.conf": "hostpci0: mapping=nope\n"},
			want:  []string{"guest-node-short n1 [200] [nope] []"}, says: "which /etc/pve/mapping/pci.cfg does not have"},
		{name: "a template never starts",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/200.conf": "hostpci0: mapping=nope\ntemplate: 1\n"}},
		{name: "mediated devices share one entry",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/200.conf": "hostpci0: mapping=solo,mdev=i915-GVTg_V5_4\nhostpci1: mapping=solo,mdev=i915-GVTg_V5_4\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=8086:3e92,node=n1,path=0000:00:02.0\n\tmdev 1\n\n")}},
		{name: "NVIDIA vGPU types take a virtual function each",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/200.conf": "hostpci0: mapping=vf,mdev=nvidia-660\nhostpci1: mapping=vf,mdev=nvidia-660\n", "etc/pve/mapping/pci.cfg": withMapping("vf\n\tmap id=10de:2bb1,node=n1,path=0000:09:00.4\n\n")},
			want:  []string{"guest-node-short n1 [200] [vf] []"}},
		{name: "pending and snapshot sections are not the running config",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/100.conf": "hostpci0: mapping=gpu\n\n[PENDING]\nhostpci1: mapping=gpu\nhostpci2: mapping=gpu\n\n[snap]\nhostpci5: mapping=gpu\nhostpci6: mapping=gpu\n"}},

		// b: entries of nodes outside the cluster.
		{name: "an entry of a node that left",
			files: map[string]string{"etc/pve/mapping/pci.cfg": withMapping("old\n\tmap id=10de:2bb1,node=n1,path=0000:05:00\n\tmap id=10de:2bb1,node=n0,path=0000:41:00.0\n\n")},
			want:  []string{"entry-unknown-node n0 [] [old] [0000:41:00.0]"}, says: "which is not in the cluster (/etc/pve/.members lists n1, n2, n3)"},
		{name: "node names are case-sensitive",
			files: map[string]string{"etc/pve/mapping/pci.cfg": withMapping("old\n\tmap id=10de:2bb1,node=N2,path=0000:05:00\n\n")},
			want:  []string{"entry-unknown-node N2 [] [old] [0000:05:00]"}},
		{name: "without .members no entry is known to be outside",
			files: map[string]string{"etc/pve/.members": "", "etc/pve/mapping/pci.cfg": withMapping("old\n\tmap id=10de:2bb1,node=n0,path=0000:41:00.0\n\n")},
			says:  "/etc/pve/.members is missing"},

		// c: HA and replication targets.
		{name: "a strict rule that allows a node without the mapping",
			files: map[string]string{"etc/pve/ha/resources.cfg": ha120, "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1:2,n2\n\tresources vm:100\n\tstrict 1\n\n", "etc/pve/mapping/pci.cfg": strings.ReplaceAll(clusterBase["etc/pve/mapping/pci.cfg"], "node=n2", "node=n3")},
			want:  []string{"target-node-short n2 [100] [gpu] []"}, says: "HA may recover it there (rule r, strict: n1, n2)"},
		{name: "a strict rule of nodes that have the mapping",
			files: map[string]string{"etc/pve/ha/resources.cfg": ha120, "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1,n3\n\tresources vm:100\n\tstrict 1\n\n", "etc/pve/mapping/pci.cfg": strings.ReplaceAll(clusterBase["etc/pve/mapping/pci.cfg"], "node=n2", "node=n3")}},
		{name: "a rule that is not strict falls back to every node",
			files: map[string]string{"etc/pve/ha/resources.cfg": ha120, "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1\n\tresources vm:100\n\n", "etc/pve/mapping/pci.cfg": "gpu\n\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n"},
			want:  []string{"target-node-short n2 [100] [gpu] []", "target-node-short n3 [100] [gpu] []"}, says: "when none of r's nodes (n1) is up"},
		{name: "no rule: any node",
			files: map[string]string{"etc/pve/ha/resources.cfg": ha120, "etc/pve/mapping/pci.cfg": "gpu\n\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\tmap id=10de:2bb1,node=n3,path=0000:01:00\n\n"},
			want:  []string{"target-node-short n2 [100] [gpu] []", "target-node-short n3 [100] [gpu] []"}, says: "Proxmox refuses a migration there (can't migrate to 'n2': missing mapped devices)"},
		{name: "fewer entries on the target: the migration goes through, the start fails",
			files: map[string]string{"etc/pve/replication.cfg": "local: 100-0\n\ttarget n3\n\tschedule */15\n\n", "etc/pve/mapping/pci.cfg": strings.Replace(clusterBase["etc/pve/mapping/pci.cfg"], "\tmap id=10de:2bb1,node=n3,path=0000:02:00\n", "", 1)},
			want:  []string{"target-node-short n3 [100] [gpu] []"}, says: "replication job 100-0 keeps its disks there to move it there; it takes 2 devices of mapping gpu, which has 1 entry on n3: a migration there goes through, and the VM then does not start (qemu-server: device '0000:01:00.0' assigned more than once)"},
		{name: "a disabled replication job, and one being removed",
			files: map[string]string{"etc/pve/replication.cfg": "local: 100-0\n\ttarget n3\n\tdisable 1\n\nlocal: 100-1\n\ttarget n2\n\tremove_job local\n\n", "etc/pve/mapping/pci.cfg": "gpu\n\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n"}},
		{name: "HA moves no disabled resource",
			files: map[string]string{"etc/pve/ha/resources.cfg": "vm: 100\n\tstate disabled\n\n", "etc/pve/mapping/pci.cfg": "gpu\n\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n"}},
		{name: "nor an ignored one",
			files: map[string]string{"etc/pve/ha/resources.cfg": "vm: 100\n\tstate ignored\n\n", "etc/pve/mapping/pci.cfg": "gpu\n\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n"}},
		{name: "a stopped resource still moves when its node fails",
			files: map[string]string{"etc/pve/ha/resources.cfg": "vm: 100\n\tstate stopped\n\n", "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1,n2\n\tresources vm:100\n\tstrict 1\n\n", "etc/pve/mapping/pci.cfg": "gpu\n\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n"},
			want:  []string{"target-node-short n2 [100] [gpu] []"}},
		{name: "a rule with a disable key is off, whatever its value",
			files: map[string]string{"etc/pve/ha/resources.cfg": ha120, "etc/pve/ha/rules.cfg": "node-affinity: r\n\tdisable 0\n\tnodes n1\n\tresources vm:100\n\tstrict 1\n\n", "etc/pve/mapping/pci.cfg": "gpu\n\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\tmap id=10de:2bb1,node=n2,path=0000:01:00\n\tmap id=10de:2bb1,node=n2,path=0000:02:00\n\n"},
			want:  []string{"target-node-short n3 [100] [gpu] []"}, says: "is in no node-affinity rule"},
		{name: "a restricted HA group (PVE 8) is a strict rule",
			files: map[string]string{"etc/pve/ha/resources.cfg": "vm: 100\n\tgroup g\n\tstate started\n\n", "etc/pve/ha/groups.cfg": "group: g\n\tnodes n2:1,n1:2\n\trestricted 1\n\n", "etc/pve/mapping/pci.cfg": "gpu\n\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n"},
			want:  []string{"target-node-short n2 [100] [gpu] []"}, says: "rule group g, strict: n2, n1"},
		{name: "a group and a rule for one resource: HA drops both",
			files: map[string]string{"etc/pve/ha/resources.cfg": "vm: 100\n\tgroup g\n\n", "etc/pve/ha/groups.cfg": "group: g\n\tnodes n1\n\trestricted 1\n\n", "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1\n\tresources vm:100\n\tstrict 1\n\n", "etc/pve/mapping/pci.cfg": "gpu\n\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\tmap id=10de:2bb1,node=n2,path=0000:01:00\n\tmap id=10de:2bb1,node=n2,path=0000:02:00\n\n"},
			want:  []string{"target-node-short n3 [100] [gpu] []"}, says: "is in r and group g"},
		{name: "its own node is no target: a problem of the guest",
			files: map[string]string{"etc/pve/ha/resources.cfg": ha120, "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1,n2\n\tresources vm:100\n\tstrict 1\n\n",
				"etc/pve/nodes/n1/qemu-server/100.conf": "hostpci0: mapping=gpu\nhostpci1: mapping=gpu\nhostpci2: mapping=gpu\n",
				"etc/pve/mapping/pci.cfg":               strings.Replace(withMapping(""), "\tmap id=10de:2bb1,node=n2,path=0000:02:00\n", "\tmap id=10de:2bb1,node=n2,path=0000:02:00\n\tmap id=10de:2bb1,node=n2,path=0000:03:00\n", 1)},
			want: []string{"guest-node-short n1 [100] [gpu] []"}},
		{name: "a replication target outside the cluster is none",
			files: map[string]string{"etc/pve/replication.cfg": "local: 100-0\n\ttarget n0\n\n"}},
		{name: "without .members HA may use every node with a guest directory",
			files: map[string]string{"etc/pve/.members": "", "etc/pve/ha/resources.cfg": ha120, "etc/pve/nodes/n2/lxc/200.conf": "hostname: plain\n",
				"etc/pve/mapping/pci.cfg": "gpu\n\tmap id=10de:2bb1,node=n1,path=0000:01:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n"},
			want: []string{"target-node-short n2 [100] [gpu] []"}},
		{name: "a rule's node outside the cluster is no target",
			files: map[string]string{"etc/pve/ha/resources.cfg": ha120, "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1,n0\n\tresources vm:100\n\tstrict 1\n\n"}},

		// d: one GPU in two mappings.
		{name: "a GPU in two mappings used by two VMs",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/101.conf": "hostpci0: mapping=solo\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n")},
			want:  []string{"gpu-in-two-mappings n1 [100 101] [gpu solo] [0000:02:00]"}, says: "VM 100 and VM 101 on n1 can both take 0000:02:00"},
		{name: "a function of a whole slot is the same GPU",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/101.conf": "hostpci0: mapping=solo\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2230,node=n1,path=0000:05:00.0;0000:02:00.0\n\n")},
			want:  []string{"gpu-in-two-mappings n1 [100 101] [gpu solo] [0000:02:00.0]"}, says: "the entries disagree on its id: 10de:2230, 10de:2bb1"},
		{name: "the same path on another node is another GPU",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/101.conf": "hostpci0: mapping=solo\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:07:00\n\tmap id=10de:2bb1,node=n2,path=0000:02:00\n\n")}},
		{name: "a template never runs",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/101.conf": "hostpci0: mapping=solo\ntemplate: 1\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n")}},
		{name: "the guests of other nodes do not run here",
			files: map[string]string{"etc/pve/nodes/n2/qemu-server/101.conf": "hostpci0: mapping=solo\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\tmap id=10de:2bb1,node=n2,path=0000:07:00\n\n")}},
		{name: "a negative resource-affinity rule keeps them apart",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/101.conf": "hostpci0: mapping=solo\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n"),
				"etc/pve/ha/resources.cfg": "vm: 100\n\nvm: 101\n\n", "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1\n\tresources vm:100,vm:101\n\tstrict 1\n\nresource-affinity: apart\n\taffinity negative\n\tresources vm:101,vm:100\n\n"}},
		{name: "a positive one does not",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/101.conf": "hostpci0: mapping=solo\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n"),
				"etc/pve/ha/resources.cfg": "vm: 100\n\nvm: 101\n\n", "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1\n\tresources vm:100,vm:101\n\tstrict 1\n\nresource-affinity: together\n\taffinity positive\n\tresources vm:101,vm:100\n\n"},
			want: []string{"gpu-in-two-mappings n1 [100 101] [gpu solo] [0000:02:00]"}},
		{name: "nor a negative rule of guests HA ignores",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/101.conf": "hostpci0: mapping=solo\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n"),
				"etc/pve/ha/resources.cfg": "vm: 100\n\tstate ignored\n\nvm: 101\n\n", "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1\n\tresources vm:101\n\tstrict 1\n\nresource-affinity: apart\n\taffinity negative\n\tresources vm:101,vm:100\n\n"},
			want: []string{"gpu-in-two-mappings n1 [100 101] [gpu solo] [0000:02:00]"}},
		{name: "one VM using both mappings is Proxmox's to choose",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/100.conf": "hostpci0: mapping=gpu\nhostpci1: mapping=solo\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:07:00\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n")}},
		{name: "mediated devices on both sides share the GPU",
			files: map[string]string{"etc/pve/nodes/n1/qemu-server/100.conf": "hostpci0: mapping=gpu,mdev=nvidia-a\n", "etc/pve/nodes/n1/qemu-server/101.conf": "hostpci0: mapping=solo,mdev=nvidia-b\n", "etc/pve/mapping/pci.cfg": withMapping("solo\n\tmap id=10de:2bb1,node=n1,path=0000:02:00\n\n")}},

		// What the view reads besides.
		{name: "guest configs of a node that left",
			files: map[string]string{"etc/pve/nodes/n0/qemu-server/300.conf": "hostpci0: mapping=gpu\n"},
			want:  []string{"guest-node-short n0 [300] [gpu] []"}, says: "n0 (1 guest config): not in the cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ReadCluster(clusterHost(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range c.Problems {
				got = append(got, problemKey(p))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n got %q\nwant %q\n%+v", got, tc.want, c.Problems)
			}
			text := strings.Join(c.Notes, "\n")
			if len(c.Problems) > 0 {
				text = c.Problems[0].Message + "\n" + text
			}
			if !strings.Contains(text, tc.says) {
				t.Errorf("no %q in\n%s", tc.says, text)
			}
		})
	}
}

// What the view takes from each guest config.
func TestClusterGuests(t *testing.T) {
	c, err := ReadCluster(clusterHost(t, map[string]string{
		"etc/pve/nodes/n1/qemu-server/100.conf": "hostpci0: mapping=gpu,pcie=1\nhostpci1: 0000:81:00.0\nhostpci2: mapping=gpu\nhostpci10: mapping=other,mdev=nvidia-660\nname: train\n",
		"etc/pve/nodes/n1/qemu-server/101.conf": "hostpci0: 0000:81:00.0\nname: raw\n", // no mapping: not a GPU the view can tell
		"etc/pve/nodes/n2/lxc/200.conf":         "dev0: /dev/nvidia0,gid=44\ndev1: path=/dev/nvidiactl\ndev2: /dev/dri/card0\nhostname: ct\n",
		"etc/pve/nodes/n2/lxc/201.conf":         "hostname: raw\nlxc.cgroup2.devices.allow: c 195:* rwm\nlxc.cgroup2.devices.allow: c 226:* rwm\nlxc.mount.entry: /dev/nvidia1 dev/nvidia1 none bind,optional,create=file\n",
		"etc/pve/nodes/n2/lxc/202.conf":         "hostname: cgroup-only\nlxc.cgroup.devices.allow: c 195:0 rwm\n",
		"etc/pve/nodes/n2/lxc/203.conf":         "hostname: none\ndev0: /dev/dri/renderD128\n",
		"etc/pve/nodes/n2/lxc/204.conf":         "hostname: broken\r\n", // refused, with a note
		"etc/pve/nodes/n2/lxc/notes.txt":        "not a config\n",
		"etc/pve/ha/resources.cfg":              "ct: 200\n\tstate stopped\n\n",
		"etc/pve/replication.cfg":               "local: 200-0\n\ttarget n3\n\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range c.Guests {
		var uses []string
		for _, u := range g.Uses {
			uses = append(uses, fmt.Sprintf("%s%v/%d", u.Mapping, u.Keys, u.Needs))
		}
		ha := ""
		if g.HA != nil {
			ha = g.HA.SID + "=" + g.HA.State
		}
		got = append(got, fmt.Sprintf("%s %s %s uses=%v devices=%v cgroup=%v ha=%s rep=%v", g.Label(), g.Node, g.Name, uses, g.Devices, g.CgroupAllow, ha, g.Replication))
	}
	want := []string{
		"VM 100 n1 train uses=[gpu[hostpci0 hostpci2]/2 other[hostpci10]/1] devices=[] cgroup=[] ha= rep=[]",
		"CT 200 n2 ct uses=[] devices=[/dev/nvidia0 /dev/nvidiactl] cgroup=[] ha=ct:200=stopped rep=[{200-0 n3}]",
		"CT 201 n2 raw uses=[] devices=[/dev/nvidia1] cgroup=[c 195:* rwm] ha= rep=[]",
		"CT 202 n2 cgroup-only uses=[] devices=[] cgroup=[c 195:0 rwm] ha= rep=[]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("guests:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if notes := strings.Join(c.Notes, "\n"); !strings.Contains(notes, "204.conf:1: the line ends in CR LF") {
		t.Errorf("no note of the refused config:\n%s", notes)
	}
}

// The sample host's cluster: three nodes and one planted problem of each kind.
func TestClusterSampleHost(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ReadCluster(h)
	if err != nil {
		t.Fatal(err)
	}
	if c.Node != "kpro6" || c.Members == nil || strings.Join(c.Members.Names(), ",") != "kpro5,kpro6,kpro7" || c.Members.Cluster != "kpro" {
		t.Errorf("members %+v, node %s", c.Members, c.Node)
	}
	var got []string
	for _, p := range c.Problems {
		got = append(got, problemKey(p))
	}
	want := []string{
		"guest-node-short kpro7 [171] [pro6000] []",
		"entry-unknown-node kpro4 [] [pro6000] [0000:21:00]",
		"target-node-short kpro6 [120] [a6000-ws] []",
		"gpu-in-two-mappings kpro5 [120 125] [a6000-ws pro6000] [0000:81:00]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
	var guests []string
	for _, g := range c.Guests {
		guests = append(guests, g.Label())
	}
	if strings.Join(guests, ",") != "VM 120,VM 125,CT 150,VM 179,CT 129,VM 131,VM 171" {
		t.Errorf("guests %v", guests)
	}
	if len(c.Notes) != 0 {
		t.Errorf("notes on the sample host: %q", c.Notes)
	}
}
