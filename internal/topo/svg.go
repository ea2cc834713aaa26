package topo

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// The SVG drawing's geometry, in pixels.
const (
	svgBoxW   = 230 // a node's box
	svgLineH  = 14  // a line of its label
	svgSlotW  = 250 // the width each leaf takes
	svgLevelH = 90  // from one level of the tree to the next
	svgMargin = 20
	svgGroupY = 34 // room above the host bridges for the NUMA node's title
)

// svgFill turns a leaf colour of WriteDOT into an SVG colour.
func svgFill(colour string) string { return svgFills[colour] }

var svgFills = map[string]string{
	"darkolivegreen2": "#bcee68",
	"lightblue":       "#add8e6",
	"lightgrey":       "#d3d3d3",
	"lightyellow":     "#ffffe0",
}

// WriteSVG draws the PCIe tree of WriteDOT as a standalone SVG picture, laid out without
// Graphviz: one column of boxes per leaf, a NUMA node's host bridges side by side in a
// titled frame, each bridge centred over what hangs below it, leaves coloured by driver.
func (m *Matrix) WriteSVG(w io.Writer) error {
	type placed struct {
		n     *tnode
		x, y  int // the box's top left corner
		lines int
	}
	var boxes []placed
	var edges [][4]int
	type frame struct {
		title  string
		x0, x1 int
	}
	var frames []frame
	slot, depth := 0, 0
	var place func(n *tnode, level int) (center int)
	place = func(n *tnode, level int) int {
		depth = max(depth, level)
		y := svgMargin + svgGroupY + level*svgLevelH
		var xs []int
		for _, c := range n.children {
			xs = append(xs, place(c, level+1))
		}
		var center int
		if len(xs) == 0 {
			center = svgMargin + slot*svgSlotW + svgSlotW/2
			slot++
		} else {
			center = (xs[0] + xs[len(xs)-1]) / 2
		}
		for _, cx := range xs {
			edges = append(edges, [4]int{center, y + boxHeight(n), cx, y + svgLevelH})
		}
		boxes = append(boxes, placed{n, center - svgBoxW/2, y, len(n.lines)})
		return center
	}
	for _, g := range m.tree() {
		first := slot
		for _, hb := range g.bridges {
			place(hb, 0)
		}
		title := fmt.Sprintf("NUMA node %d", g.node)
		if g.node < 0 {
			title = "no NUMA node"
		}
		frames = append(frames, frame{title, svgMargin + first*svgSlotW + 4, svgMargin + slot*svgSlotW - 4})
	}
	height := svgMargin + svgGroupY + (depth+1)*svgLevelH + 40
	width := 2*svgMargin + max(slot, 3)*svgSlotW

	var b strings.Builder
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"monospace\" font-size=\"11\">\n", width, height, width, height)
	fmt.Fprintf(&b, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height)
	for _, f := range frames {
		fmt.Fprintf(&b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"8\" fill=\"#f4f6fb\" stroke=\"#9aa5c0\"/>\n",
			f.x0, svgMargin, f.x1-f.x0, height-svgMargin-40)
		fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" font-size=\"13\" font-weight=\"bold\">%s</text>\n", f.x0+10, svgMargin+20, esc(f.title))
	}
	for _, e := range edges {
		fmt.Fprintf(&b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555\"/>\n", e[0], e[1], e[2], e[3])
	}
	for _, p := range boxes {
		fillColour, rx := "white", 0
		switch {
		case p.n.leaf:
			fillColour = svgFill(p.n.fill)
		case strings.HasPrefix(p.n.lines[0], "host bridge"):
			rx = 14
		}
		fmt.Fprintf(&b, "<g><title>%s</title><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"%d\" fill=\"%s\" stroke=\"#333\"/>",
			esc(p.n.id), p.x, p.y, svgBoxW, boxHeight(p.n), rx, fillColour)
		for i, l := range p.n.lines {
			fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>", p.x+svgBoxW/2, p.y+svgLineH+i*svgLineH, esc(clip(l, 32)))
		}
		b.WriteString("</g>\n")
	}
	// The legend: what the leaf colours mean.
	x := svgMargin
	for _, k := range []struct{ colour, what string }{{"darkolivegreen2", "GPU on nvidia"}, {"lightblue", "GPU on vfio-pci"}, {"lightgrey", "GPU on another driver or none"}, {"lightyellow", "RDMA NIC"}} {
		fmt.Fprintf(&b, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#333\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
			x, height-30, svgFill(k.colour), x+20, height-19, esc(k.what))
		x += 60 + 8*len(k.what)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func boxHeight(n *tnode) int { return len(n.lines)*svgLineH + 8 }

// clip shortens a label line that would overflow its box.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
