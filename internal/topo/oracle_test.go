package topo_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/cpuset"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
	"github.com/gpusplit/gpusplit/internal/topo"
)

// matrixOf lays out m in a temporary directory and computes its matrix the way the topo
// command does: scan, the default GPUs, the RDMA NICs, the NUMA node count.
func matrixOf(t *testing.T, m fakehost.Machine) *topo.Matrix {
	t.Helper()
	h, err := m.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return matrixOfHost(t, h)
}

// matrixOfArchive is matrixOf through a snapshot archive held in memory.
func matrixOfArchive(t *testing.T, m fakehost.Machine) *topo.Matrix {
	t.Helper()
	tree, err := m.Build()
	if err != nil {
		t.Fatal(err)
	}
	ar, err := tree.Archive()
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.OpenArchive("fixture", bytes.NewReader(ar))
	if err != nil {
		t.Fatal(err)
	}
	return matrixOfHost(t, h)
}

func matrixOfHost(t *testing.T, h *host.Host) *topo.Matrix {
	t.Helper()
	pt, err := pci.Scan(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pt.Warnings) > 0 {
		t.Errorf("scan warnings: %q", pt.Warnings)
	}
	gpus, err := pci.GPUs(pt, nil)
	if err != nil {
		t.Fatal(err)
	}
	var devs []*pci.Device
	for _, g := range gpus {
		devs = append(devs, g.Device)
	}
	return topo.Build(devs, topo.NICs(h, pt), topo.NUMANodes(h))
}

func text(t *testing.T, m *topo.Matrix) string {
	t.Helper()
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// oracleLines returns the matrix lines of an oracle file in testdata: the header row
// (which starts with a TAB) and the GPU and NIC rows, without the comment line.
func oracleLines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "GPU") || strings.HasPrefix(l, "NIC") {
			out = append(out, l)
		}
	}
	if len(out) < 2 {
		t.Fatalf("%s: no matrix found", name)
	}
	return out
}

// compareMatrix compares the first lines of WriteText's output with an oracle's matrix
// lines, byte for byte except for trailing spaces (the pastes lose the one after the
// last " X " of a NIC row).
func compareMatrix(t *testing.T, got string, want []string) {
	t.Helper()
	lines := strings.Split(got, "\n")
	if len(lines) < len(want) {
		t.Fatalf("output has %d lines, the oracle's matrix %d:\n%s", len(lines), len(want), got)
	}
	for i, w := range want {
		g := strings.TrimRight(lines[i], " ")
		w = strings.TrimRight(w, " ")
		if g != w {
			t.Errorf("line %d:\n got  %q\n want %q", i+1, g, w)
		}
	}
	// The matrix ends where the oracle's does: a blank line, then the legend.
	if next := lines[len(want)]; next != "" {
		t.Errorf("line %d after the matrix is %q, want it blank", len(want)+1, next)
	}
}

// The oracles are nvidia-smi topo -m outputs pasted into public issues (see
// testdata/README.md); the fixtures rebuild the machines they came from.
func TestOracles(t *testing.T) {
	tests := []struct {
		file    string
		machine func() fakehost.Machine
	}{
		{"o1.txt", fakehost.OracleO1},
		{"o2.txt", fakehost.OracleO2},
		{"o4.txt", fakehost.OracleO4},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			m := matrixOf(t, tt.machine())
			compareMatrix(t, text(t, m), oracleLines(t, tt.file))
			if m.Flat() {
				t.Error("Flat() is true for a bare-metal host")
			}
		})
	}
}

// Oracles O5 and O6 check the affinity columns where the GPUs are on different NUMA
// nodes, one of them unknown (O5): built from hand-made devices with what the reports
// give (bus numbers for O5, CPU lists and nodes for both).
func TestOraclesAffinity(t *testing.T) {
	cpus := func(s string) cpuset.Set {
		set, err := cpuset.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	o5a := dev(t, "0000:09:00.0", 0x00, -1, "0000:00:03.1")
	o5a.LocalCPUs = cpus("0-7,16-23")
	o5b := dev(t, "0000:41:00.0", 0x40, 1, "0000:40:03.1")
	o5b.LocalCPUs = cpus("8-15,24-31")
	o6a := dev(t, "0000:01:00.0", 0x00, 0, "0000:00:01.1")
	o6a.LocalCPUs = cpus("0-7,32-39")
	o6b := dev(t, "0000:81:00.0", 0x80, 2, "0000:80:01.1")
	o6b.LocalCPUs = cpus("16-23,48-55")
	tests := []struct {
		file  string
		gpus  []*pci.Device
		nodes int
	}{
		{"o5.txt", []*pci.Device{o5a, o5b}, 2},
		{"o6.txt", []*pci.Device{o6a, o6b}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			compareMatrix(t, text(t, topo.Build(tt.gpus, nil, tt.nodes)), oracleLines(t, tt.file))
		})
	}
}
