package topo_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
	"github.com/gpusplit/gpusplit/internal/topo"
)

// checkCells checks every cell of m against want(i, j), for i != j among the GPUs and
// NICs, and X on the diagonal.
func checkCells(t *testing.T, m *topo.Matrix, want func(i, j int) topo.Relation) {
	t.Helper()
	labels := m.Labels()
	if len(m.Cells) != len(labels) {
		t.Fatalf("%d rows for %d labels", len(m.Cells), len(labels))
	}
	for i := range labels {
		if len(m.Cells[i]) != len(labels) {
			t.Fatalf("row %s has %d cells, want %d", labels[i], len(m.Cells[i]), len(labels))
		}
		for j := range labels {
			w := topo.Self
			if i != j {
				w = want(i, j)
			}
			if got := m.Cells[i][j]; got != w {
				t.Errorf("%s–%s = %s, want %s", labels[i], labels[j], got, w)
			}
		}
	}
}

// A q35 VM guest: every GPU on its own root port of the one host bridge, no NUMA node.
func TestQ35GuestIsFlat(t *testing.T) {
	m := matrixOfArchive(t, fakehost.Q35Guest8())
	if len(m.GPUs) != 8 || len(m.NICs) != 0 {
		t.Fatalf("%d GPUs and %d NICs, want 8 and 0", len(m.GPUs), len(m.NICs))
	}
	checkCells(t, m, func(i, j int) topo.Relation { return topo.PHB })
	if !m.Flat() {
		t.Error("Flat() = false, want true")
	}
	out := text(t, m)
	if !strings.Contains(out, topo.FlatNote) {
		t.Errorf("output lacks the flat note:\n%s", out)
	}
	for i := range 8 {
		row := fmt.Sprintf("GPU%d\t", i)
		line := lineStarting(out, row)
		if !strings.HasSuffix(line, "\t0-31\t\tN/A\t\tN/A") {
			t.Errorf("row GPU%d = %q, want the affinity 0-31, N/A, N/A", i, line)
		}
	}
}

// A QEMU i440fx guest: the GPUs sit on the root bus itself.
func TestI440fxGuestIsFlat(t *testing.T) {
	m := matrixOfArchive(t, fakehost.I440fxGuest4())
	if len(m.GPUs) != 4 {
		t.Fatalf("%d GPUs, want 4", len(m.GPUs))
	}
	for _, g := range m.GPUs {
		if len(g.Parents) != 0 {
			t.Errorf("%s has parent bridges %v, want none", g.Address, g.Parents)
		}
	}
	checkCells(t, m, func(i, j int) topo.Relation { return topo.PHB })
	if !m.Flat() {
		t.Error("Flat() = false, want true")
	}
	if out := text(t, m); !strings.Contains(out, topo.FlatNote) {
		t.Errorf("output lacks the flat note:\n%s", out)
	}
}

// The sample host kpro6: GPUs 0–3 on NUMA 0 and 4–7 on NUMA 1, each on its own root
// complex; the two ports of the ConnectX-7 on the root complex of GPU4.
func TestSampleHost(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	m := matrixOfHost(t, h)
	if len(m.GPUs) != 8 {
		t.Fatalf("%d GPUs, want 8", len(m.GPUs))
	}
	var names []string
	for _, n := range m.NICs {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"mlx5_0", "mlx5_1"}) {
		t.Fatalf("NICs %q, want mlx5_0 and mlx5_1", names)
	}
	// node returns the NUMA node of row i: GPUs 0–3 on 0, GPUs 4–7 and the NICs on 1.
	node := func(i int) int {
		if i < 4 {
			return 0
		}
		return 1
	}
	isNIC := func(i int) bool { return i >= 8 }
	checkCells(t, m, func(i, j int) topo.Relation {
		switch {
		case node(i) != node(j):
			return topo.SYS
		case isNIC(i) && isNIC(j):
			return topo.PIX // two functions of one card
		case isNIC(i) && j == 4, isNIC(j) && i == 4:
			return topo.PHB // the NIC's root port and GPU4's share root complex 80
		}
		return topo.NODE
	})
	if m.Flat() {
		t.Error("Flat() = true, want false")
	}
	out := text(t, m)
	if strings.Contains(out, topo.FlatNote) {
		t.Error("output has the flat note")
	}
	if !strings.Contains(out, "NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n") {
		t.Errorf("output lacks the NIC legend:\n%s", out)
	}
	for i, want := range map[int]string{0: "\t0-31,64-95\t0\t\tN/A", 7: "\t32-63,96-127\t1\t\tN/A"} {
		if line := lineStarting(out, fmt.Sprintf("GPU%d\t", i)); !strings.HasSuffix(line, want) {
			t.Errorf("row GPU%d = %q, want it to end %q", i, line, want)
		}
	}
	// NIC rows end at the last matrix cell.
	if line := lineStarting(out, "NIC1\t"); !strings.HasSuffix(line, "\tPIX\t X ") {
		t.Errorf("row NIC1 = %q", line)
	}
}

// bridgedSwitchHost is a one-socket Ice Lake-SP host whose one root port 30:02.0 leads
// to a PEX88000 switch (upstream port 31:00.0, downstream ports 32:01.0–32:04.0): RTX
// A6000s on the first two downstream ports (buses 34 and 35), and on each of the other
// two a PCIe-to-PCI adapter (a PEX8112, buses 36 and 38) holding a conventional PCI
// Quadro NVS 280 (37:00.0 and 39:00.0), the shape of a GPU behind a bridge of its own.
func bridgedSwitchHost() fakehost.Machine {
	const (
		intel, broadcom, plx, nvidia = 0x8086, 0x1000, 0x10b5, 0x10de
		pex88000, pex8112            = 0xc010, 0x8112
	)
	port := func(slot uint8, device uint16, width int, secondary uint8, children ...fakehost.Device) fakehost.Device {
		return fakehost.Device{
			Slot: slot, Vendor: broadcom, Device: device, SubVendor: broadcom, SubDevice: 0xa064, Class: 0x060400,
			Driver: "pcieport", Speed: "16.0 GT/s PCIe", Width: width, Secondary: secondary, Children: children,
		}
	}
	a6000 := func(i int) []fakehost.Device {
		base32, base64 := 0x90000000+uint64(i)*0x02000000, 0x200000000000+uint64(i)*0x1000000000
		return []fakehost.Device{
			{
				Vendor: nvidia, Device: 0x2230, SubVendor: nvidia, SubDevice: 0x1459, Class: 0x030000, Rev: 0xa1,
				Driver: "nvidia", Speed: "16.0 GT/s PCIe", Width: 16, Model: "NVIDIA RTX A6000",
				BARs: []fakehost.BAR{
					{Index: 0, Start: base32, Size: 16 << 20, Flags: fakehost.Mem32},
					{Index: 1, Start: base64, Size: 256 << 20, Flags: fakehost.Mem64Pref},
					{Index: 3, Start: base64 + 256<<20, Size: 32 << 20, Flags: fakehost.Mem64Pref},
				},
			},
			{
				Func: 1, Vendor: nvidia, Device: 0x1aef, SubVendor: nvidia, SubDevice: 0x1459, Class: 0x040300, Rev: 0xa1,
				Driver: "snd_hda_intel", Speed: "16.0 GT/s PCIe", Width: 16,
				BARs: []fakehost.BAR{{Index: 0, Start: base32 + 16<<20, Size: 16 << 10, Flags: fakehost.Mem32}},
			},
		}
	}
	// The adapter's bridge has a PCIe link upstream and a conventional PCI bus below;
	// no driver binds a PCIe-to-PCI bridge.
	adapter := func(secondary uint8, i int) fakehost.Device {
		base32 := 0x90000000 + uint64(i)*0x02000000
		return fakehost.Device{
			Vendor: plx, Device: pex8112, SubVendor: plx, SubDevice: pex8112, Class: 0x060400, Rev: 0xaa,
			Speed: "2.5 GT/s PCIe", Width: 1, Secondary: secondary,
			Children: []fakehost.Device{{
				Vendor: nvidia, Device: 0x032a, SubVendor: nvidia, SubDevice: 0x032a, Class: 0x030000, Rev: 0xa1,
				BARs: []fakehost.BAR{
					{Index: 0, Start: base32, Size: 16 << 20, Flags: fakehost.Mem32},
					{Index: 1, Start: base32 + 16<<20, Size: 16 << 20, Flags: fakehost.Mem32 | 0x8},
				},
			}},
		}
	}
	upstream := port(0, pex88000, 16, 0x32,
		port(1, pex88000, 16, 0x34, a6000(0)...),
		port(2, pex88000, 16, 0x35, a6000(1)...),
		port(3, pex88000, 1, 0x36, adapter(0x37, 2)),
		port(4, pex88000, 1, 0x38, adapter(0x39, 3)),
	)
	rootPort := fakehost.Device{
		Slot: 0x02, Vendor: intel, Device: 0x347a, SubVendor: intel, Class: 0x060400,
		Driver: "pcieport", Speed: "16.0 GT/s PCIe", Width: 16, Secondary: 0x31, Children: []fakehost.Device{upstream},
	}
	vtd := fakehost.Device{Vendor: intel, Device: 0x09a2, SubVendor: intel, Class: 0x088000, Rev: 0x04}
	return fakehost.Machine{
		Nodes:   []fakehost.Node{{ID: 0, CPUs: "0-55"}},
		Bridges: []fakehost.HostBridge{{Bus: 0x30, NUMA: 0, Devices: []fakehost.Device{vtd, rootPort}}},
		Files: map[string]string{
			"proc/cmdline":             "BOOT_IMAGE=/boot/vmlinuz-6.8.0-85-generic root=/dev/sda1 ro\n",
			"proc/sys/kernel/hostname": "pxb1\n",
			"etc/hostname":             "pxb1\n",
		},
	}
}

// PIX is one switch between two GPUs and no more: a GPU behind a bridge of its own on a
// downstream port is PXB to its siblings on the other ports, and two such GPUs are PXB
// to each other, as nvidia-smi counts the bridges.
func TestBridgeBelowSwitch(t *testing.T) {
	m := matrixOf(t, bridgedSwitchHost())
	var got []string
	for _, g := range m.GPUs {
		got = append(got, g.Address.String())
	}
	if want := []string{"0000:34:00.0", "0000:35:00.0", "0000:37:00.0", "0000:39:00.0"}; !slices.Equal(got, want) {
		t.Fatalf("GPUs %q, want %q", got, want)
	}
	// The bridges each GPU is found below: the tree as built, not as assumed.
	for i, want := range [][]string{
		{"0000:30:02.0", "0000:31:00.0", "0000:32:01.0"},
		{"0000:30:02.0", "0000:31:00.0", "0000:32:02.0"},
		{"0000:30:02.0", "0000:31:00.0", "0000:32:03.0", "0000:36:00.0"},
		{"0000:30:02.0", "0000:31:00.0", "0000:32:04.0", "0000:38:00.0"},
	} {
		var parents []string
		for _, p := range m.GPUs[i].Parents {
			parents = append(parents, p.String())
		}
		if !slices.Equal(parents, want) {
			t.Errorf("GPU%d below %q, want %q", i, parents, want)
		}
	}
	checkCells(t, m, func(i, j int) topo.Relation {
		if i < 2 && j < 2 {
			return topo.PIX
		}
		return topo.PXB
	})
	out := text(t, m)
	for _, row := range []string{
		"GPU0\t X \tPIX\tPXB\tPXB\t",
		"GPU2\tPXB\tPXB\t X \tPXB\t",
	} {
		if !strings.Contains(out, "\n"+row) {
			t.Errorf("output lacks row %q:\n%s", row, out)
		}
	}
}

func lineStarting(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// pictured are the machines whose PCIe tree the DOT and SVG tests draw: switches and a
// NIC under another host bridge, a flat VM, conventional PCI, the sample host bare and
// as topo --vfio draws it.
var pictured = []struct {
	name string
	m    func(t *testing.T) *topo.Matrix
}{
	{"o1", func(t *testing.T) *topo.Matrix { return matrixOfArchive(t, fakehost.OracleO1()) }},
	{"q35", func(t *testing.T) *topo.Matrix { return matrixOfArchive(t, fakehost.Q35Guest8()) }},
	{"i440fx", func(t *testing.T) *topo.Matrix { return matrixOfArchive(t, fakehost.I440fxGuest4()) }},
	{"kpro6", func(t *testing.T) *topo.Matrix {
		h, err := samplehost.Open()
		if err != nil {
			t.Fatal(err)
		}
		return matrixOfHost(t, h)
	}},
	// The sample as topo's pictures see it: names from pci.ids, long enough to wrap
	// ("GB202GL [RTX PRO 6000 Blackwell Workstation Edition]"), holders, and a split.
	{"kpro6-split", func(t *testing.T) *topo.Matrix {
		inv, m := sampleInventory(t)
		m.Split = splitOf(t, inv, "numa:1")
		return m
	}},
}

func TestWriteDOT(t *testing.T) {
	for _, tt := range pictured {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.m(t)
			var b bytes.Buffer
			if err := m.WriteDOT(&b); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if !strings.HasPrefix(out, "graph topology {\n") || !strings.HasSuffix(out, "}\n") {
				t.Errorf("not a graph:\n%s", out)
			}
			if o, c := strings.Count(out, "{"), strings.Count(out, "}"); o != c {
				t.Errorf("%d '{' and %d '}'", o, c)
			}
			var devs []*pci.Device
			devs = append(devs, m.GPUs...)
			for _, n := range m.NICs {
				devs = append(devs, n.Device)
			}
			for _, d := range devs {
				if !strings.Contains(out, fmt.Sprintf("%q [label=", d.Address.String())) {
					t.Errorf("no node for %s", d.Address)
				}
				if !strings.Contains(out, fmt.Sprintf("%q [label=\"host bridge", d.HostBridge.String())) {
					t.Errorf("no node for host bridge %s", d.HostBridge)
				}
				// Every bridge on the way down is a node, and joined to the next.
				parent := d.HostBridge.String()
				for _, p := range d.Parents {
					if !strings.Contains(out, fmt.Sprintf("%q -- %q;", parent, p.String())) {
						t.Errorf("no edge %s -- %s", parent, p)
					}
					parent = p.String()
				}
				if !strings.Contains(out, fmt.Sprintf("%q -- %q;", parent, d.Address.String())) {
					t.Errorf("no edge %s -- %s", parent, d.Address)
				}
			}
			// Graphviz must take what gpusplit writes: without dot that goes unchecked,
			// so its absence fails the test rather than passing it.
			dot, err := exec.LookPath("dot")
			if err != nil {
				t.Fatalf("Graphviz's dot is not installed (%v): install graphviz (./scripts/vm-deps does) to check that it renders the DOT output", err)
			}
			cmd := exec.Command(dot, "-Tsvg")
			cmd.Stdin = strings.NewReader(out)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil || stderr.Len() > 0 {
				t.Errorf("dot -Tsvg: %v\n%s", err, stderr.String())
			}
		})
	}
}

// Build puts the GPUs in address order whatever order they come in, and the labels
// follow that order.
func TestBuildOrder(t *testing.T) {
	a := dev(t, "0000:01:00.0", 0x00, 0, "0000:00:01.1")
	b := dev(t, "0000:41:00.0", 0x40, 0, "0000:40:01.1")
	c := dev(t, "0000:81:00.0", 0x80, 1, "0000:80:01.1")
	d := dev(t, "0001:00:00.0", 0x00, 1)
	d.HostBridge.Domain = 1
	given := []*pci.Device{d, c, a, b}
	m := topo.Build(given, nil, 2)
	var got []string
	for _, g := range m.GPUs {
		got = append(got, g.Address.String())
	}
	want := []string{"0000:01:00.0", "0000:41:00.0", "0000:81:00.0", "0001:00:00.0"}
	if !slices.Equal(got, want) {
		t.Fatalf("GPUs in order %q, want %q", got, want)
	}
	if given[0] != d || given[1] != c {
		t.Error("Build reordered the caller's slice")
	}
	if l := m.Labels(); !slices.Equal(l, []string{"GPU0", "GPU1", "GPU2", "GPU3"}) {
		t.Errorf("labels %q", l)
	}
	out := text(t, m)
	for _, row := range []string{
		"GPU0\t X \tNODE\tSYS\tSYS\t",
		"GPU1\tNODE\t X \tSYS\tSYS\t",
		"GPU2\tSYS\tSYS\t X \tNODE\t",
		"GPU3\tSYS\tSYS\tNODE\t X \t",
	} {
		if !strings.Contains(out, "\n"+row) {
			t.Errorf("output lacks row %q:\n%s", row, out)
		}
	}
}

func TestWriteTextNoGPUs(t *testing.T) {
	out := text(t, topo.Build(nil, nil, 1))
	if !strings.HasPrefix(out, "No GPUs found.") {
		t.Errorf("output %q", out)
	}
}

func TestNUMAAffinity(t *testing.T) {
	for n, want := range map[int]string{-1: "N/A", 0: "0", 3: "3"} {
		if got := topo.NUMAAffinity(n); got != want {
			t.Errorf("NUMAAffinity(%d) = %q, want %q", n, got, want)
		}
	}
}
