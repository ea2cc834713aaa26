package topo_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/topo"
)

// svgPicture is what the tests read back from WriteSVG's output.
type svgPicture struct {
	width, height int
	numa          []svgRect // the NUMA nodes' frames
	boxes         []svgBoxOf
	links         int
	texts         []svgTextOf // every text element, boxes' included
	keys          map[string]string
}

type svgRect struct {
	node, x, y, w, h int
}

type svgBoxOf struct {
	class, address string
	svgRect
	fill   string
	dashed bool
	texts  []svgTextOf
}

type svgTextOf struct {
	x        int
	fontSize float64
	lines    []string // a line per tspan, or the element's text
}

func (t svgTextOf) whole() string { return strings.Join(t.lines, "") }

// readSVG parses a picture with encoding/xml, keeping font sizes as they are inherited.
func readSVG(t *testing.T, data []byte) svgPicture {
	t.Helper()
	var p svgPicture
	p.keys = map[string]string{}
	dec := xml.NewDecoder(bytes.NewReader(data))
	var sizes []float64 // the font size in force, element by element
	var box *svgBoxOf   // the box being read
	var numa *svgRect   // the NUMA frame being read
	var text *svgTextOf // the text element being read
	inTspan := false
	keyFill := "" // the legend's last swatch, which the next text names
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range e.Attr {
				attr[a.Name.Local] = a.Value
			}
			num := func(k string) int { n, _ := strconv.Atoi(attr[k]); return n }
			size := 0.0
			if len(sizes) > 0 {
				size = sizes[len(sizes)-1]
			}
			if v, ok := attr["font-size"]; ok {
				size, _ = strconv.ParseFloat(v, 64)
			}
			sizes = append(sizes, size)
			switch e.Name.Local {
			case "svg":
				p.width, p.height = num("width"), num("height")
			case "g":
				switch attr["class"] {
				case "numa":
					n, _ := strconv.Atoi(attr["data-node"])
					numa = &svgRect{node: n}
				case "gpu", "nic", "bridge":
					box = &svgBoxOf{class: attr["class"], address: attr["data-address"]}
				}
			case "rect":
				r := svgRect{x: num("x"), y: num("y"), w: num("width"), h: num("height")}
				switch {
				case box != nil:
					box.svgRect, box.fill, box.dashed = r, attr["fill"], attr["stroke-dasharray"] != ""
				case numa != nil:
					numa.x, numa.y, numa.w, numa.h = r.x, r.y, r.w, r.h
				case attr["class"] == "key":
					keyFill = attr["fill"]
					if attr["stroke-dasharray"] != "" {
						keyFill = "dashed"
					}
				}
			case "path", "line":
				p.links++
			case "text":
				text = &svgTextOf{x: num("x"), fontSize: size}
			case "tspan":
				inTspan = true
				text.lines = append(text.lines, "")
			}
		case xml.CharData:
			switch {
			case text != nil && inTspan:
				text.lines[len(text.lines)-1] += string(e)
			case text != nil && strings.TrimSpace(string(e)) != "":
				text.lines = append(text.lines, string(e))
			}
		case xml.EndElement:
			sizes = sizes[:len(sizes)-1]
			switch e.Name.Local {
			case "tspan":
				inTspan = false
			case "text":
				p.texts = append(p.texts, *text)
				if box != nil {
					box.texts = append(box.texts, *text)
				} else if keyFill != "" {
					p.keys[text.whole()] = keyFill
					keyFill = ""
				}
				text = nil
			case "g":
				if box != nil {
					p.boxes = append(p.boxes, *box)
				}
				if numa != nil {
					p.numa = append(p.numa, *numa)
				}
				box, numa = nil, nil
			}
		}
	}
	return p
}

func svgOf(t *testing.T, m *topo.Matrix) svgPicture {
	t.Helper()
	var b bytes.Buffer
	if err := m.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	return readSVG(t, b.Bytes())
}

func (p svgPicture) box(address string) (svgBoxOf, bool) {
	i := slices.IndexFunc(p.boxes, func(b svgBoxOf) bool { return b.address == address && b.class != "bridge" })
	if i < 0 {
		return svgBoxOf{}, false
	}
	return p.boxes[i], true
}

func (b svgBoxOf) has(whole string) bool {
	return slices.ContainsFunc(b.texts, func(t svgTextOf) bool { return t.whole() == whole })
}

func (b svgBoxOf) contains(s string) bool {
	return slices.ContainsFunc(b.texts, func(t svgTextOf) bool { return strings.Contains(t.whole(), s) })
}

// The picture reads at 100%: at most 1600 px wide, one band per NUMA node top to
// bottom, each GPU in its node's band, a box per device and bridge joined by a line to
// its parent, no two boxes overlapping, no font under 11 px, every line of text inside
// its box (monospace advances 0.6 em; 0.61 leaves room), and each GPU's name whole.
func TestWriteSVG(t *testing.T) {
	for _, tt := range pictured {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.m(t)
			p := svgOf(t, m)
			if p.width > 1600 || p.width <= 0 {
				t.Errorf("%d px wide, want at most 1600", p.width)
			}
			nodes := map[int]bool{}
			for _, d := range m.GPUs {
				nodes[d.NUMANode] = true
			}
			if len(p.numa) != len(nodes) {
				t.Fatalf("%d NUMA bands for the nodes %v", len(p.numa), nodes)
			}
			for i, f := range p.numa {
				if i > 0 && (f.node <= p.numa[i-1].node || f.y < p.numa[i-1].y+p.numa[i-1].h) {
					t.Errorf("NUMA node %d's band (y %d) is not below node %d's (y %d-%d)", f.node, f.y, p.numa[i-1].node, p.numa[i-1].y, p.numa[i-1].y+p.numa[i-1].h)
				}
				if f.x+f.w > p.width || f.y+f.h > p.height {
					t.Errorf("NUMA node %d's band ends outside the picture", f.node)
				}
			}
			for i, d := range m.GPUs {
				b, ok := p.box(d.Address.String())
				if !ok {
					t.Errorf("no box for GPU%d %s", i, d.Address)
					continue
				}
				band := slices.IndexFunc(p.numa, func(f svgRect) bool { return f.node == d.NUMANode })
				if f := p.numa[band]; b.x < f.x || b.x+b.w > f.x+f.w || b.y < f.y || b.y+b.h > f.y+f.h {
					t.Errorf("GPU%d (NUMA node %d) at %d,%d is outside its band %+v", i, d.NUMANode, b.x, b.y, f)
				}
				if want := fmt.Sprintf("GPU%d %s", i, d.Address); !b.has(want) {
					t.Errorf("GPU%d's box does not say %q", i, want)
				}
				if !b.has(d.Name()) {
					t.Errorf("GPU%d's box does not name it whole, %q: %v", i, d.Name(), b.texts)
				}
			}
			// Every bridge and device has a box, every one but the host bridges a line up.
			below := map[string]bool{}
			bridges := map[string]bool{}
			for _, d := range append(slices.Clone(m.GPUs), nicDevices(m)...) {
				below[d.Address.String()] = true
				bridges[d.HostBridge.String()] = true
				for _, a := range d.Parents {
					below[a.String()] = true
				}
			}
			drawn := map[string]bool{}
			hostBoxes := 0
			for _, b := range p.boxes {
				drawn[b.address] = true
				if bridges[b.address] {
					hostBoxes++
				}
			}
			for a := range below {
				if !drawn[a] {
					t.Errorf("no box for %s", a)
				}
			}
			for a := range bridges {
				if !drawn[a] {
					t.Errorf("no box for host bridge %s", a)
				}
			}
			if len(p.boxes) != len(below)+hostBoxes || p.links != len(below) {
				t.Errorf("%d boxes and %d lines for %d devices and bridges under %d host bridge boxes", len(p.boxes), p.links, len(below), hostBoxes)
			}
			for i, a := range p.boxes {
				for _, c := range p.boxes[i+1:] {
					if a.x < c.x+c.w && c.x < a.x+a.w && a.y < c.y+c.h && c.y < a.y+a.h {
						t.Errorf("boxes of %s and %s overlap", a.address, c.address)
					}
				}
			}
			for _, tx := range p.texts {
				if tx.fontSize < 11 {
					t.Errorf("text %q in %g px", tx.whole(), tx.fontSize)
				}
			}
			for _, b := range p.boxes {
				for _, tx := range b.texts {
					for _, l := range tx.lines {
						l = strings.TrimRight(l, " ")
						if right := float64(tx.x) + 0.61*tx.fontSize*float64(len([]rune(l))); tx.x < b.x || right > float64(b.x+b.w) {
							t.Errorf("%q runs from %d to %.0f, out of %s's box (%d to %d)", l, tx.x, right, b.address, b.x, b.x+b.w)
						}
					}
				}
			}
		})
	}
}

func nicDevices(m *topo.Matrix) []*pci.Device {
	var out []*pci.Device
	for _, n := range m.NICs {
		out = append(out, n.Device)
	}
	return out
}

// sampleInventory is the sample host as topo's pictures see it: the inventory with
// holders, and its matrix with the GPUs' holders as inventory names them.
func sampleInventory(t *testing.T) (*inventory.Inventory, *topo.Matrix) {
	t.Helper()
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.BuildGPUs(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := topo.Build(inv.Devices(), topo.NICs(h, inv.Tree), topo.NUMANodes(h))
	m.Holders = map[pci.Address][]string{}
	for _, g := range inv.GPUs {
		m.Holders[g.Address] = []string{}
		for _, hd := range g.Holders {
			m.Holders[g.Address] = append(m.Holders[g.Address], hd.Short())
		}
	}
	return inv, m
}

// splitOf plans --vfio sel on inv as plan does, for the pictures.
func splitOf(t *testing.T, inv *inventory.Inventory, sel string) *topo.Split {
	t.Helper()
	choices, err := plan.ParseChoices([]string{sel})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(inv, plan.ForVFIO(choices))
	if err != nil {
		t.Fatal(err)
	}
	return &topo.Split{Asked: "--vfio " + sel, To: p.GPUDrivers()}
}

// Each GPU's box gives its IOMMU group and what holds it, as inventory finds them on
// the sample host (nvidia-persistenced, and python3 in container 129).
func TestSVGGroupsAndHolders(t *testing.T) {
	inv, m := sampleInventory(t)
	p := svgOf(t, m)
	held := 0
	for _, g := range inv.GPUs {
		b, ok := p.box(g.Address.String())
		if !ok {
			t.Fatalf("no box for %s", g.Address)
		}
		if want := fmt.Sprintf("IOMMU group %d", g.IOMMUGroup); g.IOMMUGroup < 0 || !b.has(want) {
			t.Errorf("%s's box lacks %q", g.Address, want)
		}
		for _, h := range g.Holders {
			held++
			if !b.contains(h.Short()) {
				t.Errorf("%s's box lacks its holder %q", g.Address, h.Short())
			}
		}
	}
	if held < len(inv.GPUs) {
		t.Fatalf("the sample's GPUs have %d holders: the test needs them held", held)
	}
	// The NICs are no GPUs: none of their boxes claims to know what holds them.
	for _, n := range m.NICs {
		if b, _ := p.box(n.Device.Address.String()); b.contains("held by") {
			t.Errorf("NIC %s's box names holders it was never checked for", n.Name)
		}
	}
}

// With a planned split the GPUs are coloured by the driver they end on, and those that
// move are dashed, as the legend says; without one, by the driver they are on.
func TestSVGSplit(t *testing.T) {
	inv, m := sampleInventory(t)
	now := svgOf(t, m)
	m.Split = splitOf(t, inv, "numa:1")
	split := svgOf(t, m)
	for _, p := range []svgPicture{now, split} {
		for _, k := range []string{"GPU on nvidia", "GPU on vfio-pci"} {
			if p.keys[k] == "" {
				t.Fatalf("no legend key %q in %v", k, p.keys)
			}
		}
	}
	if now.keys["GPU on nvidia"] == now.keys["GPU on vfio-pci"] {
		t.Fatal("nvidia and vfio-pci share a colour")
	}
	for _, g := range m.GPUs {
		a := g.Address.String()
		b, _ := now.box(a)
		if g.Driver != "nvidia" || b.fill != now.keys["GPU on nvidia"] || b.dashed || b.contains("→") {
			t.Errorf("without a split, %s on %s is filled %s, dashed %v", a, g.Driver, b.fill, b.dashed)
		}
		b, _ = split.box(a)
		want, moves := "GPU on nvidia", g.NUMANode == 1
		if moves {
			want = "GPU on vfio-pci"
		}
		if b.fill != split.keys[want] || b.dashed != moves || b.has("driver: nvidia → vfio-pci") != moves {
			t.Errorf("with --vfio numa:1, %s (NUMA node %d) is filled %s, dashed %v: want %s, dashed %v", a, g.NUMANode, b.fill, b.dashed, want, moves)
		}
	}
	if split.keys["moves to another driver"] != "dashed" || now.keys["moves to another driver"] != "" {
		t.Errorf("the legend's dashed key: %q with the split, %q without", split.keys["moves to another driver"], now.keys["moves to another driver"])
	}
	said := func(p svgPicture, s string) bool {
		return slices.ContainsFunc(p.texts, func(t svgTextOf) bool { return strings.Contains(t.whole(), s) })
	}
	if !said(split, "--vfio numa:1") || said(now, "--vfio") {
		t.Error("the legend should name the split it shows, and only then")
	}
}

// dotX renders a DOT graph with Graphviz and returns the x of each node, by name.
func dotX(t *testing.T, graph string) map[string]float64 {
	t.Helper()
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Fatalf("Graphviz's dot is not installed (%v): install graphviz (./scripts/vm-deps does) to check the DOT output's layout", err)
	}
	cmd := exec.Command(dot, "-Tplain")
	cmd.Stdin = strings.NewReader(graph)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dot -Tplain: %v", err)
	}
	xs := map[string]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[0] == "node" {
			x, _ := strconv.ParseFloat(f[2], 64)
			xs[strings.Trim(f[1], `"`)] = x
		}
	}
	return xs
}

// Rendered with Graphviz, the GPUs stand left to right in bus order: dot lays the
// separate trees of a cluster out right to left, which put GPU3 left of GPU0.
func TestDOTBusOrder(t *testing.T) {
	for _, tt := range pictured {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.m(t)
			var b strings.Builder
			if err := m.WriteDOT(&b); err != nil {
				t.Fatal(err)
			}
			xs := dotX(t, b.String())
			for i := 1; i < len(m.GPUs); i++ {
				a, c := m.GPUs[i-1].Address.String(), m.GPUs[i].Address.String()
				if _, ok := xs[c]; !ok {
					t.Fatalf("no node %s in the layout", c)
				}
				if xs[a] >= xs[c] {
					t.Errorf("GPU%d %s at x %g is not left of GPU%d %s at x %g", i-1, a, xs[a], i, c, xs[c])
				}
			}
		})
	}
}

// The DOT graph carries what the picture does: IOMMU groups, holders, and the split.
func TestDOTGroupsHoldersSplit(t *testing.T) {
	inv, m := sampleInventory(t)
	m.Split = splitOf(t, inv, "numa:1")
	var b strings.Builder
	if err := m.WriteDOT(&b); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		if name, attrs, ok := strings.Cut(strings.TrimSpace(line), " ["); ok {
			nodes[strings.Trim(name, `"`)] = attrs
		}
	}
	for _, g := range inv.GPUs {
		attrs := nodes[g.Address.String()]
		if !strings.Contains(attrs, fmt.Sprintf(`\nIOMMU group %d\n`, g.IOMMUGroup)) {
			t.Errorf("%s: no IOMMU group %d in %s", g.Address, g.IOMMUGroup, attrs)
		}
		for _, h := range g.Holders {
			if !strings.Contains(attrs, `\n`+h.Short()) {
				t.Errorf("%s: no holder %q in %s", g.Address, h.Short(), attrs)
			}
		}
		moves := g.NUMANode == 1
		if strings.Contains(attrs, `fillcolor="lightblue"`) != moves || strings.Contains(attrs, "dashed") != moves {
			t.Errorf("%s (NUMA node %d): %s", g.Address, g.NUMANode, attrs)
		}
	}
	if !strings.Contains(b.String(), "--vfio numa:1") {
		t.Error("the graph does not name the split")
	}
}

// With no GPUs the picture says so, every line within its width.
func TestWriteSVGNoGPUs(t *testing.T) {
	p := svgOf(t, topo.Build(nil, nil, 1))
	said := ""
	for _, tx := range p.texts {
		said += tx.whole() + " "
		for _, l := range tx.lines {
			if right := float64(tx.x) + 0.61*tx.fontSize*float64(len([]rune(l))); right > float64(p.width) {
				t.Errorf("%q ends at %.0f, past the picture's %d px", l, right, p.width)
			}
		}
	}
	if !strings.Contains(said, "No GPUs found.") {
		t.Errorf("the picture does not say there are no GPUs: %q", said)
	}
}
