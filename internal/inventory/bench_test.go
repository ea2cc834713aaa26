package inventory_test

// Benchmarks of the scan behind "gpusplit topo" and "gpusplit inventory", on the sample
// host and on a synthetic large host of 4,096 PCI functions. docs/performance.md has the
// figures and the commands that produced them.
//
// The synthetic host can also be written to a directory, for timing other tools on the
// same tree:
//
//	GPUSPLIT_SYNTHETIC_DIR=/tmp/synthetic go test -run TestWriteSyntheticHost ./internal/inventory/

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pciids"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
	"github.com/gpusplit/gpusplit/internal/topo"
)

// The synthetic host's shape.
const (
	synthNodes        = 4  // NUMA nodes
	synthBridges      = 16 // host bridges of the benchmarks' host, four per node, 16 buses each
	synthFunctions    = synthBridges * perBridge
	perBridge         = 256 // functions under each host bridge
	switchesPerBridge = 2
	gpusPerSwitch     = 2
	gpusPerBridge     = switchesPerBridge * gpusPerSwitch
	coresPerNode      = 48
)

const (
	vNVIDIA   = 0x10de
	vAMD      = 0x1022
	vBroadcom = 0x1000
	vMellanox = 0x15b3
	vSamsung  = 0x144d
	vIntel    = 0x8086
	gen5      = "32.0 GT/s PCIe"
	gen4      = "16.0 GT/s PCIe"
)

// synthMachine describes the synthetic host. Under each of the 16 host bridges
// (pci0000:00, pci0000:10, … pci0000:f0):
//
//	root bus     root complex 00.0, IOMMU 00.2, root ports 01.1, 02.1, 03.1, 07.1   6
//	01.1, 02.1   a PCIe switch each: upstream port, 4 downstream ports leading to
//	             2 GPUs (with their HDMI audio functions), a dual-port ConnectX-7
//	             (one RDMA port per function) and an NVMe drive                  2 × 12
//	03.1         the boot NVMe drive                                              1
//	07.1         filler: 8-function accelerator endpoints on one bus             225
//
// 256 functions per host bridge, 4,096 in all for the benchmarks' 16 bridges, 64 of them
// GPUs. The GPUs of the last NUMA node are bound to vfio-pci, the others to nvidia; 512
// processes run, a quarter of them holding a GPU's device node open. Other sizes (for
// scripts/bench-vs-lspci) have as many bridges as they need, 16 to a PCI domain, spread
// over the nodes in order.
func synthMachine(nBridges int) fakehost.Machine {
	group := 0
	next := func() int { group++; return group }

	nvidiaGPUs := 0
	var bridges []fakehost.HostBridge
	for i := range nBridges {
		node := i * synthNodes / nBridges
		base := uint8(i % 16 * 16)
		drv := "nvidia"
		if node == synthNodes-1 {
			drv = "vfio-pci"
		}
		count := 0
		add := func(d fakehost.Device) fakehost.Device { count++; return d }
		port := func(slot, fn, secondary uint8, speed string, width int, children ...fakehost.Device) fakehost.Device {
			return add(fakehost.Device{
				Slot: slot, Func: fn, Vendor: vAMD, Device: 0x153e, SubVendor: vAMD, SubDevice: 0x153e,
				Class: 0x060400, Driver: "pcieport", Group: next(), Speed: speed, Width: width,
				Secondary: secondary, Children: children,
			})
		}
		nvme := func(slot uint8, bus uint8) fakehost.Device {
			return add(fakehost.Device{
				Slot: slot, Vendor: vSamsung, Device: 0xa80a, SubVendor: vSamsung, SubDevice: 0xaa0a,
				Class: 0x010802, Driver: "nvme", Group: next(), Speed: gen4, Width: 4,
				BARs: []fakehost.BAR{{Index: 0, Start: 0xc0000000 + uint64(bus)<<20, Size: 32 << 10, Flags: fakehost.Mem64}},
			})
		}
		gpu := func(bus uint8) []fakehost.Device {
			g := next()
			bar := 0x20000000000 + uint64(bus)<<36
			if drv == "nvidia" {
				nvidiaGPUs++
			}
			return []fakehost.Device{
				add(fakehost.Device{
					Vendor: vNVIDIA, Device: 0x2bb1, SubVendor: vNVIDIA, SubDevice: 0x204b, Class: 0x030000,
					Rev: 0xa1, Driver: drv, Group: g, Speed: gen5, Width: 16,
					BARs: []fakehost.BAR{
						{Index: 0, Start: 0x10000000000 + uint64(bus)<<26, Size: 64 << 20, Flags: fakehost.Mem64},
						{Index: 1, Start: bar, Size: 128 << 30, Flags: fakehost.Mem64Pref},
						{Index: 3, Start: bar + 128<<30, Size: 32 << 20, Flags: fakehost.Mem64Pref},
					},
				}),
				add(fakehost.Device{
					Func: 1, Vendor: vNVIDIA, Device: 0x22e8, SubVendor: vNVIDIA, Class: 0x040300, Rev: 0xa1,
					Driver: map[string]string{"nvidia": "snd_hda_intel", "vfio-pci": "vfio-pci"}[drv],
					Group:  g, Speed: gen5, Width: 16,
				}),
			}
		}
		nic := func(bus uint8) []fakehost.Device {
			g := next()
			var out []fakehost.Device
			for fn := range uint8(2) {
				out = append(out, add(fakehost.Device{
					Func: fn, Vendor: vMellanox, Device: 0x1021, SubVendor: vMellanox, SubDevice: 0x0041,
					Class: 0x020000, Driver: "mlx5_core", Group: g, Speed: gen5, Width: 16,
					RDMA: fmt.Sprintf("mlx5_%d", i*switchesPerBridge*2+int(bus-base)/6*2+int(fn)),
					BARs: []fakehost.BAR{{Index: 0, Start: 0x38000000000 + uint64(bus)<<28 + uint64(fn)<<26, Size: 64 << 20, Flags: fakehost.Mem64Pref}},
				}))
			}
			return out
		}
		// A switch behind a root port whose secondary bus is up: the upstream port is on
		// up, its downstream ports on up+1, their devices on up+2 … up+5.
		pcieSwitch := func(up uint8) fakehost.Device {
			var downs []fakehost.Device
			for k := range uint8(4) {
				bus := up + 2 + k
				var children []fakehost.Device
				switch {
				case int(k) < gpusPerSwitch:
					children = gpu(bus)
				case int(k) == gpusPerSwitch:
					children = nic(bus)
				default:
					children = []fakehost.Device{nvme(0, bus)}
				}
				downs = append(downs, add(fakehost.Device{
					Slot: k, Vendor: vBroadcom, Device: 0xc030, SubVendor: vBroadcom, SubDevice: 0xa064,
					Class: 0x060400, Driver: "pcieport", Group: next(), Speed: gen5, Width: 16,
					Secondary: bus, Children: children,
				}))
			}
			return add(fakehost.Device{
				Vendor: vBroadcom, Device: 0xc030, SubVendor: vBroadcom, SubDevice: 0xa064,
				Class: 0x060400, Driver: "pcieport", Group: next(), Speed: gen5, Width: 16,
				Secondary: up + 1, Children: downs,
			})
		}

		devs := []fakehost.Device{
			add(fakehost.Device{Slot: 0, Func: 0, Vendor: vAMD, Device: 0x153a, SubVendor: vAMD, SubDevice: 0x153a, Class: 0x060000, Group: next()}),
			add(fakehost.Device{Slot: 0, Func: 2, Vendor: vAMD, Device: 0x153b, SubVendor: vAMD, SubDevice: 0x153b, Class: 0x080600, Group: fakehost.NoGroup}),
		}
		for s := range uint8(switchesPerBridge) {
			up := base + 1 + 6*s
			devs = append(devs, port(1+s, 1, up, gen5, 16, pcieSwitch(up)))
		}
		boot := base + 1 + 6*switchesPerBridge
		devs = append(devs, port(3, 1, boot, gen4, 4, nvme(0, boot)))
		// The filler's port is counted before its children, which are made below.
		count++
		fill := boot + 1
		var filler []fakehost.Device
		for n := 0; count < perBridge; n++ {
			filler = append(filler, add(fakehost.Device{
				Slot: uint8(n / 8), Func: uint8(n % 8), Vendor: vIntel, Device: 0x0b25, SubVendor: vIntel, SubDevice: 0x0000,
				Class: 0x088000, Driver: "idxd", Group: next(), Speed: gen4, Width: 16,
				BARs: []fakehost.BAR{{Index: 0, Start: 0x40000000000 + uint64(fill)<<32 + uint64(n)<<20, Size: 64 << 10, Flags: fakehost.Mem64Pref}},
			}))
		}
		devs = append(devs, fakehost.Device{
			Slot: 7, Func: 1, Vendor: vAMD, Device: 0x1555, SubVendor: vAMD, SubDevice: 0x1555,
			Class: 0x060400, Driver: "pcieport", Group: next(), Speed: gen4, Width: 16,
			Secondary: fill, Children: filler,
		})
		bridges = append(bridges, fakehost.HostBridge{Domain: uint32(i / 16), Bus: base, NUMA: node, Devices: devs})
	}

	var nodes []fakehost.Node
	for n := range synthNodes {
		lo, smt := n*coresPerNode, synthNodes*coresPerNode+n*coresPerNode
		nodes = append(nodes, fakehost.Node{ID: n, CPUs: fmt.Sprintf("%d-%d,%d-%d", lo, lo+coresPerNode-1, smt, smt+coresPerNode-1)})
	}
	var procs []fakehost.Process
	for p := range 512 {
		pr := fakehost.Process{PID: 1000 + p, Comm: "worker", Cmdline: []string{"/usr/bin/worker", fmt.Sprint(p)}, Cgroup: "/system.slice/worker.service"}
		if p%4 == 0 {
			minor := p / 4 % nvidiaGPUs
			pr.Comm, pr.Cgroup = "python3", fmt.Sprintf("/lxc/%d/ns/system.slice/vllm.service", 100+minor/8)
			pr.Files = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", fmt.Sprintf("/dev/nvidia%d", minor)}
		}
		procs = append(procs, pr)
	}
	return fakehost.Machine{
		Nodes:         nodes,
		IOMMU:         true,
		Bridges:       bridges,
		Drivers:       []string{"vfio-pci"},
		NvidiaVersion: "580.95.05",
		Processes:     procs,
		Files:         map[string]string{"/etc/hostname": "synthetic\n", "/proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/md0 amd_iommu=on iommu=pt\n"},
	}
}

// synthTree is the synthetic host laid out in memory, and synthArchive its snapshot
// archive, each made once per process.
var (
	synthTree    = sync.OnceValues(func() (*fakehost.Tree, error) { return synthMachine(synthBridges).Build() })
	synthArchive = sync.OnceValues(func() ([]byte, error) {
		t, err := synthTree()
		if err != nil {
			return nil, err
		}
		return t.Archive()
	})
)

// synthetic is the synthetic host as a directory, written under b.TempDir() once per
// run of a benchmark function, and as a snapshot archive.
type synthetic struct {
	dir     string
	archive []byte
}

func newSynthetic(b *testing.B) synthetic {
	b.Helper()
	t, err := synthTree()
	if err != nil {
		b.Fatal(err)
	}
	s := synthetic{dir: b.TempDir()}
	if err := t.WriteDir(s.dir); err != nil {
		b.Fatal(err)
	}
	if s.archive, err = synthArchive(); err != nil {
		b.Fatal(err)
	}
	h, err := host.Open(s.dir)
	if err != nil {
		b.Fatal(err)
	}
	if err := checkSynthetic(h, synthBridges); err != nil {
		b.Fatal(err)
	}
	return s
}

// checkSynthetic checks the synthetic host of nBridges host bridges has the shape the
// figures are quoted for.
func checkSynthetic(h *host.Host, nBridges int) error {
	functions, gpuCount := nBridges*perBridge, nBridges*gpusPerBridge
	names, err := h.ReadDir(pci.DevicesDir)
	if err != nil {
		return err
	}
	if len(names) != functions {
		return fmt.Errorf("%s lists %d PCI functions, want %d", pci.DevicesDir, len(names), functions)
	}
	tree, err := pci.Scan(h, pciids.Default())
	if err != nil {
		return err
	}
	if len(tree.Warnings) > 0 {
		return fmt.Errorf("scan warnings: %s", strings.Join(tree.Warnings, "; "))
	}
	gpus, err := pci.GPUs(tree, nil)
	if err != nil {
		return err
	}
	if len(tree.Devices) != functions || len(gpus) != gpuCount {
		return fmt.Errorf("scan found %d devices and %d GPUs, want %d and %d", len(tree.Devices), len(gpus), functions, gpuCount)
	}
	return nil
}

// TestWriteSyntheticHost writes the synthetic host to the directory named by
// GPUSPLIT_SYNTHETIC_DIR (which must exist and be empty), for timing other tools on
// the same tree; GPUSPLIT_SYNTHETIC_FUNCTIONS sets its size, a multiple of 256 (4,096,
// the benchmarks' host, by default). Without a directory it is skipped: the benchmarks
// check the host's shape.
func TestWriteSyntheticHost(t *testing.T) {
	dir := os.Getenv("GPUSPLIT_SYNTHETIC_DIR")
	if dir == "" {
		t.Skip("GPUSPLIT_SYNTHETIC_DIR names no directory to write the synthetic host to")
	}
	nBridges := synthBridges
	if s := os.Getenv("GPUSPLIT_SYNTHETIC_FUNCTIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n%perBridge != 0 || n/perBridge > 16*256 {
			t.Fatalf("GPUSPLIT_SYNTHETIC_FUNCTIONS=%s: want a multiple of %d", s, perBridge)
		}
		nBridges = n / perBridge
	}
	tree, err := synthMachine(nBridges).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := tree.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSynthetic(h, nBridges); err != nil {
		t.Fatal(err)
	}
}

// scanMatrix is what "gpusplit topo" does, without the /proc scan: scan the PCI
// devices, pick the GPUs, find the RDMA NICs and the NUMA nodes, build the matrix and
// print it. It returns the number of PCI devices scanned.
func scanMatrix(b *testing.B, h *host.Host) int {
	tree, err := pci.Scan(h, pciids.Default())
	if err != nil {
		b.Fatal(err)
	}
	gpus, err := pci.GPUs(tree, nil)
	if err != nil {
		b.Fatal(err)
	}
	devs := make([]*pci.Device, len(gpus))
	for i, g := range gpus {
		devs[i] = g.Device
	}
	m := topo.Build(devs, topo.NICs(h, tree), topo.NUMANodes(h))
	if err := m.WriteText(io.Discard); err != nil {
		b.Fatal(err)
	}
	return len(tree.Devices)
}

// buildInventory is what "gpusplit inventory" does: scan, GPUs, nvidia minors, /proc.
func buildInventory(b *testing.B, h *host.Host) int {
	inv, err := inventory.Build(h, nil)
	if err != nil {
		b.Fatal(err)
	}
	return len(inv.Tree.Devices)
}

// run times work on a host that open returns, opening a fresh one (with nothing
// cached) each iteration.
func run(b *testing.B, open func() (*host.Host, error), work func(*testing.B, *host.Host) int) {
	pciids.Default() // parsed once per process: not part of any iteration
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		h, err := open()
		if err != nil {
			b.Fatal(err)
		}
		n = work(b, h)
	}
	b.ReportMetric(float64(n), "devices/op")
}

// runReused times work on one host opened before the timing starts, so that its
// resolved directories stay cached from one iteration to the next.
func runReused(b *testing.B, open func() (*host.Host, error), work func(*testing.B, *host.Host) int) {
	pciids.Default()
	h, err := open()
	if err != nil {
		b.Fatal(err)
	}
	work(b, h)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n = work(b, h)
	}
	b.ReportMetric(float64(n), "devices/op")
}

func openDir(dir string) func() (*host.Host, error) {
	return func() (*host.Host, error) { return host.Open(dir) }
}

func openArchive(name string, data []byte) func() (*host.Host, error) {
	return func() (*host.Host, error) { return host.OpenArchive(name, bytes.NewReader(data)) }
}

// sampleDir extracts the sample host's archive under b.TempDir().
func sampleDir(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		b.Fatal(err)
	}
	return dir
}

func BenchmarkScanMatrixSynthetic(b *testing.B) {
	s := newSynthetic(b)
	b.Run("dir", func(b *testing.B) { run(b, openDir(s.dir), scanMatrix) })
	b.Run("archive", func(b *testing.B) { run(b, openArchive("synthetic", s.archive), scanMatrix) })
	b.Run("dir-reused", func(b *testing.B) { runReused(b, openDir(s.dir), scanMatrix) })
	b.Run("archive-reused", func(b *testing.B) { runReused(b, openArchive("synthetic", s.archive), scanMatrix) })
}

func BenchmarkScanMatrixSample(b *testing.B) {
	dir := sampleDir(b)
	b.Run("archive", func(b *testing.B) { run(b, samplehost.Open, scanMatrix) })
	b.Run("dir", func(b *testing.B) { run(b, openDir(dir), scanMatrix) })
	b.Run("archive-reused", func(b *testing.B) { runReused(b, samplehost.Open, scanMatrix) })
}

func BenchmarkInventoryBuild(b *testing.B) {
	s := newSynthetic(b)
	dir := sampleDir(b)
	b.Run("synthetic/dir", func(b *testing.B) { run(b, openDir(s.dir), buildInventory) })
	b.Run("synthetic/archive", func(b *testing.B) { run(b, openArchive("synthetic", s.archive), buildInventory) })
	b.Run("sample/archive", func(b *testing.B) { run(b, samplehost.Open, buildInventory) })
	b.Run("sample/dir", func(b *testing.B) { run(b, openDir(dir), buildInventory) })
}

// BenchmarkOpenArchive times unpacking the snapshot archives alone, the part of the
// archive figures above that precedes any scan.
func BenchmarkOpenArchive(b *testing.B) {
	archive, err := synthArchive()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("synthetic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := host.OpenArchive("synthetic", bytes.NewReader(archive)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sample", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := samplehost.Open(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The scan of each kind of command, from a directory, a fresh host each iteration:
// inventory reads in full only what moves with a GPU (BuildGPUs); topo does that, finds
// the RDMA NICs and prints the matrix; full is what every other command reads (plan,
// apply, nccl-topo, doctor: every device in full, Build).
func BenchmarkCommandScan(b *testing.B) {
	s := newSynthetic(b)
	sample := sampleDir(b)
	commands := []struct {
		name string
		work func(*testing.B, *host.Host) int
	}{
		{"inventory", func(b *testing.B, h *host.Host) int {
			inv, err := inventory.BuildGPUs(h, nil)
			if err != nil {
				b.Fatal(err)
			}
			return len(inv.Tree.Devices)
		}},
		{"topo", func(b *testing.B, h *host.Host) int {
			inv, err := inventory.BuildGPUs(h, nil)
			if err != nil {
				b.Fatal(err)
			}
			m := topo.Build(inv.Devices(), topo.NICs(h, inv.Tree), topo.NUMANodes(h))
			if err := m.WriteText(io.Discard); err != nil {
				b.Fatal(err)
			}
			return len(inv.Tree.Devices)
		}},
		{"full", buildInventory},
	}
	for _, root := range []struct{ name, dir string }{{"sample", sample}, {"synthetic", s.dir}} {
		for _, c := range commands {
			b.Run(root.name+"/"+c.name, func(b *testing.B) { run(b, openDir(root.dir), c.work) })
		}
	}
}
