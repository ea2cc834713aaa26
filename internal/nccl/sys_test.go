package nccl

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pciids"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
	"github.com/gpusplit/gpusplit/internal/topo"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fromMachine writes the topology of a machine's GPUs and RDMA NICs.
func fromMachine(t *testing.T, h *host.Host, opt Options) (*Node, []string) {
	t.Helper()
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	devs := inv.Devices()
	for _, n := range topo.NICs(h, inv.Tree) {
		devs = append(devs, n.Device)
	}
	n, warnings, err := FromHost(h, inv.Tree, devs, opt)
	if err != nil {
		t.Fatal(err)
	}
	// Whatever is written must pass NCCL's parser rules.
	if _, err := Parse(Marshal(n)); err != nil {
		t.Fatalf("the written topology does not parse: %v\n%s", err, Marshal(n))
	}
	return n, warnings
}

func open(t *testing.T, m fakehost.Machine) *host.Host {
	t.Helper()
	h, err := m.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// stripRuntime removes from one of NCCL's dumps what NCCL adds at run time and a sysfs
// view cannot know: the ranks, GDR and keep flags, host hashes, NVLinks and network
// devices.
func stripRuntime(n *Node) *Node {
	for _, k := range []string{"rank", "gdr", "keep", "host_hash", "mlopart"} {
		n.Delete(k)
	}
	var kids []*Node
	for _, c := range n.Children {
		switch c.Name {
		case "nic", "nvlink", "c2c", "pcilink":
			continue
		}
		kids = append(kids, stripRuntime(c))
	}
	n.Children = kids
	return n
}

func readDump(t *testing.T, name string) *Node {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return stripRuntime(n)
}

// x1 is the machine of NVIDIA/nccl#1329's dump: a KVM guest (i440fx) with four A800
// on the root bus, no NUMA information, an Intel Ice Lake CPU; PCI passthrough on a
// conventional bus hides the GPUs' PCIe capability, so they have no link files.
func x1() fakehost.Machine {
	devs := []fakehost.Device{{Slot: 0, Vendor: 0x8086, Device: 0x1237, SubVendor: 0x1af4, SubDevice: 0x1100, Class: 0x060000, Rev: 2}}
	for i := range 4 {
		devs = append(devs, fakehost.Device{
			Slot: uint8(9 + i), Vendor: 0x10de, Device: 0x20f5, SubVendor: 0x10de, SubDevice: 0x1799, Class: 0x030200, Rev: 0xa1,
			Driver: "nvidia",
		})
	}
	return fakehost.Machine{
		Nodes:   []fakehost.Node{{ID: 0, CPUs: "0-31"}},
		Bridges: []fakehost.HostBridge{{Domain: 0, Bus: 0, NUMA: -1, Devices: devs}},
		Files: map[string]string{
			"proc/cpuinfo": "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 134\nmodel name\t: Intel Xeon Processor (Icelake)\nflags\t\t: fpu hypervisor\n\n",
		},
	}
}

// x2 is Azure's NC A100 v4: Hyper-V gives each A100 a PCI domain of its own, on one of
// four NUMA nodes of 24 vCPUs, AMD Milan (Linux's family 25, model 1).
func x2() fakehost.Machine {
	m := fakehost.Machine{
		Files: map[string]string{
			"proc/cpuinfo": "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7V13 64-Core Processor\n\n",
		},
	}
	for i := range 4 {
		m.Nodes = append(m.Nodes, fakehost.Node{ID: i, CPUs: []string{"0-23", "24-47", "48-71", "72-95"}[i]})
		m.Bridges = append(m.Bridges, fakehost.HostBridge{Domain: uint32(i + 1), Bus: 0, NUMA: i, Devices: []fakehost.Device{{
			Slot: 0, Vendor: 0x10de, Device: 0x20b5, SubVendor: 0x10de, SubDevice: 0x1533, Class: 0x030200, Rev: 0xa1, Driver: "nvidia",
		}}})
	}
	return m
}

// The same machines as two of NCCL's own dumps give the same tree, less what only NCCL
// knows at run time.
func TestMatchesNCCLDumps(t *testing.T) {
	for _, c := range []struct {
		name string
		m    fakehost.Machine
		dump string
	}{
		{"kvm-4xa800", x1(), "x1-kvm-4xa800.xml"},
		{"azure-ncv4", x2(), "x2-azure-ncv4.xml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, _ := fromMachine(t, open(t, c.m), Options{WithGPUs: true})
			want := readDump(t, c.dump)
			if g, w := Marshal(got), Marshal(want); !bytes.Equal(g, w) {
				t.Errorf("got:\n%s\nwant (NCCL's dump less run-time parts):\n%s", g, w)
			}
			// Without --with-gpus the file is the same less the <gpu> elements.
			plain, _ := fromMachine(t, open(t, c.m), Options{})
			plain.Walk(func(n *Node) {
				for _, k := range n.Children {
					if k.Name == "gpu" {
						t.Errorf("a <gpu> without WithGPUs: %s", Marshal(plain))
					}
				}
			})
		})
	}
}

// The sample host: one <cpu> per NUMA node with its cpumap and the CPU's identity, each
// GPU directly under it (its root port is skipped), its link from sysfs.
func TestSampleHost(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	n, warnings := fromMachine(t, h, Options{})
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
	got := Marshal(n)
	golden := "testdata/kpro6.xml"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("differs from %s (go test ./internal/nccl -update rewrites it):\n%s", golden, got)
	}
	if len(n.Children) != 2 {
		t.Fatalf("%d <cpu>, want 2", len(n.Children))
	}
	for i, cpu := range n.Children {
		if id, _ := cpu.Get("numaid"); id != []string{"0", "1"}[i] {
			t.Errorf("cpu %d numaid %s", i, id)
		}
		aff, _ := cpu.Get("affinity")
		if want := []string{"00000000,ffffffff,00000000,ffffffff", "ffffffff,00000000,ffffffff,00000000"}[i]; aff != want {
			t.Errorf("node %d affinity %s, want %s", i, aff, want)
		}
		gpus := 0
		for _, p := range cpu.Children {
			if c, _ := p.Get("class"); strings.HasPrefix(c, "0x03") {
				gpus++
			}
			if s, _ := p.Get("link_speed"); s != "32.0 GT/s PCIe" {
				t.Errorf("%v: link_speed %q", p.Attrs, s)
			}
		}
		if gpus != 4 {
			t.Errorf("node %d has %d GPUs, want 4", i, gpus)
		}
	}
}

// Behind switches, NCCL's two-step climb makes the upstream ports the elements: a
// nested switch's upstream port hangs off the outer one's, the root port and the
// downstream ports never appear.
func TestSwitchWalk(t *testing.T) {
	gpu := func(slot uint8) fakehost.Device {
		return fakehost.Device{Slot: slot, Vendor: 0x10de, Device: 0x2330, SubVendor: 0x10de, SubDevice: 0x16c1, Class: 0x030200, Driver: "nvidia", Speed: "32.0 GT/s PCIe", Width: 16}
	}
	sw := func(slot, fn uint8, secondary uint8, speed string, width int, kids ...fakehost.Device) fakehost.Device {
		return fakehost.Device{Slot: slot, Func: fn, Vendor: 0x1000, Device: 0xc030, SubVendor: 0x1000, SubDevice: 0xa064, Class: 0x060400, Driver: "pcieport", Speed: speed, Width: width, Secondary: secondary, Children: kids}
	}
	// root port 00:01.1 → USP 01:00.0 → DSP 02:00.0 → GPU 03:00.0
	//                                  → DSP 02:01.0 → USP 04:00.0 → DSP 05:00.0 → GPU 06:00.0
	//                                                  (a Gen4 x8 hop)
	m := fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-7"}},
		Bridges: []fakehost.HostBridge{{Domain: 0, Bus: 0, NUMA: 0, Devices: []fakehost.Device{
			{Slot: 0, Vendor: 0x1022, Device: 0x14a4, SubVendor: 0x1022, SubDevice: 0x14a4, Class: 0x060000},
			sw(1, 1, 1, "32.0 GT/s PCIe", 16,
				sw(0, 0, 2, "32.0 GT/s PCIe", 16,
					sw(0, 0, 3, "32.0 GT/s PCIe", 16, gpu(0)),
					sw(1, 0, 4, "16.0 GT/s PCIe", 8,
						sw(0, 0, 5, "16.0 GT/s PCIe", 8,
							sw(0, 0, 6, "32.0 GT/s PCIe", 16, gpu(0)))))),
		}}},
	}
	n, _ := fromMachine(t, open(t, m), Options{})
	want := `<system version="1">
  <cpu numaid="0" affinity="ff">
    <pci busid="0000:01:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0xa064" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:03:00.0" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0000:04:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0xa064" link_speed="16.0 GT/s PCIe" link_width="8">
        <pci busid="0000:06:00.0" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="16"/>
      </pci>
    </pci>
  </cpu>
</system>
`
	if got := string(Marshal(n)); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// A flat VM: GPUs on root ports of one host bridge, numa_node -1: one <cpu numaid="-1">
// without affinity; the link is the slower and narrower of the GPU's and QEMU's root
// port's (16 GT/s x32).
func TestFlatGuest(t *testing.T) {
	n, _ := fromMachine(t, open(t, fakehost.Q35Guest8()), Options{})
	if len(n.Children) != 1 {
		t.Fatalf("got %s", Marshal(n))
	}
	cpu := n.Children[0]
	if id, _ := cpu.Get("numaid"); id != "-1" {
		t.Errorf("numaid %s", id)
	}
	if _, ok := cpu.Get("affinity"); ok {
		t.Errorf("affinity for node -1: %v", cpu.Attrs)
	}
	if len(cpu.Children) != 8 {
		t.Fatalf("%d GPUs under the cpu, want 8", len(cpu.Children))
	}
	for _, p := range cpu.Children {
		speed, _ := p.Get("link_speed")
		width, _ := p.Get("link_width")
		if speed != "16.0 GT/s PCIe" || width != "16" {
			t.Errorf("%v: link %s x%s, want 16.0 GT/s PCIe x16", p.Attrs, speed, width)
		}
	}
}

func TestSM(t *testing.T) {
	names := pciids.Embedded()
	for _, c := range []struct {
		device uint16
		sm     int
	}{
		{0x2bb1, 120}, {0x2b85, 120}, {0x2335, 90}, {0x2330, 90}, {0x26b9, 89}, {0x2684, 89},
		{0x20b5, 80}, {0x20f5, 80}, {0x2230, 86}, {0x1db1, 70}, {0x1eb8, 75}, {0x2901, 100},
	} {
		name, _ := names.Device(0x10de, c.device)
		if sm, ok := SM(name); !ok || sm != c.sm {
			t.Errorf("SM(%q) = %d, %v; want %d", name, sm, ok, c.sm)
		}
	}
	if _, ok := SM("NV1 [STG2000X-B Series]"); ok {
		t.Error("an NV1 has a compute capability")
	}
}

func TestTooManyNodes(t *testing.T) {
	var devs []fakehost.Device
	for i := range 32 {
		devs = append(devs, fakehost.Device{Slot: uint8(i), Vendor: 0x10de, Device: 0x2330, SubVendor: 0x10de, SubDevice: 0x16c1, Class: 0x030200})
	}
	m := fakehost.Machine{Nodes: []fakehost.Node{{ID: 0, CPUs: "0-3"}}}
	for b := range 9 {
		m.Bridges = append(m.Bridges, fakehost.HostBridge{Domain: 0, Bus: uint8(b * 16), NUMA: 0, Devices: devs})
	}
	h := open(t, m)
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := inv.Devices()
	if _, _, err := FromHost(h, inv.Tree, all, Options{}); err == nil || !strings.Contains(err.Error(), "at most 256") {
		t.Errorf("%d GPUs: err = %v", len(all), err)
	}
}

// Delete removes an attribute.
func (n *Node) Delete(key string) {
	for i, a := range n.Attrs {
		if a.Key == key {
			n.Attrs = append(n.Attrs[:i], n.Attrs[i+1:]...)
			return
		}
	}
}
