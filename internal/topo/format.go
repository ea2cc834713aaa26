package topo

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/table"
)

// Legend is nvidia-smi's legend for the relations, word for word.
const Legend = `Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
`

// FlatNote explains a matrix where every pair is PHB for want of topology.
const FlatNote = `Note: every GPU pair is PHB and no GPU has a NUMA node. The GPUs hang off a single
PCIe host bridge (on its root ports or its root bus) and the kernel reports numa_node -1,
which is how a VM guest looks when its PCIe layout does not carry the host's: the
relations above say nothing about the real hardware. Run gpusplit on the host to see them.
`

// NVLinkNote says what the matrix cannot show.
const NVLinkNote = "NVLink (NV#) cannot be seen from sysfs: GPUs joined by NVLink show their PCIe relation.\n"

// WriteText writes the matrix as nvidia-smi topo -m does: TAB-separated cells, " X " on
// the diagonal, CPU and NUMA affinity and GPU NUMA ID per GPU (N/A when unknown; the
// GPU NUMA ID once ReadGPUNUMAIDs has read it), then the legend.
func (m *Matrix) WriteText(w io.Writer) error {
	var b strings.Builder
	labels := m.Labels()
	if len(m.GPUs) == 0 {
		b.WriteString("No GPUs found. Use --devices to choose which devices count as GPUs.\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("\t" + strings.Join(labels, "\t") + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n")
	for i, label := range labels {
		b.WriteString(label)
		for j := range labels {
			b.WriteString("\t")
			if i == j {
				b.WriteString(" X ")
			} else {
				b.WriteString(string(m.Cells[i][j]))
			}
		}
		if i < len(m.GPUs) {
			g := m.GPUs[i]
			cpus := g.LocalCPUs.String()
			if cpus == "" {
				cpus = "N/A"
			}
			// nvidia-smi pads the NUMA Affinity column with two TABs after a node
			// number, and puts two TABs on each side of N/A.
			if g.NUMANode >= 0 {
				fmt.Fprintf(&b, "\t%s\t%d\t\t%s", cpus, g.NUMANode, m.GPUNUMAID(i))
			} else {
				fmt.Fprintf(&b, "\t%s\t\tN/A\t\t%s", cpus, m.GPUNUMAID(i))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n" + Legend)
	if len(m.NICs) > 0 {
		b.WriteString("\nNIC Legend:\n\n")
		for i, n := range m.NICs {
			fmt.Fprintf(&b, "  NIC%d: %s\n", i, n.Name)
		}
	}
	b.WriteString("\n" + NVLinkNote)
	if m.Flat() {
		b.WriteString("\n" + FlatNote)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTextWidth writes the matrix at most width columns wide (table.Wide: as
// WriteText). nvidia-smi's TAB layout stays when it fits; else the same cells are lined
// up with spaces, the GPU NUMA ID column goes when it is N/A for every GPU (it is but on
// coherent systems such as Grace), and the legend's long lines wrap.
func (m *Matrix) WriteTextWidth(w io.Writer, width int) error {
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		return err
	}
	text := b.String()
	fits := true
	for line := range strings.Lines(text) {
		fits = fits && table.TabLen(strings.TrimSuffix(line, "\n")) <= width
	}
	if width <= table.Wide || fits || len(m.GPUs) == 0 {
		_, err := io.WriteString(w, text)
		return err
	}
	labels := m.Labels()
	cols := []table.Column{{}}
	for _, l := range labels {
		cols = append(cols, table.Column{Header: l})
	}
	// GPU NUMA ID goes only when it says nothing (N/A for every GPU, as but on coherent
	// systems); a node there is worth the overflow.
	numaID := table.Column{Header: "GPU NUMA ID", Drop: 1}
	for i := range m.GPUs {
		if m.GPUNUMAID(i) != "N/A" {
			numaID.Drop = 0
		}
	}
	cols = append(cols, table.Column{Header: "CPU Affinity"}, table.Column{Header: "NUMA Affinity"}, numaID)
	t := table.New(cols...)
	for i, label := range labels {
		row := []string{label}
		for j := range labels {
			if i == j {
				row = append(row, "X")
			} else {
				row = append(row, string(m.Cells[i][j]))
			}
		}
		if i < len(m.GPUs) {
			g := m.GPUs[i]
			cpus := g.LocalCPUs.String()
			if cpus == "" {
				cpus = "N/A"
			}
			row = append(row, cpus, NUMAAffinity(g.NUMANode), m.GPUNUMAID(i))
		}
		t.Add(row...)
	}
	var out strings.Builder
	if err := t.Write(&out, width); err != nil {
		return err
	}
	// The rest (legend and notes) as WriteText has it, its long lines wrapped under
	// their text: "  NODE = …" continues below "Connection".
	rest := text[strings.Index(text, "\n\n")+1:]
	for line := range strings.Lines(rest) {
		line = strings.TrimSuffix(line, "\n")
		if table.Len(line) <= width {
			out.WriteString(line + "\n")
			continue
		}
		head, body := "", line
		if i := strings.Index(line, "= "); i >= 0 {
			head, body = line[:i+2], line[i+2:]
		}
		for _, l := range table.WrapText(body, width, head, strings.Repeat(" ", table.Len(head))) {
			out.WriteString(l + "\n")
		}
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// NUMAAffinity returns a GPU's NUMA node as nvidia-smi prints it: the number, or N/A.
func NUMAAffinity(node int) string {
	if node < 0 {
		return "N/A"
	}
	return strconv.Itoa(node)
}
