package topo_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
	"github.com/gpusplit/gpusplit/internal/topo"
)

// power9NUMAStatus are the numa_status files of the six V100 of an IBM POWER9 AC922
// (PowerNV 8335-GTW) as hwloc keeps them in its test suite (open-mpi/hwloc,
// tests/hwloc/linux/nvidiagpunumanodes.tar.bz2), with the PCI devices' local_cpus: each
// GPU's memory is a NUMA node of its own, numbered down from 255, while its CPUs are
// those of socket 0 (node 0) or socket 1 (node 8).
var power9NUMAStatus = []struct{ addr, localCPUs, cpus, node string }{
	{"0004:05:00.0", "0000,00000000,00000000,00000000,00000000,0000ffff", "0-15", "255"},
	{"0004:06:00.0", "0000,00000000,00000000,00000000,00000000,0000ffff", "0-15", "254"},
	{"0006:00:00.0", "0000,00000000,00000000,00000000,00000000,0000ffff", "0-15", "253"},
	{"0007:00:00.0", "0000,00000000,000000ff,ff000000,00000000,00000000", "88-103", "252"},
	{"0035:04:00.0", "0000,00000000,000000ff,ff000000,00000000,00000000", "88-103", "251"},
	{"0035:05:00.0", "0000,00000000,000000ff,ff000000,00000000,00000000", "88-103", "250"},
}

func TestParseNUMAStatus(t *testing.T) {
	tests := []struct {
		name, in string
		want     int
		ok       bool
	}{
		{"the POWER9 capture, an opened GPU", "Node:      255\nStatus:    online\nAddress:   40000000000\nSize:      3f0000000\n", 255, true},
		{"a GPU not opened yet", "Node:      1\nStatus:    offline\n", 1, true},
		{"onlining failed: the node is still the GPU's", "Node:      4\nStatus:    online_failed\n", 4, true},
		{"node 0", "Node:      0\nStatus:    online_in_progress\n", 0, true},
		{"no NUMA node", "Node:      -1\nStatus:    offline\n", -1, false},
		{"disabled", "Node:      2\nStatus:    disabled\n", -1, false},
		{"a state the driver does not know", "Node:      2\nStatus:    invalid\n", -1, false},
		{"no status line", "Node:      2\n", -1, false},
		{"no node line", "Status:    online\n", -1, false},
		{"garbage node", "Node:      2a\nStatus:    online\n", -1, false},
		{"a node past any kernel's", "Node:      99999999\nStatus:    online\n", -1, false},
		{"empty", "", -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := topo.ParseNUMAStatus(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseNUMAStatus(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// numaIDMatrix scans the host at root and builds its matrix, GPU NUMA IDs read when read
// is set.
func numaIDMatrix(t *testing.T, root string, read bool) string {
	t.Helper()
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := pci.Scan(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := pci.GPUs(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	var devs []*pci.Device
	for _, g := range gpus {
		devs = append(devs, g.Device)
	}
	m := topo.Build(devs, topo.NICs(h, tree), topo.NUMANodes(h))
	if read {
		m.ReadGPUNUMAIDs(h)
	}
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// numaIDRow returns the row of label in a matrix's text.
func numaIDRow(out, label string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, label+"\t") {
			return l
		}
	}
	return ""
}

func writeNUMAFile(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The POWER9 capture: GPU NUMA ID is the node of each GPU's memory that numa_status
// states (nvidia-smi's column), beside the CPUs near it; a GPU without the file has none.
func TestGPUNUMAIDFromNUMAStatus(t *testing.T) {
	root := t.TempDir()
	for i, g := range power9NUMAStatus {
		// The capture's PCI devices hold class and local_cpus only; the uevent is what
		// pci_uevent writes for a Tesla V100 SXM2 16GB, for the scan to know them.
		dir := filepath.Join(root, "sys/bus/pci/devices", g.addr)
		writeNUMAFile(t, dir+"/class", "0x030000\n")
		writeNUMAFile(t, dir+"/local_cpus", g.localCPUs+"\n")
		writeNUMAFile(t, dir+"/uevent", "PCI_CLASS=30000\nPCI_ID=10DE:1DB1\nPCI_SLOT_NAME="+g.addr+"\n")
		if i == 2 {
			continue // one GPU the driver has not probed
		}
		writeNUMAFile(t, filepath.Join(root, "proc/driver/nvidia/gpus", g.addr, "numa_status"),
			"Node:      "+g.node+"\nStatus:    online\nAddress:   40000000000\nSize:      3f0000000\n")
	}
	out := numaIDMatrix(t, root, true)
	for i, g := range power9NUMAStatus {
		id := g.node
		if i == 2 {
			id = "N/A"
		}
		// No numa_node in the capture: NUMA Affinity is N/A, as nvidia-smi pads it.
		want := "\t" + g.cpus + "\t\tN/A\t\t" + id
		if row := numaIDRow(out, fmt.Sprintf("GPU%d", i)); !strings.HasSuffix(row, want) {
			t.Errorf("GPU%d (%s): row %q, want it to end %q", i, g.addr, row, want)
		}
	}
	// Not read, the column is N/A throughout, as before.
	for i := range power9NUMAStatus {
		if row := numaIDRow(numaIDMatrix(t, root, false), fmt.Sprintf("GPU%d", i)); !strings.HasSuffix(row, "\t\tN/A\t\tN/A") {
			t.Errorf("GPU%d without ReadGPUNUMAIDs: %q", i, row)
		}
	}
}

// Beside a NUMA Affinity the GPU NUMA ID keeps nvidia-smi's two TABs; a machine
// without numa_status files (every fixture host) prints what it always printed.
func TestGPUNUMAIDBesideNUMAAffinity(t *testing.T) {
	root := t.TempDir()
	if _, err := fakehost.OracleO1().Open(root); err != nil {
		t.Fatal(err)
	}
	before := numaIDMatrix(t, root, false)
	if after := numaIDMatrix(t, root, true); after != before {
		t.Errorf("reading GPU NUMA IDs of a host without numa_status changed the matrix:\n%s\nwas:\n%s", after, before)
	}
	row := numaIDRow(before, "GPU0")
	if !strings.HasSuffix(row, "\t0\t\tN/A") {
		t.Fatalf("GPU0 of O1: %q; want NUMA Affinity 0 and GPU NUMA ID N/A", row)
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := pci.Scan(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := pci.GPUs(tree, nil)
	if err != nil || len(gpus) == 0 {
		t.Fatalf("GPUs: %v, %v", gpus, err)
	}
	writeNUMAFile(t, filepath.Join(root, "proc/driver/nvidia/gpus", gpus[0].Address.String(), "numa_status"),
		"Node:      2\nStatus:    online\n")
	after := numaIDMatrix(t, root, true)
	want := strings.TrimSuffix(row, "N/A") + "2"
	if got := numaIDRow(after, "GPU0"); got != want {
		t.Errorf("GPU0: %q, want %q", got, want)
	}
	// Only that row changed.
	if strings.Replace(after, want, row, 1) != before {
		t.Errorf("other rows changed:\n%s\nwas:\n%s", after, before)
	}
}
