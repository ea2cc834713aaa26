package topo

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// The SVG picture's geometry, in pixels. Text is monospace, whose advance is 0.6 em
// (DejaVu Sans Mono 0.602, Liberation Mono 0.600): a line's width is known without
// measuring a font, so every line is wrapped to fit its box, never cut.
const (
	svgMaxWidth = 1600 // the widest a picture gets: a screen's width at 100%
	svgFontSize = 12
	svgCharW    = 7.3 // a character's advance at svgFontSize, rounded up
	svgLineH    = 16
	svgMargin   = 16
	svgPad      = 8   // around the text of a box
	svgColumnW  = 290 // a host bridge's column
	svgGap      = 16  // between columns, lines of columns and NUMA nodes
	svgIndent   = 18  // one level down the tree
	svgSpace    = 8   // between the boxes of a column
	svgFramePad = 12  // inside a NUMA node's frame
	svgTitleH   = 28  // a NUMA node's title
)

// svgFill turns a colour of WriteDOT into an SVG colour.
func svgFill(colour string) string { return svgFills[colour] }

var svgFills = map[string]string{
	"darkolivegreen2": "#bcee68",
	"lightblue":       "#add8e6",
	"lightgrey":       "#d3d3d3",
	"lightyellow":     "#ffffe0",
}

// svgText is one text element of a box: one or more lines.
type svgText struct {
	class string
	bold  bool
	lines []string // each a piece of the text; joined they give it whole
}

// svgBox is a node of the tree placed in the picture.
type svgBox struct {
	n          *tnode
	x, y, w, h int
	texts      []svgText
	view       leafView // a leaf's
	parent     *svgBox  // nil for a host bridge
	linkX      int      // where the line down from the parent runs
}

// svgUnit is a column of the picture: one child of a host bridge (a root port, or a
// device on its root bus) and all below it.
type svgUnit struct {
	hb, top *tnode
}

// WriteSVG draws the PCIe tree of WriteDOT as a standalone SVG picture, without
// Graphviz: one band per NUMA node, top to bottom; in it a column per root port (or
// device on a root bus), left to right in bus order under its host bridge, wrapping to
// a further line of columns past the picture's width; in a column the bridges down to
// each GPU and NIC, indented by level. A GPU's box names it in full and gives its
// driver, IOMMU group and holders; with a planned split (Matrix.Split) GPUs are
// coloured by the driver they end on, and those that move are outlined dashed.
func (m *Matrix) WriteSVG(w io.Writer) error {
	groups := m.tree()
	perLine := max(1, (svgMaxWidth-2*svgMargin-2*svgFramePad+svgGap)/(svgColumnW+svgGap))
	units := make([][]svgUnit, len(groups))
	columns := 1
	for i, g := range groups {
		for _, hb := range g.bridges {
			for _, c := range hb.children {
				units[i] = append(units[i], svgUnit{hb, c})
			}
		}
		columns = max(columns, min(perLine, len(units[i])))
	}
	width := 2*svgMargin + 2*svgFramePad + columns*svgColumnW + (columns-1)*svgGap

	var b strings.Builder
	y := svgMargin
	y = m.svgLegend(&b, width, y)

	type frame struct {
		g    numaGroup
		y, h int
	}
	var frames []frame
	var boxes []*svgBox
	for i, g := range groups {
		top := y
		y += svgTitleH
		drawn := map[*tnode]bool{}
		for start := 0; start < len(units[i]); start += perLine {
			line := units[i][start:min(start+perLine, len(units[i]))]
			bottom := y
			for j := 0; j < len(line); {
				// The host bridge spans its columns of this line.
				k := j
				for k < len(line) && line[k].hb == line[j].hb {
					k++
				}
				hb := line[j].hb
				x := svgMargin + svgFramePad + j*(svgColumnW+svgGap)
				pill := m.svgPlace(hb, x, y, (k-j)*svgColumnW+(k-j-1)*svgGap, nil, 0)
				if drawn[hb] {
					pill.texts[0].lines = wrap(hb.kindText()+" "+hb.id+" (continued)", int(float64(pill.w-2*svgPad)/svgCharW))
				}
				drawn[hb] = true
				boxes = append(boxes, pill)
				for ; j < k; j++ {
					x := svgMargin + svgFramePad + j*(svgColumnW+svgGap)
					col, end := m.svgColumn(line[j].top, pill, x, y+pill.h+svgSpace)
					boxes = append(boxes, col...)
					bottom = max(bottom, end)
				}
			}
			y = bottom + svgGap
		}
		y += svgFramePad - svgGap
		frames = append(frames, frame{g, top, y - top})
		y += svgGap
	}
	if len(groups) == 0 {
		for _, l := range wrap("No GPUs found. Use --devices to choose which devices count as GPUs.", int(float64(width-2*svgMargin)/svgCharW)) {
			y += svgLineH
			fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\">%s</text>\n", svgMargin, y, esc(l))
		}
		y += svgLineH
	}
	height := y + svgMargin - svgGap

	var out strings.Builder
	fmt.Fprintf(&out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\" font-size=\"%d\">\n", width, height, width, height, svgFontSize)
	fmt.Fprintf(&out, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height)
	for _, f := range frames {
		title := f.g.title()
		if f.g.cpus != "" {
			title += " · CPUs " + f.g.cpus
		}
		fmt.Fprintf(&out, "<g class=\"numa\" data-node=\"%d\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"8\" fill=\"#f4f6fb\" stroke=\"#9aa5c0\"/>", f.g.node, svgMargin, f.y, width-2*svgMargin, f.h)
		fmt.Fprintf(&out, "<text x=\"%d\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">%s</text></g>\n", svgMargin+svgFramePad, f.y+20, esc(title))
	}
	out.WriteString(b.String())
	for _, bx := range boxes {
		if p := bx.parent; p != nil {
			// From the parent's bottom down to the child's first line, then across.
			fmt.Fprintf(&out, "<path class=\"link\" d=\"M%d %dV%dH%d\" fill=\"none\" stroke=\"#555\"/>\n", bx.linkX, p.y+p.h, bx.y+svgPad+svgLineH/2, bx.x)
		}
	}
	for _, bx := range boxes {
		writeSVGBox(&out, bx)
	}
	out.WriteString("</svg>\n")
	_, err := io.WriteString(w, out.String())
	return err
}

// svgPlace makes the box of n at x, y, w wide: its text wrapped to fit, and its height.
func (m *Matrix) svgPlace(n *tnode, x, y, w int, parent *svgBox, linkX int) *svgBox {
	bx := &svgBox{n: n, x: x, y: y, w: w, parent: parent, linkX: linkX}
	chars := int(float64(bx.w-2*svgPad) / svgCharW)
	if n.leaf() {
		bx.view = m.leaf(n)
		bx.texts = bx.view.svgTexts(chars)
	} else {
		bx.texts = []svgText{{bold: n.kind == kindHostBridge, lines: wrap(n.kindText()+" "+n.id, chars)}}
	}
	lines := 0
	for _, t := range bx.texts {
		lines += len(t.lines)
	}
	bx.h = lines*svgLineH + 2*svgPad - 4
	return bx
}

// svgColumn places top, a child of the host bridge box hb, and everything below it, in
// the column at x from y down: the boxes, and the y where the column ends.
func (m *Matrix) svgColumn(top *tnode, hb *svgBox, x, y int) ([]*svgBox, int) {
	var boxes []*svgBox
	var place func(n *tnode, depth int, parent *svgBox)
	place = func(n *tnode, depth int, parent *svgBox) {
		indent := depth * svgIndent
		bx := m.svgPlace(n, x+indent, y, svgColumnW-indent, parent, x+indent-svgIndent/2)
		boxes = append(boxes, bx)
		y += bx.h + svgSpace
		for _, c := range n.children {
			place(c, depth+1, bx)
		}
	}
	place(top, 1, hb)
	return boxes, y - svgSpace
}

// svgTexts is a leaf's label, wrapped to chars characters a line.
func (v leafView) svgTexts(chars int) []svgText {
	out := []svgText{
		{class: "head", bold: true, lines: wrap(v.head, chars)},
		{class: "name", lines: wrap(v.name, chars)},
		{class: "driver", bold: v.moves, lines: wrap(v.driver, chars)},
	}
	if v.group != "" {
		out = append(out, svgText{class: "group", lines: wrap(v.group, chars)})
	}
	if v.held != nil {
		var lines []string
		for _, h := range heldText(v.held) {
			lines = append(lines, wrap(h, chars)...)
		}
		out = append(out, svgText{class: "held", lines: lines})
	}
	return out
}

func writeSVGBox(b *strings.Builder, bx *svgBox) {
	fillColour, rx, stroke := "white", 0, ""
	class := "bridge"
	switch {
	case bx.n.kind == kindGPU:
		class = "gpu"
	case bx.n.kind == kindNIC:
		class = "nic"
	}
	if bx.n.leaf() {
		fillColour = svgFill(bx.view.fill)
		if bx.view.moves {
			stroke = ` stroke-width="2.5" stroke-dasharray="7 4"`
		}
	} else if bx.n.kind == kindHostBridge {
		rx = 12
	}
	var title []string
	for _, t := range bx.texts {
		title = append(title, strings.Join(t.lines, ""))
	}
	fmt.Fprintf(b, "<g class=\"%s\" data-address=\"%s\"><title>%s</title><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"%d\" fill=\"%s\" stroke=\"#333\"%s/>",
		class, esc(bx.n.id), esc(strings.Join(title, "\n")), bx.x, bx.y, bx.w, bx.h, rx, fillColour, stroke)
	tx, ty := bx.x+svgPad, bx.y+svgPad+svgLineH-4
	for _, t := range bx.texts {
		attrs := ""
		if t.class != "" {
			attrs += fmt.Sprintf(" class=\"%s\"", t.class)
		}
		if t.bold {
			attrs += " font-weight=\"bold\""
		}
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\"%s>", tx, ty, attrs)
		for _, l := range t.lines {
			fmt.Fprintf(b, "<tspan x=\"%d\" y=\"%d\" xml:space=\"preserve\">%s</tspan>", tx, ty, esc(l))
			ty += svgLineH
		}
		b.WriteString("</text>")
	}
	b.WriteString("</g>\n")
}

// svgLegend writes what the colours mean, from y down within width, and returns the
// y below it.
func (m *Matrix) svgLegend(b *strings.Builder, width, y int) int {
	heading := "Colours: each GPU's driver now"
	if m.Split != nil {
		heading = "Colours: each GPU's driver after the planned split, " + m.Split.Asked + "; dashed: the GPUs it moves"
	}
	chars := int(float64(width-2*svgMargin) / svgCharW)
	for _, l := range wrap(heading, chars) {
		y += svgLineH
		fmt.Fprintf(b, "<text class=\"legend\" x=\"%d\" y=\"%d\" font-weight=\"bold\" xml:space=\"preserve\">%s</text>\n", svgMargin, y, esc(l))
	}
	type key struct {
		colour, what string
		dashed       bool
	}
	keys := []key{{"darkolivegreen2", "GPU on nvidia", false}, {"lightblue", "GPU on vfio-pci", false}, {"lightgrey", "GPU on another driver, or none", false}}
	if m.Split != nil {
		keys = append(keys, key{"white", "moves to another driver", true})
	}
	if len(m.NICs) > 0 {
		keys = append(keys, key{"lightyellow", "RDMA NIC", false})
	}
	y += 8
	x := svgMargin
	for _, k := range keys {
		w := 24 + int(float64(len([]rune(k.what)))*svgCharW) + 24
		if x+w > width-svgMargin && x > svgMargin {
			x, y = svgMargin, y+svgLineH+8
		}
		fill, stroke := svgFill(k.colour), ""
		if k.dashed {
			fill, stroke = "white", ` stroke-width="2" stroke-dasharray="4 2"`
		}
		fmt.Fprintf(b, "<rect class=\"key\" x=\"%d\" y=\"%d\" width=\"16\" height=\"14\" fill=\"%s\" stroke=\"#333\"%s/><text x=\"%d\" y=\"%d\">%s</text>\n",
			x, y, fill, stroke, x+22, y+12, esc(k.what))
		x += w
	}
	return y + svgLineH + svgGap
}

// wrap breaks s into lines of at most n characters, at spaces where it can and inside
// a word longer than a line where it must. Each space stays at the end of the line it
// ends, so the lines joined give s back.
func wrap(s string, n int) []string {
	n = max(n, 8)
	var lines []string
	r := []rune(s)
	for len(r) > n {
		cut := -1
		for i := n; i > 0; i-- {
			if r[i] == ' ' {
				cut = i + 1
				break
			}
		}
		if cut < 0 {
			cut = n
		}
		lines = append(lines, string(r[:cut]))
		r = r[cut:]
	}
	return append(lines, string(r))
}

func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
