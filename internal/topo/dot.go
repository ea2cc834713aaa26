package topo

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
)

// nodeKind is what a node of the PCIe tree is.
type nodeKind int

const (
	kindHostBridge nodeKind = iota
	kindRootPort
	kindSwitchPort
	kindGPU
	kindNIC
)

// tnode is a node of the PCIe tree that joins a matrix's devices: a host bridge, a
// bridge on the way down, or a GPU or NIC at a leaf.
type tnode struct {
	id       string // the address
	kind     nodeKind
	index    int // a leaf's row of the matrix: GPUs, then NICs
	children []*tnode
}

func (n *tnode) leaf() bool { return n.kind == kindGPU || n.kind == kindNIC }

// kindText says what a bridge is.
func (n *tnode) kindText() string {
	switch n.kind {
	case kindHostBridge:
		return "host bridge"
	case kindRootPort:
		return "root port"
	}
	return "switch port"
}

// numaGroup is a NUMA node's host bridges (node -1: no NUMA node known).
type numaGroup struct {
	node    int
	cpus    string // the CPUs near it, as the first of its devices states them
	bridges []*tnode
}

func (g numaGroup) title() string {
	if g.node < 0 {
		return "no NUMA node"
	}
	return fmt.Sprintf("NUMA node %d", g.node)
}

// tree returns the PCIe tree of the matrix's devices, by NUMA node, host bridges and
// children in address order (which, addresses being fixed-width lower-case hex, is
// their text's order).
func (m *Matrix) tree() []numaGroup {
	byID := map[string]*tnode{}
	var groups []numaGroup
	for i, d := range m.devices() {
		hb := d.HostBridge.String()
		parent, ok := byID[hb]
		if !ok {
			parent = &tnode{id: hb, kind: kindHostBridge}
			byID[hb] = parent
			g := slices.IndexFunc(groups, func(g numaGroup) bool { return g.node == d.NUMANode })
			if g < 0 {
				groups = append(groups, numaGroup{node: d.NUMANode, cpus: d.LocalCPUs.String()})
				g = len(groups) - 1
			}
			groups[g].bridges = append(groups[g].bridges, parent)
		}
		for k, p := range d.Parents {
			n, ok := byID[p.String()]
			if !ok {
				n = &tnode{id: p.String(), kind: kindSwitchPort}
				if k == 0 {
					n.kind = kindRootPort
				}
				byID[n.id] = n
				parent.children = append(parent.children, n)
			}
			parent = n
		}
		leaf := &tnode{id: d.Address.String(), kind: kindGPU, index: i}
		if i >= len(m.GPUs) {
			leaf.kind = kindNIC
		}
		parent.children = append(parent.children, leaf)
	}
	// Bus order throughout: a NIC's host bridge or root port may come before a GPU's.
	var sortTree func(ns []*tnode)
	sortTree = func(ns []*tnode) {
		slices.SortFunc(ns, func(a, b *tnode) int { return strings.Compare(a.id, b.id) })
		for _, n := range ns {
			sortTree(n.children)
		}
	}
	for _, g := range groups {
		sortTree(g.bridges)
	}
	slices.SortFunc(groups, func(a, b numaGroup) int { return a.node - b.node })
	return groups
}

// Split is a planned split, for the pictures to show: where each GPU that moves goes.
type Split struct {
	// Asked is what asked for the split, for the legend: "--vfio numa:1".
	Asked string
	// To is the driver each GPU that moves ends on, by address ("" for the kernel's
	// choice); a GPU absent stays on its driver.
	To map[pci.Address]string
}

// leafView is what the pictures say of a GPU or NIC.
type leafView struct {
	head   string   // "GPU0 0000:01:00.0", "NIC0 mlx5_0 0000:82:00.0"
	name   string   // the device's name, whole
	driver string   // "nvidia", "nvidia → vfio-pci", "no driver"
	group  string   // "IOMMU group 10"; "" when it has none
	held   []string // what holds it open, one a line; nil when not looked up
	fill   string   // the colour, by Graphviz name
	moves  bool     // the planned split takes it to another driver
}

// maxHeld bounds the holders a picture lists for one GPU: a box of a hundred worker
// processes would hide the tree.
const maxHeld = 4

func (m *Matrix) leaf(n *tnode) leafView {
	labels := m.Labels()
	var d *pci.Device
	v := leafView{}
	if n.kind == kindGPU {
		d = m.GPUs[n.index]
		v.head = labels[n.index] + " " + d.Address.String()
	} else {
		nic := m.NICs[n.index-len(m.GPUs)]
		d = nic.Device
		v.head = labels[n.index] + " " + nic.Name + " " + d.Address.String()
	}
	v.name = d.Name()
	driver := d.Driver
	v.driver = "driver: " + driverText(driver)
	if to, ok := m.Split.to(d.Address); ok && n.kind == kindGPU {
		v.driver += " → " + plannedText(to)
		driver, v.moves = to, true
	}
	v.fill = fill(n.kind == kindGPU, driver)
	if d.IOMMUGroup >= 0 {
		v.group = fmt.Sprintf("IOMMU group %d", d.IOMMUGroup)
	}
	if hs, ok := m.Holders[d.Address]; ok && n.kind == kindGPU {
		v.held = []string{}
		for i, h := range hs {
			if i == maxHeld-1 && len(hs) > maxHeld {
				v.held = append(v.held, fmt.Sprintf("and %d more", len(hs)-i))
				break
			}
			v.held = append(v.held, h)
		}
	}
	return v
}

// to returns the driver the split sends a GPU to, if it moves.
func (s *Split) to(a pci.Address) (string, bool) {
	if s == nil {
		return "", false
	}
	to, ok := s.To[a]
	return to, ok
}

func driverText(d string) string {
	if d == "" {
		return "no driver"
	}
	return d
}

func plannedText(d string) string {
	if d == "" {
		return "its default driver"
	}
	return d
}

// heldText is the "held by" part of a leaf's label: a heading, then a holder a line.
func heldText(held []string) []string {
	if len(held) == 0 {
		return []string{"held by nothing"}
	}
	out := []string{"held by:"}
	for _, h := range held {
		out = append(out, "  "+h)
	}
	return out
}

// lines is a leaf's label for Graphviz, one line each.
func (v leafView) lines() []string {
	out := []string{v.head, v.name, v.driver}
	if v.group != "" {
		out = append(out, v.group)
	}
	if v.held != nil {
		for _, h := range heldText(v.held) {
			out = append(out, strings.TrimSpace(h))
		}
	}
	return out
}

// WriteDOT writes the PCIe tree that joins the matrix's devices as a Graphviz graph:
// one cluster per NUMA node holding its host bridges, the bridges on the way down, and
// the GPUs and NICs at the leaves, with their IOMMU groups, holders and planned split
// where known. Render it with: dot -Tsvg topo.dot > topo.svg
//
// Each NUMA node's host bridges hang from a node of their own (the node's CPUs): dot
// lays out the separate trees of a cluster right to left, which put GPU3 left of GPU0,
// and one tree per cluster keeps the bus order.
func (m *Matrix) WriteDOT(w io.Writer) error {
	var b strings.Builder
	b.WriteString("graph topology {\n  rankdir=TB;\n  ordering=out;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n")
	if m.Split != nil {
		fmt.Fprintf(&b, "  label=\"%s\";\n  labelloc=t;\n", dotEscape("planned split: "+m.Split.Asked+" (dashed: moves)"))
	}
	var edges []string
	var walk func(indent string, n *tnode)
	walk = func(indent string, n *tnode) {
		for _, c := range n.children {
			if c.leaf() {
				v := m.leaf(c)
				style := "style=filled"
				if v.moves {
					style = `style="filled,dashed", penwidth=2`
				}
				fmt.Fprintf(&b, "%s%q [label=\"%s\", %s, fillcolor=%q];\n", indent, c.id, dotEscape(strings.Join(v.lines(), "\n")), style, v.fill)
			} else {
				fmt.Fprintf(&b, "%s%q [label=\"%s\"];\n", indent, c.id, dotEscape(c.id+"\n"+c.kindText()))
			}
			edges = append(edges, fmt.Sprintf("  %q -- %q;\n", n.id, c.id))
			walk(indent, c)
		}
	}
	for i, g := range m.tree() {
		indent := "  "
		if g.node >= 0 {
			fmt.Fprintf(&b, "  subgraph cluster_numa%d {\n    label=\"NUMA node %d\";\n", g.node, g.node)
			indent = "    "
		}
		root := fmt.Sprintf("numa%d", i)
		label := g.title()
		if g.cpus != "" {
			label = "CPUs " + g.cpus
		}
		fmt.Fprintf(&b, "%s%q [label=\"%s\", shape=plaintext];\n", indent, root, dotEscape(label))
		for _, hb := range g.bridges {
			fmt.Fprintf(&b, "%s%q [label=\"%s\", shape=ellipse];\n", indent, hb.id, dotEscape("host bridge\n"+hb.id))
			edges = append(edges, fmt.Sprintf("  %q -- %q;\n", root, hb.id))
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
