package pve

import "slices"

// clusterSysfsNote says what the cluster view cannot see: it reads other nodes' configs,
// and sysfs of none.
const clusterSysfsNote = "read from /etc/pve alone: every node's guest configs, never a node's sysfs; whether an entry still matches its node's hardware is checked on that node (gpusplit pve mappings), and which GPU a container's /dev/nvidiaN is too"

// ClusterReport is pve cluster -o json (docs/json.md).
type ClusterReport struct {
	Node     string               `json:"node"`
	Cluster  string               `json:"cluster"`
	Quorate  bool                 `json:"quorate"`
	Members  bool                 `json:"members"`
	Nodes    []ClusterNode        `json:"nodes"`
	Mappings []ClusterMapping     `json:"mappings"`
	Guests   []ClusterGuestReport `json:"guests"`
	Problems []ClusterProblem     `json:"problems"`
	Notes    []string             `json:"notes"`
}

// ClusterNode is a member of the cluster.
type ClusterNode struct {
	Name     string `json:"name"`
	ID       int    `json:"id"`
	Online   bool   `json:"online"`
	IP       string `json:"ip"`
	ThisNode bool   `json:"this_node"`
}

// ClusterEntry is an entry of a mapping.
type ClusterEntry struct {
	Node string `json:"node"`
	Path string `json:"path"`
	ID   string `json:"id"`
}

// ClusterMapping is a PCI mapping: its entries, how many each node has, and the guests
// that use it.
type ClusterMapping struct {
	ID          string         `json:"id"`
	Description string         `json:"description"`
	Entries     []ClusterEntry `json:"entries"`
	PerNode     map[string]int `json:"per_node"`
	UsedBy      []int          `json:"used_by"`
}

// ClusterUse is a VM's use of a mapping: its hostpciN keys and how many entries it takes.
type ClusterUse struct {
	Mapping string   `json:"mapping"`
	Keys    []string `json:"keys"`
	Needs   int      `json:"needs"`
}

// ClusterHA is a guest's HA resource: its state, and the node-affinity rule that keeps
// it on Nodes.
type ClusterHA struct {
	Managed bool     `json:"managed"`
	State   string   `json:"state"`
	Rule    string   `json:"rule"`
	Strict  bool     `json:"strict"`
	Nodes   []string `json:"nodes"`
}

// ClusterGuestReport is a guest of the cluster view, Kind "vm" or "ct".
type ClusterGuestReport struct {
	ID          int           `json:"id"`
	Kind        string        `json:"kind"`
	Node        string        `json:"node"`
	Name        string        `json:"name"`
	Template    bool          `json:"template"`
	Config      string        `json:"config"`
	Mappings    []ClusterUse  `json:"mappings"`
	Devices     []string      `json:"devices"`
	CgroupAllow []string      `json:"cgroup_allow"`
	HA          ClusterHA     `json:"ha"`
	Replication []Replication `json:"replication"`
}

// Report is the cluster view as pve cluster shows it; every list is [] when empty.
func (c *Cluster) Report() ClusterReport {
	doc := ClusterReport{
		Node: c.Node, Nodes: []ClusterNode{}, Mappings: []ClusterMapping{}, Guests: []ClusterGuestReport{},
		Problems: []ClusterProblem{}, Notes: append([]string{clusterSysfsNote}, c.Notes...),
	}
	if m := c.Members; m != nil {
		doc.Members, doc.Cluster, doc.Quorate = true, m.Cluster, m.Quorate
		for _, n := range m.Nodes {
			doc.Nodes = append(doc.Nodes, ClusterNode{Name: n.Name, ID: n.ID, Online: n.Online, IP: n.IP, ThisNode: n.Name == c.Node})
		}
	}
	for _, m := range c.Mappings.Mappings {
		mj := ClusterMapping{ID: m.ID, Description: m.Props["description"], Entries: []ClusterEntry{}, PerNode: map[string]int{}, UsedBy: []int{}}
		for _, e := range m.Maps {
			mj.Entries = append(mj.Entries, ClusterEntry{Node: e.Node, Path: e.Path, ID: e.ID})
			mj.PerNode[e.Node]++
		}
		for _, gu := range c.Guests {
			if slices.ContainsFunc(gu.Uses, func(u MappingUse) bool { return u.Mapping == m.ID }) {
				mj.UsedBy = append(mj.UsedBy, gu.ID)
			}
		}
		doc.Mappings = append(doc.Mappings, mj)
	}
	for _, gu := range c.Guests {
		gj := ClusterGuestReport{
			ID: gu.ID, Kind: "vm", Node: gu.Node, Name: gu.Name, Template: gu.Template, Config: gu.Path,
			Mappings: []ClusterUse{}, Devices: append([]string{}, gu.Devices...), CgroupAllow: append([]string{}, gu.CgroupAllow...),
			HA: ClusterHA{Nodes: []string{}}, Replication: []Replication{},
		}
		if gu.Kind == LXC {
			gj.Kind = "ct"
		}
		for _, u := range gu.Uses {
			gj.Mappings = append(gj.Mappings, ClusterUse{Mapping: u.Mapping, Keys: u.Keys, Needs: u.Needs})
		}
		if r := gu.HA; r != nil {
			gj.HA.Managed, gj.HA.State = true, r.State
			if a := r.Affinity; a != nil {
				gj.HA.Rule, gj.HA.Strict, gj.HA.Nodes = a.Rule, a.Strict, append([]string{}, a.Nodes...)
			}
		}
		gj.Replication = append(gj.Replication, gu.Replication...)
		doc.Guests = append(doc.Guests, gj)
	}
	doc.Problems = append(doc.Problems, c.Problems...)
	return doc
}
