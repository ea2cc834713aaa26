package topo

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
)

// WriteDOT writes the PCIe tree that joins the matrix's devices as a Graphviz graph:
// one cluster per NUMA node holding its host bridges, the bridges on the way down, and
// the GPUs and NICs at the leaves. Render it with: dot -Tsvg topo.dot > topo.svg
func (m *Matrix) WriteDOT(w io.Writer) error {
	var b strings.Builder
	b.WriteString("graph topology {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n")
	labels := m.Labels()
	byNode := map[int][]pci.HostBridge{}
	seenHB := map[pci.HostBridge]bool{}
	var edges []string
	seenEdge := map[string]bool{}
	bridgeLines := map[pci.HostBridge][]string{}
	seenBridge := map[pci.Address]bool{}
	for i, d := range m.devices() {
		if !seenHB[d.HostBridge] {
			seenHB[d.HostBridge] = true
			byNode[d.NUMANode] = append(byNode[d.NUMANode], d.HostBridge)
		}
		parent := d.HostBridge.String()
		for k, p := range d.Parents {
			if !seenBridge[p] {
				seenBridge[p] = true
				kind := "switch port"
				if k == 0 {
					kind = "root port"
				}
				bridgeLines[d.HostBridge] = append(bridgeLines[d.HostBridge],
					fmt.Sprintf("%q [label=\"%s\\n%s\"];\n", p.String(), p, kind))
			}
			edge := fmt.Sprintf("  %q -- %q;\n", parent, p.String())
			if !seenEdge[edge] {
				seenEdge[edge] = true
				edges = append(edges, edge)
			}
			parent = p.String()
		}
		label := fmt.Sprintf("%s %s\\n%s", labels[i], d.Address, dotEscape(d.Name()))
		if i >= len(m.GPUs) {
			label = fmt.Sprintf("%s %s\\n%s", labels[i], m.NICs[i-len(m.GPUs)].Name, d.Address)
		}
		if d.Driver != "" {
			label += "\\n" + d.Driver
		}
		bridgeLines[d.HostBridge] = append(bridgeLines[d.HostBridge],
			fmt.Sprintf("%q [label=\"%s\", style=filled, fillcolor=%q];\n", d.Address.String(), label, fill(i < len(m.GPUs), d.Driver)))
		edges = append(edges, fmt.Sprintf("  %q -- %q;\n", parent, d.Address.String()))
	}
	nodes := make([]int, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		indent := "  "
		if n >= 0 {
			fmt.Fprintf(&b, "  subgraph cluster_numa%d {\n    label=\"NUMA node %d\";\n", n, n)
			indent = "    "
		}
		for _, hb := range byNode[n] {
			fmt.Fprintf(&b, "%s%q [label=\"host bridge\\n%s\", shape=ellipse];\n", indent, hb.String(), hb)
			for _, l := range bridgeLines[hb] {
				b.WriteString(indent + l)
			}
		}
		if n >= 0 {
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

func dotEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}
