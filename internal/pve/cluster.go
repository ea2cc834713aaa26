package pve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/pveprop"
)

// The cluster's files besides pci.cfg that the cluster view reads. pmxcfs replicates all
// of /etc/pve to every node, so one node reads every node's guests from them.
const (
	// MembersPath is the member list pmxcfs writes from corosync's view (pve-cluster
	// src/pmxcfs/status.c, cfs_create_memberlist_msg).
	MembersPath = "/etc/pve/.members"
	// NodesDir holds nodes/<node>/{qemu-server,lxc}/<vmid>.conf: the directory a config
	// is in is the node that owns the guest.
	NodesDir        = "/etc/pve/nodes"
	HAResourcesPath = "/etc/pve/ha/resources.cfg"
	HAGroupsPath    = "/etc/pve/ha/groups.cfg"
	HARulesPath     = "/etc/pve/ha/rules.cfg"
	ReplicationPath = "/etc/pve/replication.cfg"
)

// The kinds of cluster problems (docs/proxmox.md, "The whole cluster").
const (
	// ProblemGuestShort: a guest uses a mapping more times than the mapping has entries on
	// the guest's node, or the mapping has none there.
	ProblemGuestShort = "guest-node-short"
	// ProblemUnknownNode: a mapping entry names a node that is not a cluster member.
	ProblemUnknownNode = "entry-unknown-node"
	// ProblemTargetShort: a node HA may move a VM to, or the target of its replication,
	// has fewer entries of the VM's mapping than the VM uses.
	ProblemTargetShort = "target-node-short"
	// ProblemSharedGPU: one device of a node is in two mappings that guests of that node
	// use, and the guests can run at the same time.
	ProblemSharedGPU = "gpu-in-two-mappings"
)

// Member is a node of the cluster, as .members lists it.
type Member struct {
	Name   string
	ID     int
	Online bool
	IP     string // "" when pmxcfs knows none
}

// Members is /etc/pve/.members.
type Members struct {
	// Node is the node pmxcfs runs on: this node.
	Node string
	// Cluster is the cluster's name; "" on a node that is in no cluster, whose .members
	// then holds only its own name.
	Cluster string
	Quorate bool
	// Nodes are sorted by name; on a node in no cluster, the node alone.
	Nodes []Member
}

// Has reports whether node is a member.
func (m *Members) Has(node string) bool {
	return slices.ContainsFunc(m.Nodes, func(n Member) bool { return n.Name == node })
}

// Names are the members' names, sorted.
func (m *Members) Names() []string {
	var out []string
	for _, n := range m.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// ParseMembers reads .members. pmxcfs writes "nodename" and "version", and, in a cluster,
// "cluster" {name, version, nodes, quorate} and "nodelist" {<name>: {id, online, ip}}
// with 0/1 for the flags and ip only where it knows one; the nodes come in hash order.
func ParseMembers(data []byte) (*Members, error) {
	var raw struct {
		Nodename *string `json:"nodename"`
		Cluster  *struct {
			Name    string `json:"name"`
			Quorate int    `json:"quorate"`
		} `json:"cluster"`
		Nodelist map[string]struct {
			ID     int    `json:"id"`
			Online int    `json:"online"`
			IP     string `json:"ip"`
		} `json:"nodelist"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %v", MembersPath, err)
	}
	if raw.Nodename == nil || !nodeName.MatchString(*raw.Nodename) {
		return nil, fmt.Errorf("%s has no valid nodename: it is not the file pmxcfs writes", MembersPath)
	}
	m := &Members{Node: *raw.Nodename}
	if raw.Cluster == nil {
		// A node in no cluster: itself, always quorate (pmxcfs without corosync.conf).
		m.Quorate = true
		m.Nodes = []Member{{Name: m.Node, Online: true}}
		return m, nil
	}
	m.Cluster, m.Quorate = raw.Cluster.Name, raw.Cluster.Quorate != 0
	for _, name := range slices.Sorted(maps.Keys(raw.Nodelist)) {
		n := raw.Nodelist[name]
		m.Nodes = append(m.Nodes, Member{Name: name, ID: n.ID, Online: n.Online != 0, IP: n.IP})
	}
	return m, nil
}

// section is one section of a PVE::SectionConfig file: "type: id", then indented
// "key value" lines up to an empty line.
type section struct {
	Type, ID string
	Props    map[string]string
	// Set lists the keys present, a bare key (no value) included.
	Set map[string]bool
}

var (
	sectionHeader = lazyre.New(`^(\S+):\s*(\S+)\s*$`)
	sectionKey    = lazyre.New(`^\s+(\S+)(\s+(.*\S))?\s*$`)
)

// parseSections reads a SectionConfig file as PVE::SectionConfig's parse_config does:
// lines starting with optional blanks and # are skipped everywhere; a section ends at the
// first empty line (a line of blanks does not end it, and the next header is then lost
// as a bad key line); a line that is no key line inside a section, or no header outside
// one, is ignored; a repeated key keeps its first value; a repeated section id keeps
// the last section. The types are lower-cased, as the HA and replication parsers do.
// It returns what Proxmox would have warned about too.
func parseSections(name, data string) ([]section, []string) {
	var out []section
	var warnings []string
	index := map[string]int{}
	var cur *section
	closeSection := func() {
		if cur == nil {
			return
		}
		key := cur.Type + ":" + cur.ID
		if i, ok := index[key]; ok {
			warnings = append(warnings, fmt.Sprintf("%s: section %s is defined twice: Proxmox keeps the last", name, key))
			out[i] = *cur
		} else {
			index[key] = len(out)
			out = append(out, *cur)
		}
		cur = nil
	}
	for i, l := range strings.Split(data, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), "#") {
			continue
		}
		if l == "" || l == "0" { // Perl's false strings end a section
			closeSection()
			continue
		}
		if cur == nil {
			m := sectionHeader.FindStringSubmatch(l)
			if m == nil {
				if strings.TrimSpace(l) != "" {
					warnings = append(warnings, fmt.Sprintf("%s:%d: not a section header, ignored as Proxmox ignores it: %q", name, i+1, l))
				}
				continue
			}
			cur = &section{Type: strings.ToLower(m[1]), ID: m[2], Props: map[string]string{}, Set: map[string]bool{}}
			continue
		}
		m := sectionKey.FindStringSubmatch(l)
		if m == nil {
			if strings.TrimSpace(l) == "" {
				warnings = append(warnings, fmt.Sprintf("%s:%d: this blank line holds spaces or tabs: Proxmox does not end section %s here", name, i+1, cur.ID))
			} else {
				warnings = append(warnings, fmt.Sprintf("%s:%d: not a key line of section %s, ignored as Proxmox ignores it: %q", name, i+1, cur.ID, l))
			}
			continue
		}
		if cur.Set[m[1]] {
			warnings = append(warnings, fmt.Sprintf("%s:%d: %s is set twice in section %s: Proxmox refuses the second", name, i+1, m[1], cur.ID))
			continue
		}
		cur.Set[m[1]] = true
		cur.Props[m[1]] = m[3]
	}
	closeSection()
	return out, warnings
}

// splitList splits a list value as PVE::Tools::split_list does: at commas, semicolons
// and white space.
func splitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' })
}

// parseBool reads a boolean as JSONSchema's parse_boolean: ok is false for anything else.
func parseBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return true, true
	case "0", "off", "no", "false":
		return false, true
	}
	return false, false
}

// nodePriority reads "node[:priority]" as PVE::HA::Tools::parse_node_priority.
var nodePriority = lazyre.New(`^([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)(:(\d+))?$`)

// haNodes are the nodes of a node list (nodes of a group or node-affinity rule), the
// entries that are no node skipped as HA skips them.
func haNodes(v string) []string {
	var out []string
	for _, e := range splitList(v) {
		if m := nodePriority.FindStringSubmatch(e); m != nil && !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// NodeAffinity is where HA may place a resource: the nodes of its node-affinity rule (or
// of its HA group, which PVE 9 turns into such a rule), strict or not.
type NodeAffinity struct {
	// Rule is the rule's id, or "group <name>" for an HA group.
	Rule   string
	Nodes  []string
	Strict bool
}

// HAResource is a guest that the HA manager manages (ha/resources.cfg).
type HAResource struct {
	// SID is the resource id: vm:<id> or ct:<id>.
	SID string
	// State is the requested state, "started" when unset ("enabled" is its old name).
	State string
	// Affinity is nil where no rule (or more than one, which HA drops) applies: HA may
	// then use every node.
	Affinity *NodeAffinity
}

// Relocates reports whether HA moves the resource to another node when its node fails:
// it does for started and stopped resources, not for disabled or ignored ones
// (pve-ha-manager src/PVE/HA/Resources.pm, the state's description).
func (r *HAResource) Relocates() bool { return r.State == "started" || r.State == "stopped" }

// Replication is a storage replication job of a guest (replication.cfg, type local):
// it keeps the guest's disks on Target so that the guest can move there.
type Replication struct {
	Job    string `json:"job"` // <vmid>-<n>
	Target string `json:"target"`
}

// MappingUse is how a VM uses one mapping: its hostpciN entries that name it.
type MappingUse struct {
	Mapping string
	Keys    []string
	// Needs is how many of the mapping's entries on the VM's node the VM takes: one per
	// entry, as qemu-server's choose_hostpci_devices gives each its own device; entries
	// with a mediated device (mdev=, but NVIDIA's vGPU types nvidia-N, which take a
	// virtual function each) share one.
	Needs int
	// Exclusive are the keys that take a device of their own.
	Exclusive []string
}

// ClusterGuest is a guest that uses a PCI mapping or passes GPUs to a container.
type ClusterGuest struct {
	ID       int
	Kind     string // QEMU or LXC
	Node     string
	Name     string
	Template bool
	Path     string
	// Uses are a VM's mappings, in the order of their first hostpciN.
	Uses []MappingUse
	// Devices are a container's nvidia device nodes (devN, lxc.mount.entry), and
	// CgroupAllow its cgroup lines for the nvidia major 195.
	Devices     []string
	CgroupAllow []string
	// HA is nil for a guest the HA manager does not manage.
	HA          *HAResource
	Replication []Replication
}

// Label is "VM 131" or "CT 129".
func (g *ClusterGuest) Label() string {
	if g.Kind == LXC {
		return fmt.Sprintf("CT %d", g.ID)
	}
	return fmt.Sprintf("VM %d", g.ID)
}

// ClusterProblem is a finding of the cluster view: what it is, and what it concerns.
type ClusterProblem struct {
	Kind     string   `json:"kind"`
	Node     string   `json:"node"`
	Guests   []int    `json:"guests"`
	Mappings []string `json:"mappings"`
	// Paths are the devices it concerns (the entry's, or the device two mappings share).
	Paths   []string `json:"paths"`
	Message string   `json:"message"`
}

// Cluster is the GPU configuration of the whole cluster, read from /etc/pve alone.
type Cluster struct {
	// Members is nil where .members is missing (a copy of /etc/pve without it).
	Members *Members
	// Node is this node.
	Node     string
	Mappings *MappingFile
	Guests   []ClusterGuest
	Problems []ClusterProblem
	Notes    []string
	// dirs are the nodes that have a directory under NodesDir.
	dirs []string
}

// ReadCluster reads the cluster's files and finds the problems. It reads every node's
// guest configs and never sysfs: whether an entry matches its node's hardware can only
// be checked on that node.
func ReadCluster(h *host.Host) (*Cluster, error) {
	c := &Cluster{}
	data, err := readSmall(h, MembersPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Notes = append(c.Notes, fmt.Sprintf("%s is missing (it exists wherever pmxcfs runs; a snapshot does not carry it): the cluster's nodes are unknown, so mapping entries of nodes outside the cluster are not looked for, and HA may use the nodes that have guest directories", MembersPath))
	case err != nil:
		return nil, err
	default:
		if c.Members, err = ParseMembers(data); err != nil {
			return nil, err
		}
	}
	if c.Members != nil {
		c.Node = c.Members.Node
	} else if c.Node, err = NodeName(h); err != nil {
		return nil, err
	}
	if c.Mappings, err = ReadMappings(h); err != nil {
		return nil, err
	}
	if err := c.readGuests(h); err != nil {
		return nil, err
	}
	ha, negative, err := c.readHA(h)
	if err != nil {
		return nil, err
	}
	reps, err := c.readReplication(h)
	if err != nil {
		return nil, err
	}
	for i := range c.Guests {
		g := &c.Guests[i]
		kind := "vm"
		if g.Kind == LXC {
			kind = "ct"
		}
		g.HA = ha[kind+":"+strconv.Itoa(g.ID)]
		g.Replication = reps[g.ID]
	}
	c.guestShort()
	c.unknownNodes()
	c.targetShort()
	c.sharedGPUs(negative)
	kinds := []string{ProblemGuestShort, ProblemUnknownNode, ProblemTargetShort, ProblemSharedGPU}
	slices.SortStableFunc(c.Problems, func(a, b ClusterProblem) int {
		if d := slices.Index(kinds, a.Kind) - slices.Index(kinds, b.Kind); d != 0 {
			return d
		}
		return strings.Compare(a.Node, b.Node)
	})
	return c, nil
}

// readSmall reads a file of /etc/pve, refusing one larger than pmxcfs holds.
func readSmall(h *host.Host, p string) ([]byte, error) {
	data, err := h.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFile {
		return nil, fmt.Errorf("%s is larger than 1 MiB, the most Proxmox's file system holds: it is not Proxmox's, not reading it", p)
	}
	return data, nil
}

// clusterNodes are the nodes HA and migrations may use: the members, or without
// .members the nodes that have guest directories, and this node.
func (c *Cluster) clusterNodes() []string {
	if c.Members != nil {
		return c.Members.Names()
	}
	out := slices.Clone(c.dirs)
	if !slices.Contains(out, c.Node) {
		out = append(out, c.Node)
	}
	slices.Sort(out)
	return out
}

// readGuests reads every node's guest configs and keeps the guests that use a mapping
// or pass GPUs to a container.
func (c *Cluster) readGuests(h *host.Host) error {
	nodes, err := h.ReadDir(NodesDir)
	if errors.Is(err, fs.ErrNotExist) {
		c.Notes = append(c.Notes, NodesDir+" is missing: no guest configs to read")
		return nil
	}
	if err != nil {
		return err
	}
	var strays []string
	for _, node := range nodes {
		if !nodeName.MatchString(node) || !h.IsDir(NodesDir+"/"+node) {
			continue // pmxcfs lists guests only under valid node names
		}
		c.dirs = append(c.dirs, node)
		found := 0
		for _, kind := range []string{QEMU, LXC} {
			dir := NodesDir + "/" + node + "/" + kind
			names, err := h.ReadDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			for _, n := range names {
				id, err := strconv.Atoi(strings.TrimSuffix(n, ".conf"))
				if err != nil || !strings.HasSuffix(n, ".conf") || id < 100 {
					continue
				}
				p := dir + "/" + n
				data, err := readSmall(h, p)
				if err != nil {
					c.Notes = append(c.Notes, fmt.Sprintf("%s: not read: %v", p, err))
					continue
				}
				g, err := ParseGuest(p, kind, id, string(data))
				if err != nil {
					c.Notes = append(c.Notes, fmt.Sprintf("not read: %v", err))
					continue
				}
				found++
				if cg, ok := clusterGuest(g, node); ok {
					c.Guests = append(c.Guests, cg)
				}
			}
		}
		if c.Members != nil && !c.Members.Has(node) && found > 0 {
			strays = append(strays, fmt.Sprintf("%s (%s)", node, plural.S(found, "guest config")))
		}
	}
	if len(strays) > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%s/%s: not in the cluster, yet its directory holds guest configs (pvecm delnode leaves them): no node starts those guests; move what is still needed to a member's directory and remove the rest", NodesDir, strings.Join(strays, ", ")))
	}
	slices.SortFunc(c.Guests, func(a, b ClusterGuest) int {
		if a.Node != b.Node {
			return strings.Compare(a.Node, b.Node)
		}
		return a.ID - b.ID
	})
	return nil
}

// clusterGuest reads what a guest config says of GPUs: a VM's mapped hostpciN entries,
// a container's nvidia device nodes and cgroup lines. ok is false for a guest with none.
func clusterGuest(g *Guest, node string) (ClusterGuest, bool) {
	cg := ClusterGuest{ID: g.ID, Kind: g.Kind, Node: node, Path: g.Name}
	if v, _ := g.Get("template"); v == "1" {
		cg.Template = true
	}
	switch g.Kind {
	case QEMU:
		cg.Name, _ = g.Get("name")
		hostpcis := g.Numbered("hostpci")
		for _, n := range slices.Sorted(maps.Keys(hostpcis)) {
			k := hostpcis[n]
			props := pveprop.Parse(k.Value, "host")
			name := props["mapping"]
			if name == "" {
				continue
			}
			i := slices.IndexFunc(cg.Uses, func(u MappingUse) bool { return u.Mapping == name })
			if i < 0 {
				cg.Uses = append(cg.Uses, MappingUse{Mapping: name})
				i = len(cg.Uses) - 1
			}
			u := &cg.Uses[i]
			u.Keys = append(u.Keys, k.Name)
			if md, ok := props["mdev"]; !ok || nvidiaVGPU.MatchString(md) {
				u.Exclusive = append(u.Exclusive, k.Name)
			}
			u.Needs = max(len(u.Exclusive), 1)
		}
		return cg, len(cg.Uses) > 0
	case LXC:
		cg.Name, _ = g.Get("hostname")
		for _, k := range g.Keys() {
			switch {
			case strings.HasPrefix(k.Name, "dev") && k.Name != "dev" && strings.Trim(k.Name[3:], "0123456789") == "":
				if p := DevPath(k.Value); isNvidiaNode(p) && !slices.Contains(cg.Devices, p) {
					cg.Devices = append(cg.Devices, p)
				}
			case k.Name == "lxc.mount.entry":
				if p := firstField(k.Value); isNvidiaNode(p) && !slices.Contains(cg.Devices, p) {
					cg.Devices = append(cg.Devices, p)
				}
			case k.Name == "lxc.cgroup2.devices.allow" || k.Name == "lxc.cgroup.devices.allow":
				// "c 195:* rwm": the major of the nvidia driver's device nodes.
				if f := strings.Fields(k.Value); len(f) >= 2 && strings.HasPrefix(f[1], "195:") {
					cg.CgroupAllow = append(cg.CgroupAllow, k.Value)
				}
			}
		}
		return cg, len(cg.Devices) > 0 || len(cg.CgroupAllow) > 0
	}
	return cg, false
}

// nvidiaVGPU is an NVIDIA vGPU type as qemu-server takes it in mdev= on drivers without
// mediated devices: each takes a virtual function of its own.
var nvidiaVGPU = lazyre.New(`^nvidia-\d+$`)

// readHA reads the HA resources and their node affinity, and the pairs of resources a
// negative resource-affinity rule keeps on different nodes.
func (c *Cluster) readHA(h *host.Host) (map[string]*HAResource, map[[2]string]bool, error) {
	read := func(p string) ([]section, error) {
		data, err := readSmall(h, p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		secs, warnings := parseSections(p, string(data))
		c.Notes = append(c.Notes, warnings...)
		return secs, nil
	}
	resources, err := read(HAResourcesPath)
	if err != nil || len(resources) == 0 {
		return nil, nil, err
	}
	groups, err := read(HAGroupsPath)
	if err != nil {
		return nil, nil, err
	}
	rules, err := read(HARulesPath)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]*HAResource{}
	var order []string
	for _, s := range resources {
		if s.Type != "vm" && s.Type != "ct" {
			continue
		}
		sid := s.Type + ":" + s.ID
		state := s.Props["state"]
		switch state {
		case "":
			state = "started"
		case "enabled":
			state = "started" // its old name
		}
		out[sid] = &HAResource{SID: sid, State: state}
		order = append(order, sid)
	}
	// Each resource's node affinity: the enabled node-affinity rules that name it, and its
	// group, which pve-ha-manager turns into one more such rule (migrate_groups_to_rules).
	// A rule with a disable key is skipped whatever its value (Rules.pm foreach_rule).
	sources := map[string][]NodeAffinity{}
	for _, s := range rules {
		if s.Type != "node-affinity" || s.Set["disable"] {
			continue
		}
		strict, _ := parseBool(s.Props["strict"])
		a := NodeAffinity{Rule: s.ID, Nodes: haNodes(s.Props["nodes"]), Strict: strict}
		for _, sid := range splitList(s.Props["resources"]) {
			sources[sid] = append(sources[sid], a)
		}
	}
	for _, res := range resources {
		sid, name := res.Type+":"+res.ID, res.Props["group"]
		if out[sid] == nil || name == "" {
			continue
		}
		i := slices.IndexFunc(groups, func(s section) bool { return s.Type == "group" && s.ID == name })
		if i < 0 {
			c.Notes = append(c.Notes, fmt.Sprintf("%s: %s names HA group %s, which %s does not have: HA ignores it", HAResourcesPath, sid, name, HAGroupsPath))
			continue
		}
		restricted, _ := parseBool(groups[i].Props["restricted"])
		sources[sid] = append(sources[sid], NodeAffinity{Rule: "group " + name, Nodes: haNodes(groups[i].Props["nodes"]), Strict: restricted})
	}
	for _, sid := range order {
		switch src := sources[sid]; {
		case len(src) == 1:
			a := src[0]
			out[sid].Affinity = &a
		case len(src) > 1:
			var names []string
			for _, a := range src {
				names = append(names, a.Rule)
			}
			c.Notes = append(c.Notes, fmt.Sprintf("HA resource %s is in %s: pve-ha-manager drops every node-affinity rule of a resource that is in another one, so HA may put it on any node; keep one", sid, strings.Join(names, " and ")))
		}
	}
	// Negative resource affinity: the HA manager keeps these resources on separate nodes.
	negative := map[[2]string]bool{}
	for _, s := range rules {
		if s.Type != "resource-affinity" || s.Set["disable"] || s.Props["affinity"] != "negative" {
			continue
		}
		sids := splitList(s.Props["resources"])
		for _, a := range sids {
			for _, b := range sids {
				if a < b {
					negative[[2]string{a, b}] = true
				}
			}
		}
	}
	return out, negative, nil
}

// readReplication reads the enabled local replication jobs, by guest.
func (c *Cluster) readReplication(h *host.Host) (map[int][]Replication, error) {
	data, err := readSmall(h, ReplicationPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	secs, warnings := parseSections(ReplicationPath, string(data))
	c.Notes = append(c.Notes, warnings...)
	out := map[int][]Replication{}
	for _, s := range secs {
		if s.Type != "local" {
			continue
		}
		if off, _ := parseBool(s.Props["disable"]); off || s.Props["remove_job"] != "" {
			continue
		}
		guest, _, ok := strings.Cut(s.ID, "-")
		id, err := strconv.Atoi(guest)
		if !ok || err != nil || s.Props["target"] == "" {
			continue
		}
		out[id] = append(out[id], Replication{Job: s.ID, Target: s.Props["target"]})
	}
	return out, nil
}

// entriesOn counts a mapping's entries on a node; 0 for a mapping pci.cfg lacks.
func (c *Cluster) entriesOn(mapping, node string) int {
	if m := c.Mappings.Mapping(mapping); m != nil {
		return len(m.NodeMaps(node))
	}
	return 0
}

// startFailure is what qemu-server says when a VM with the use starts on a node where
// the mapping has have entries.
func (c *Cluster) startFailure(u MappingUse, node string, have int) string {
	switch {
	case have == 0:
		return fmt.Sprintf("PCI device mapping not found for '%s'", u.Mapping)
	case have == 1 && len(u.Exclusive) > 1:
		// One alternative: each entry takes it, and the second is refused.
		first, _, _ := strings.Cut(c.Mappings.Mapping(u.Mapping).NodeMaps(node)[0].Path, ";")
		if !strings.Contains(first, ".") {
			first += ".0"
		}
		return fmt.Sprintf("device '%s' assigned more than once", first)
	}
	return fmt.Sprintf("could not find a free device for '%s'", u.Exclusive[have])
}

// has says how many entries a mapping has on a node, in words.
func has(n int, node string) string {
	if n == 0 {
		return "no entry on " + node
	}
	return fmt.Sprintf("%s on %s", plural.N(n, "entry", "entries"), node)
}

// guestShort finds the guests that cannot start on their own node: a mapping with fewer
// entries there than the guest takes. A template never starts.
func (c *Cluster) guestShort() {
	for _, g := range c.Guests {
		if g.Template {
			continue
		}
		for _, u := range g.Uses {
			have := c.entriesOn(u.Mapping, g.Node)
			if have >= u.Needs {
				continue
			}
			what := fmt.Sprintf("mapping %s, which has %s", u.Mapping, has(have, g.Node))
			if c.Mappings.Mapping(u.Mapping) == nil {
				what = fmt.Sprintf("mapping %s, which %s does not have", u.Mapping, MappingPath)
			}
			c.Problems = append(c.Problems, ClusterProblem{
				Kind: ProblemGuestShort, Node: g.Node, Guests: []int{g.ID}, Mappings: []string{u.Mapping}, Paths: []string{},
				Message: fmt.Sprintf("%s on %s takes %s of %s: it cannot start there (qemu-server: %s); add %s's devices to %s, or remove hostpci entries",
					g.Label(), g.Node, plural.S(u.Needs, "device"), what, c.startFailure(u, g.Node, have), g.Node, u.Mapping),
			})
		}
	}
}

// unknownNodes finds the mapping entries of nodes that are not members.
func (c *Cluster) unknownNodes() {
	if c.Members == nil {
		return
	}
	for _, m := range c.Mappings.Mappings {
		for _, e := range m.Maps {
			if c.Members.Has(e.Node) {
				continue
			}
			c.Problems = append(c.Problems, ClusterProblem{
				Kind: ProblemUnknownNode, Node: e.Node, Guests: []int{}, Mappings: []string{m.ID}, Paths: []string{e.Path},
				Message: fmt.Sprintf("mapping %s has an entry for node %s (path=%s), which is not in the cluster (%s lists %s): no node uses it, and a node that joins under that name later takes it as its own; remove it (Datacenter → Resource Mappings → %s) or correct the node's name",
					m.ID, e.Node, e.Path, MembersPath, strings.Join(c.Members.Names(), ", "), m.ID),
			})
		}
	}
}

// target is a node a guest may be moved to, and why.
type target struct {
	node string
	why  []string
}

// targets are the nodes a VM may be moved to: where HA may recover it (a started or
// stopped resource: the nodes of its strict rule, or every node), and the targets of
// its replication jobs. Its own node is none; nodes outside the cluster are left out.
func (c *Cluster) targets(g ClusterGuest) []target {
	var out []target
	add := func(node, why string) {
		if node == g.Node || (c.Members != nil && !c.Members.Has(node)) {
			return
		}
		i := slices.IndexFunc(out, func(t target) bool { return t.node == node })
		if i < 0 {
			out = append(out, target{node: node})
			i = len(out) - 1
		}
		out[i].why = append(out[i].why, why)
	}
	if r := g.HA; r != nil && r.Relocates() {
		a := r.Affinity
		for _, n := range c.clusterNodes() {
			switch {
			case a == nil:
				add(n, fmt.Sprintf("HA may recover it to any node (%s is in no node-affinity rule)", r.SID))
			case slices.Contains(a.Nodes, n):
				strict := "not strict"
				if a.Strict {
					strict = "strict"
				}
				add(n, fmt.Sprintf("HA may recover it there (rule %s, %s: %s)", a.Rule, strict, strings.Join(a.Nodes, ", ")))
			case !a.Strict:
				add(n, fmt.Sprintf("HA may recover it there when none of %s's nodes (%s) is up, as the rule is not strict", a.Rule, strings.Join(a.Nodes, ", ")))
			}
		}
	}
	for _, rep := range g.Replication {
		add(rep.Target, fmt.Sprintf("replication job %s keeps its disks there to move it there", rep.Job))
	}
	slices.SortFunc(out, func(a, b target) int { return strings.Compare(a.node, b.node) })
	return out
}

// targetShort finds the VMs that HA or their replication may move to a node where their
// mapping has fewer entries than they take.
func (c *Cluster) targetShort() {
	for _, g := range c.Guests {
		if g.Template || g.Kind != QEMU {
			continue
		}
		for _, t := range c.targets(g) {
			for _, u := range g.Uses {
				have := c.entriesOn(u.Mapping, t.node)
				if have >= u.Needs || c.Mappings.Mapping(u.Mapping) == nil {
					continue // a mapping pci.cfg lacks is a problem where the VM is
				}
				after := fmt.Sprintf("a migration there goes through, and the VM then does not start (qemu-server: %s)", c.startFailure(u, t.node, have))
				if have == 0 {
					after = fmt.Sprintf("Proxmox refuses a migration there (can't migrate to '%s': missing mapped devices), and a VM that HA recovers there after its node failed does not start (qemu-server: %s)", t.node, c.startFailure(u, t.node, have))
				}
				c.Problems = append(c.Problems, ClusterProblem{
					Kind: ProblemTargetShort, Node: t.node, Guests: []int{g.ID}, Mappings: []string{u.Mapping}, Paths: []string{},
					Message: fmt.Sprintf("%s (on %s) may move to %s: %s; it takes %s of mapping %s, which has %s: %s; add %s's devices to %s, or keep the VM off %s",
						g.Label(), g.Node, t.node, strings.Join(t.why, "; "), plural.S(u.Needs, "device"), u.Mapping, has(have, t.node), after, t.node, u.Mapping, t.node),
				})
			}
		}
	}
}

// overlap returns the devices two map paths share: the same function, or a function of
// a whole slot (a path without a function stands for all of them).
func overlap(a, b string) []string {
	var out []string
	for _, x := range strings.Split(a, ";") {
		for _, y := range strings.Split(b, ";") {
			xs, ys := strings.Contains(x, "."), strings.Contains(y, ".")
			var shared string
			switch {
			case x == y:
				shared = x
			case !xs && ys && strings.HasPrefix(y, x+"."):
				shared = y
			case xs && !ys && strings.HasPrefix(x, y+"."):
				shared = x
			}
			if shared != "" && !slices.Contains(out, shared) {
				out = append(out, shared)
			}
		}
	}
	return out
}

// sharedGPUs finds a device of a node that is in two mappings used by two guests of that
// node that can run at the same time: neither is a template, and no negative HA
// resource-affinity rule keeps them on separate nodes. Uses that share a mediated device
// on both sides do not collide.
func (c *Cluster) sharedGPUs(negative map[[2]string]bool) {
	type use struct {
		g *ClusterGuest
		u MappingUse
	}
	byNode := map[string]map[string][]use{} // node → mapping → uses
	for i := range c.Guests {
		g := &c.Guests[i]
		if g.Template {
			continue
		}
		for _, u := range g.Uses {
			if byNode[g.Node] == nil {
				byNode[g.Node] = map[string][]use{}
			}
			byNode[g.Node][u.Mapping] = append(byNode[g.Node][u.Mapping], use{g, u})
		}
	}
	ms := c.Mappings.Mappings
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		for i, m1 := range ms {
			for _, m2 := range ms[i+1:] {
				var shared []string
				ids := map[string]bool{}
				for _, e1 := range m1.NodeMaps(node) {
					for _, e2 := range m2.NodeMaps(node) {
						if o := overlap(e1.Path, e2.Path); len(o) > 0 {
							for _, p := range o {
								if !slices.Contains(shared, p) {
									shared = append(shared, p)
								}
							}
							ids[e1.ID], ids[e2.ID] = true, true
						}
					}
				}
				if len(shared) == 0 {
					continue
				}
				for _, a := range byNode[node][m1.ID] {
					for _, b := range byNode[node][m2.ID] {
						if a.g.ID == b.g.ID || (len(a.u.Exclusive) == 0 && len(b.u.Exclusive) == 0) {
							continue
						}
						if negative[haPair(a.g, b.g)] && a.g.HA != nil && b.g.HA != nil && a.g.HA.State != "ignored" && b.g.HA.State != "ignored" {
							continue // HA keeps them apart: they never run on one node together
						}
						idNote := ""
						if len(ids) > 1 {
							idNote = fmt.Sprintf(" (the entries disagree on its id: %s; Proxmox's check at start fails for all but one)", strings.Join(slices.Sorted(maps.Keys(ids)), ", "))
						}
						first, second := a, b
						if b.g.ID < a.g.ID {
							first, second = b, a
						}
						c.Problems = append(c.Problems, ClusterProblem{
							Kind: ProblemSharedGPU, Node: node, Guests: []int{first.g.ID, second.g.ID}, Mappings: []string{first.u.Mapping, second.u.Mapping}, Paths: shared,
							Message: fmt.Sprintf("%s and %s on %s can both take %s%s: it is in mapping %s (%s: %s) and in mapping %s (%s: %s), and the two VMs can run at the same time; the one that starts second takes another free device of its mapping or does not start; give each GPU to one mapping, or keep the VMs apart (a negative HA resource-affinity rule)",
								first.g.Label(), second.g.Label(), node, strings.Join(shared, ", "), idNote,
								first.u.Mapping, first.g.Label(), strings.Join(first.u.Keys, ", "), second.u.Mapping, second.g.Label(), strings.Join(second.u.Keys, ", ")),
						})
					}
				}
			}
		}
	}
}

// haPair is the key of two guests in the negative-affinity pairs.
func haPair(a, b *ClusterGuest) [2]string {
	sid := func(g *ClusterGuest) string {
		if g.Kind == LXC {
			return fmt.Sprintf("ct:%d", g.ID)
		}
		return fmt.Sprintf("vm:%d", g.ID)
	}
	x, y := sid(a), sid(b)
	if y < x {
		x, y = y, x
	}
	return [2]string{x, y}
}
