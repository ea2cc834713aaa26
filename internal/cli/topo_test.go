package cli

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// topo fills GPU NUMA ID from the nvidia driver's numa_status, in the matrix and in JSON,
// and only for the GPU that has the file. The file's shape is the driver's
// (nv_procfs_read_numa_status), as on a coherent system where GPU memory is a node.
func TestTopoGPUNUMAID(t *testing.T) {
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	status := filepath.Join(root, "proc/driver/nvidia/gpus/0000:81:00.0/numa_status")
	if err := os.WriteFile(status, []byte("Node:      9\nStatus:    online\nAddress:   40000000000\nSize:      3f0000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// -o wide: nvidia-smi's TAB layout.
	out := mustRun(t, "--root", root, "topo", "-o", "wide")
	rows := strings.Split(out, "\n")
	for i, want := range map[int]string{1: "\t0\t\tN/A", 5: "\t1\t\t9", 6: "\t1\t\tN/A"} {
		if !strings.HasSuffix(rows[i], want) {
			t.Errorf("row %q, want it to end %q", rows[i], want)
		}
	}
	// Narrower, the cells lined up with spaces keep the column, which holds a node.
	out = mustRun(t, "--root", root, "topo")
	rows = strings.Split(out, "\n")
	if !strings.HasSuffix(rows[0], "CPU Affinity  NUMA Affinity  GPU NUMA ID") || !strings.HasSuffix(rows[5], "  1              9") {
		t.Errorf("topo at 100 columns:\n%s", out)
	}
	var doc struct {
		GPUNUMAID []int `json:"gpu_numa_id"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--root", root, "topo", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if want := []int{-1, -1, -1, -1, 9, -1, -1, -1}; !slices.Equal(doc.GPUNUMAID, want) {
		t.Errorf("gpu_numa_id %v, want %v", doc.GPUNUMAID, want)
	}
}

// topoBox is a GPU's box in topo's SVG: its fill, whether it is dashed, its text.
type topoBox struct {
	fill   string
	dashed bool
	text   string
}

// topoSVG reads topo --format svg's output with encoding/xml: its width and each GPU's
// box, by address.
func topoSVG(t *testing.T, out string) (int, map[string]*topoBox) {
	t.Helper()
	width := 0
	boxes := map[string]*topoBox{}
	var box *topoBox
	dec := xml.NewDecoder(strings.NewReader(out))
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
			switch {
			case e.Name.Local == "svg":
				width, _ = strconv.Atoi(attr["width"])
			case e.Name.Local == "g" && attr["class"] == "gpu":
				box = &topoBox{}
				boxes[attr["data-address"]] = box
			case e.Name.Local == "rect" && box != nil:
				box.fill, box.dashed = attr["fill"], attr["stroke-dasharray"] != ""
			case e.Name.Local == "text" && box != nil:
				box.text += "\n"
			}
		case xml.CharData:
			if box != nil {
				box.text += string(e)
			}
		case xml.EndElement:
			if e.Name.Local == "g" {
				box = nil
			}
		}
	}
	return width, boxes
}

// topo --format svg draws each GPU with the IOMMU group and holders inventory finds,
// within 1600 px; --vfio colours the split that plan --vfio makes, in the SVG and in
// DOT; the matrix refuses --vfio, which it cannot show.
func TestTopoPictures(t *testing.T) {
	var inv struct {
		GPUs []struct {
			Address    string `json:"address"`
			IOMMUGroup int    `json:"iommu_group"`
			NUMANode   int    `json:"numa_node"`
			Holders    []struct {
				PID       *int `json:"pid"`
				Container *int `json:"container"`
			} `json:"holders"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--demo", "inventory", "-o", "json")), &inv); err != nil {
		t.Fatal(err)
	}
	width, now := topoSVG(t, mustRun(t, "--demo", "topo", "--format", "svg"))
	splitWidth, split := topoSVG(t, mustRun(t, "--demo", "topo", "--format", "svg", "--vfio", "numa:1"))
	if width > 1600 || splitWidth > 1600 || len(now) != 8 || len(split) != 8 {
		t.Fatalf("%d and %d px wide, %d and %d GPU boxes", width, splitWidth, len(now), len(split))
	}
	vfioFill := ""
	for _, g := range inv.GPUs {
		b := now[g.Address]
		if b == nil {
			t.Fatalf("no box for %s", g.Address)
		}
		if !strings.Contains(b.text, fmt.Sprintf("\nIOMMU group %d\n", g.IOMMUGroup)) {
			t.Errorf("%s: no IOMMU group %d in %q", g.Address, g.IOMMUGroup, b.text)
		}
		if len(g.Holders) == 0 {
			t.Fatalf("%s: the sample's GPUs are held, the test needs them so", g.Address)
		}
		for _, h := range g.Holders {
			if h.PID != nil && !strings.Contains(b.text, fmt.Sprintf("[%d]", *h.PID)) {
				t.Errorf("%s: holder pid %d missing from %q", g.Address, *h.PID, b.text)
			}
			if h.Container != nil && !strings.Contains(b.text, fmt.Sprintf("in CT %d", *h.Container)) {
				t.Errorf("%s: holder's container %d missing from %q", g.Address, *h.Container, b.text)
			}
		}
		s := split[g.Address]
		moves := g.NUMANode == 1
		if b.dashed || s.dashed != moves || (s.fill != b.fill) == !moves {
			t.Errorf("%s (NUMA node %d): filled %s, dashed %v now; %s, %v with --vfio numa:1", g.Address, g.NUMANode, b.fill, b.dashed, s.fill, s.dashed)
		}
		if moves {
			if vfioFill != "" && s.fill != vfioFill {
				t.Errorf("the GPUs going to vfio-pci are filled %s and %s", vfioFill, s.fill)
			}
			vfioFill = s.fill
		}
	}
	dot := mustRun(t, "--demo", "topo", "--format", "dot", "--vfio", "numa:1")
	if n := strings.Count(dot, `style="filled,dashed"`); n != 4 || !strings.Contains(dot, "--vfio numa:1") {
		t.Errorf("DOT with --vfio numa:1: %d dashed GPUs, want 4; the split named: %v", n, strings.Contains(dot, "--vfio numa:1"))
	}
	for _, c := range []struct{ args, want []string }{
		{[]string{"--demo", "topo", "--vfio", "numa:1"}, []string{"--vfio", "--format svg"}},
		{[]string{"--demo", "topo", "--format", "svg", "--vfio", "numa:9"}, []string{"--vfio", "numa:9"}},
		{[]string{"--demo", "topo", "--format", "svg", "--vfio", ""}, []string{"--vfio needs a selector"}},
	} {
		if out, _, err := run(t, c.args...); err == nil {
			t.Errorf("gpusplit %v succeeded:\n%s", c.args, out)
		} else {
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("gpusplit %v: %q lacks %q", c.args, err, w)
				}
			}
		}
	}
}
