package topo

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// tnode is a node of the PCIe tree that joins a matrix's devices: a host bridge, a
// bridge on the way down, or a GPU or NIC at a leaf.
type tnode struct {
	id       string   // the address
	lines    []string // what its label says, line by line
	leaf     bool
	fill     string // a leaf's colour, by Graphviz name
	children []*tnode
}

// numaGroup is a NUMA node's host bridges (node -1: no NUMA node known).
type numaGroup struct {
	node    int
	bridges []*tnode
}

// tree returns the PCIe tree of the matrix's devices, by NUMA node, host bridges and
// children in the order the devices (GPUs, then NICs) first reach them.
func (m *Matrix) tree() []numaGroup {
	labels := m.Labels()
	byID := map[string]*tnode{}
	var groups []numaGroup
	for i, d := range m.devices() {
		hb := d.HostBridge.String()
		parent, ok := byID[hb]
		if !ok {
			parent = &tnode{id: hb, lines: []string{"host bridge", hb}}
			byID[hb] = parent
			g := slices.IndexFunc(groups, func(g numaGroup) bool { return g.node == d.NUMANode })
			if g < 0 {
				groups = append(groups, numaGroup{node: d.NUMANode})
				g = len(groups) - 1
			}
			groups[g].bridges = append(groups[g].bridges, parent)
		}
		for k, p := range d.Parents {
			n, ok := byID[p.String()]
			if !ok {
				kind := "switch port"
				if k == 0 {
					kind = "root port"
				}
				n = &tnode{id: p.String(), lines: []string{p.String(), kind}}
				byID[n.id] = n
				parent.children = append(parent.children, n)
			}
			parent = n
		}
		leaf := &tnode{id: d.Address.String(), leaf: true, fill: fill(i < len(m.GPUs), d.Driver)}
		if i < len(m.GPUs) {
			leaf.lines = []string{labels[i] + " " + d.Address.String(), d.Name()}
		} else {
			leaf.lines = []string{labels[i] + " " + m.NICs[i-len(m.GPUs)].Name, d.Address.String()}
		}
		if d.Driver != "" {
			leaf.lines = append(leaf.lines, d.Driver)
		}
		parent.children = append(parent.children, leaf)
	}
	slices.SortFunc(groups, func(a, b numaGroup) int { return a.node - b.node })
	return groups
}

// WriteDOT writes the PCIe tree that joins the matrix's devices as a Graphviz graph:
// one cluster per NUMA node holding its host bridges, the bridges on the way down, and
// the GPUs and NICs at the leaves. Render it with: dot -Tsvg topo.dot > topo.svg
func (m *Matrix) WriteDOT(w io.Writer) error {
	var b strings.Builder
	b.WriteString("graph topology {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n")
	var edges []string
	var walk func(indent string, n *tnode)
	walk = func(indent string, n *tnode) {
		for _, c := range n.children {
			label := dotEscape(strings.Join(c.lines, "\n"))
			if c.leaf {
				fmt.Fprintf(&b, "%s%q [label=\"%s\", style=filled, fillcolor=%q];\n", indent, c.id, label, c.fill)
			} else {
				fmt.Fprintf(&b, "%s%q [label=\"%s\"];\n", indent, c.id, label)
			}
			edges = append(edges, fmt.Sprintf("  %q -- %q;\n", n.id, c.id))
			walk(indent, c)
		}
	}
	for _, g := range m.tree() {
		indent := "  "
		if g.node >= 0 {
			fmt.Fprintf(&b, "  subgraph cluster_numa%d {\n    label=\"NUMA node %d\";\n", g.node, g.node)
			indent = "    "
		}
		for _, hb := range g.bridges {
			fmt.Fprintf(&b, "%s%q [label=\"%s\", shape=ellipse];\n", indent, hb.id, dotEscape(strings.Join(hb.lines, "\n")))
			walk(indent, hb)
		}
		if g.node >= 0 {
			b.WriteString("  }\n")
		}
	}
	for _, e := range edges {
		b.WriteString(e)
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// fill colours a leaf by what drives it: nvidia green, vfio-pci blue, others grey.
func fill(gpu bool, driver string) string {
	switch {
	case !gpu:
		return "lightyellow"
	case driver == "nvidia":
		return "darkolivegreen2"
	case driver == "vfio-pci":
		return "lightblue"
	}
	return "lightgrey"
}

// dotEscape quotes a label for Graphviz: backslashes and quotes escaped, line breaks as
// \n.
func dotEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
