package pci_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pciids"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

const (
	gen5 = "32.0 GT/s PCIe"
	gen4 = "16.0 GT/s PCIe"
	gen1 = "2.5 GT/s PCIe"
)

var gpuBARs = []fakehost.BAR{
	{Index: 0, Start: 0xf8000000, Size: 64 << 20, Flags: fakehost.Mem32},
	{Index: 1, Start: 0x380000000000, Size: 128 << 30, Flags: fakehost.Mem64Pref},
	{Index: 3, Start: 0x382000000000, Size: 32 << 20, Flags: fakehost.Mem64Pref},
	{Index: 5, Start: 0xf000, Size: 0x80, Flags: fakehost.IOPort},
	{Index: 6, Start: 0xfc000000, Size: 512 << 10, Flags: fakehost.ROM},
}

// server is a two-socket host: two GPUs behind a PCIe switch (one trained down, with a
// BAR the kernel could not place), a dual-port NIC with a VF, a BMC's VGA behind its
// PCI bridge, and an NVMe drive behind an Intel VMD domain.
func server() fakehost.Machine {
	bridge := func(slot, fn uint8, group int, secondary uint8, speed string, children ...fakehost.Device) fakehost.Device {
		return fakehost.Device{
			Slot: slot, Func: fn, Vendor: 0x1022, Device: 0x14ab, Class: 0x060400, Driver: "pcieport",
			Group: group, Speed: speed, Width: 16, Secondary: secondary, Children: children,
		}
	}
	switchPort := func(slot uint8, group int, secondary uint8, children ...fakehost.Device) fakehost.Device {
		return fakehost.Device{
			Slot: slot, Vendor: 0x1000, Device: 0xc030, SubVendor: 0x1000, SubDevice: 0x100b, Class: 0x060400,
			Rev: 0xb0, Driver: "pcieport", Group: group, Speed: gen5, Width: 16, Secondary: secondary, Children: children,
		}
	}
	upstream := switchPort(0, 2, 0x02,
		switchPort(0, 3, 0x03,
			fakehost.Device{
				Slot: 0, Func: 0, Vendor: 0x10de, Device: 0x2bb1, SubVendor: 0x10de, SubDevice: 0x204b,
				Class: 0x030000, Rev: 0xa1, Driver: "nvidia", Group: 4, Speed: gen5, Width: 16, BARs: gpuBARs,
			},
			fakehost.Device{
				Slot: 0, Func: 1, Vendor: 0x10de, Device: 0x22e8, SubVendor: 0x10de, SubDevice: 0x204b,
				Class: 0x040300, Rev: 0xa1, Driver: "snd_hda_intel", Group: 4, Speed: gen5, Width: 16,
				BARs: []fakehost.BAR{{Index: 0, Start: 0xfc080000, Size: 16 << 10, Flags: fakehost.Mem32}},
			},
		),
		switchPort(1, 5, 0x04,
			fakehost.Device{
				Slot: 0, Vendor: 0x10de, Device: 0x2bb1, SubVendor: 0x10de, SubDevice: 0x204b,
				Class: 0x030000, Rev: 0xa1, Driver: "vfio-pci", Group: 6,
				Speed: gen1, Width: 16, MaxSpeed: gen5, MaxWidth: 16,
				BARs: []fakehost.BAR{
					{Index: 0, Start: 0xf4000000, Size: 64 << 20, Flags: fakehost.Mem32},
					{Index: 1, Start: 0, Size: 128 << 30, Flags: fakehost.Mem64Pref | fakehost.Unset},
				},
			},
		),
	)
	upstream.BARs = []fakehost.BAR{{Index: 0, Start: 0xfc400000, Size: 256 << 10, Flags: fakehost.Mem32}}
	return fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-15,32-47"}, {ID: 1, CPUs: "16-31,48-63"}},
		IOMMU: true,
		Bridges: []fakehost.HostBridge{
			{Domain: 0, Bus: 0, NUMA: 0, Devices: []fakehost.Device{
				{Slot: 0, Vendor: 0x1022, Device: 0x14a4, Class: 0x060000, Group: 0},
				bridge(1, 1, 1, 0x01, gen5, upstream),
				{Slot: 0x18, Vendor: 0x1022, Device: 0x14ad, Class: 0x060000, Group: fakehost.NoGroup},
			}},
			{Domain: 0, Bus: 0x80, NUMA: 1, Devices: []fakehost.Device{
				bridge(1, 1, 10, 0x81, gen5,
					fakehost.Device{
						Slot: 0, Func: 0, Vendor: 0x15b3, Device: 0x1021, SubVendor: 0x15b3, SubDevice: 0x0023,
						Class: 0x020000, Driver: "mlx5_core", Group: 11, Speed: gen4, Width: 16, MaxSpeed: gen5,
						BARs: []fakehost.BAR{{Index: 0, Start: 0x3b0000000000, Size: 32 << 20, Flags: fakehost.Mem64Pref}},
					},
					fakehost.Device{
						Slot: 0, Func: 1, Vendor: 0x15b3, Device: 0x1021, SubVendor: 0x15b3, SubDevice: 0x0023,
						Class: 0x020000, Driver: "mlx5_core", Group: 12, Speed: gen4, Width: 16, MaxSpeed: gen5,
					},
					fakehost.Device{
						Slot: 0, Func: 2, Vendor: 0x15b3, Device: 0x101e, Class: 0x020000, Driver: "mlx5_core",
						Group: 13, Speed: "Unknown", Width: 0, MaxSpeed: "Unknown", MaxWidth: 0,
					},
				),
				bridge(3, 1, 14, 0x82, gen1,
					fakehost.Device{
						Slot: 0, Vendor: 0x1a03, Device: 0x1150, Class: 0x060400, Rev: 0x06, Group: 14, Secondary: 0x83,
						Children: []fakehost.Device{{
							Slot: 0, Vendor: 0x1a03, Device: 0x2000, SubVendor: 0x15d9, SubDevice: 0x1c48,
							Class: 0x030000, Rev: 0x52, Driver: "ast", Group: 14,
						}},
					},
				),
			}},
			{Domain: 0x10000, Bus: 0, NUMA: 0, Devices: []fakehost.Device{{
				Slot: 2, Vendor: 0x8086, Device: 0x352a, Class: 0x060400, Driver: "pcieport", Group: 20,
				Speed: gen4, Width: 4, Secondary: 0x01,
				Children: []fakehost.Device{{
					Slot: 0, Vendor: 0x144d, Device: 0xa80a, SubVendor: 0x144d, SubDevice: 0xa812,
					Class: 0x010802, Driver: "nvme", Group: 20, Speed: gen4, Width: 4,
					BARs: []fakehost.BAR{{Index: 0, Start: 0xe0000000, Size: 16 << 10, Flags: fakehost.Mem64}},
				}},
			}}},
		},
		Links: map[string]string{
			"/sys/devices/pci0000:80/0000:80:01.1/0000:81:00.2/physfn":  "../0000:81:00.0",
			"/sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0/virtfn0": "../0000:81:00.2",
		},
	}
}

// serverAddrs is every function of server, in address order.
var serverAddrs = []string{
	"0000:00:00.0", "0000:00:01.1", "0000:00:18.0",
	"0000:01:00.0", "0000:02:00.0", "0000:02:01.0",
	"0000:03:00.0", "0000:03:00.1", "0000:04:00.0",
	"0000:80:01.1", "0000:80:03.1",
	"0000:81:00.0", "0000:81:00.1", "0000:81:00.2",
	"0000:82:00.0", "0000:83:00.0",
	"10000:00:02.0", "10000:01:00.0",
}

const testIDs = "" +
	"10de  NVIDIA Corporation\n" +
	"\t2bb1  GB202GL [RTX PRO 6000 Blackwell Workstation Edition]\n" +
	"\t22e8  GB202 High Definition Audio Controller\n" +
	"1a03  ASPEED Technology, Inc.\n" +
	"C 03  Display controller\n" +
	"\t00  VGA compatible controller\n" +
	"C 04  Multimedia controller\n" +
	"\t03  Audio device\n"

// writeMachine lays m out in a temporary directory and returns its path.
func writeMachine(t *testing.T, m fakehost.Machine) string {
	t.Helper()
	tree, err := m.Build()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := tree.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func scanDir(t *testing.T, dir string) *pci.Tree {
	t.Helper()
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := pci.Scan(h, nil)
	if err != nil {
		t.Fatalf("Scan(%s): %v", dir, err)
	}
	return tree
}

// deviceDir is where the device at addr lives under root, links resolved.
func deviceDir(t *testing.T, root, addr string) string {
	t.Helper()
	p, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", addr))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, p, body string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func lookup(t *testing.T, tree *pci.Tree, addr string) *pci.Device {
	t.Helper()
	a, err := pci.ParseAddress(addr)
	if err != nil {
		t.Fatal(err)
	}
	d := tree.Lookup(a)
	if d == nil {
		t.Fatalf("no device %s; have %v", addr, addrsOf(tree.Devices))
	}
	return d
}

func addrsOf(devs []*pci.Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.Address.String())
	}
	return out
}

func TestScan(t *testing.T) {
	root := writeMachine(t, server())
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	ids := filepath.Join(t.TempDir(), "pci.ids")
	if err := os.WriteFile(ids, []byte(testIDs), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := pciids.Open(ids)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := pci.Scan(h, pciids.Names{db})
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.Warnings) != 0 {
		t.Errorf("Scan of a well-formed tree warned:\n%s", strings.Join(tree.Warnings, "\n"))
	}
	if got := addrsOf(tree.Devices); !slices.Equal(got, serverAddrs) {
		t.Fatalf("Scan found\n %v\nwant\n %v", got, serverAddrs)
	}

	type want struct {
		id, subsys string
		class      uint32
		rev        uint8
		driver     string
		group      int
		numa       int
		cpus       string
		hostBridge string
		parents    []string
		link       string
	}
	node0, node1 := "0-15,32-47", "16-31,48-63"
	sw := []string{"0000:00:01.1", "0000:01:00.0"}
	tests := map[string]want{
		"0000:00:00.0":  {"1022:14a4", "0000:0000", 0x060000, 0, "", 0, 0, node0, "pci0000:00", nil, ""},
		"0000:00:01.1":  {"1022:14ab", "0000:0000", 0x060400, 0, "pcieport", 1, 0, node0, "pci0000:00", nil, "Gen5 x16"},
		"0000:00:18.0":  {"1022:14ad", "0000:0000", 0x060000, 0, "", -1, 0, node0, "pci0000:00", nil, ""},
		"0000:01:00.0":  {"1000:c030", "1000:100b", 0x060400, 0xb0, "pcieport", 2, 0, node0, "pci0000:00", sw[:1], "Gen5 x16"},
		"0000:02:00.0":  {"1000:c030", "1000:100b", 0x060400, 0xb0, "pcieport", 3, 0, node0, "pci0000:00", sw, "Gen5 x16"},
		"0000:02:01.0":  {"1000:c030", "1000:100b", 0x060400, 0xb0, "pcieport", 5, 0, node0, "pci0000:00", sw, "Gen5 x16"},
		"0000:03:00.0":  {"10de:2bb1", "10de:204b", 0x030000, 0xa1, "nvidia", 4, 0, node0, "pci0000:00", append(sw, "0000:02:00.0"), "Gen5 x16"},
		"0000:03:00.1":  {"10de:22e8", "10de:204b", 0x040300, 0xa1, "snd_hda_intel", 4, 0, node0, "pci0000:00", append(sw, "0000:02:00.0"), "Gen5 x16"},
		"0000:04:00.0":  {"10de:2bb1", "10de:204b", 0x030000, 0xa1, "vfio-pci", 6, 0, node0, "pci0000:00", append(sw, "0000:02:01.0"), "Gen1 x16 (max Gen5 x16)"},
		"0000:80:01.1":  {"1022:14ab", "0000:0000", 0x060400, 0, "pcieport", 10, 1, node1, "pci0000:80", nil, "Gen5 x16"},
		"0000:80:03.1":  {"1022:14ab", "0000:0000", 0x060400, 0, "pcieport", 14, 1, node1, "pci0000:80", nil, "Gen1 x16"},
		"0000:81:00.0":  {"15b3:1021", "15b3:0023", 0x020000, 0, "mlx5_core", 11, 1, node1, "pci0000:80", []string{"0000:80:01.1"}, "Gen4 x16 (max Gen5 x16)"},
		"0000:81:00.1":  {"15b3:1021", "15b3:0023", 0x020000, 0, "mlx5_core", 12, 1, node1, "pci0000:80", []string{"0000:80:01.1"}, "Gen4 x16 (max Gen5 x16)"},
		"0000:81:00.2":  {"15b3:101e", "0000:0000", 0x020000, 0, "mlx5_core", 13, 1, node1, "pci0000:80", []string{"0000:80:01.1"}, ""},
		"0000:82:00.0":  {"1a03:1150", "0000:0000", 0x060400, 0x06, "", 14, 1, node1, "pci0000:80", []string{"0000:80:03.1"}, ""},
		"0000:83:00.0":  {"1a03:2000", "15d9:1c48", 0x030000, 0x52, "ast", 14, 1, node1, "pci0000:80", []string{"0000:80:03.1", "0000:82:00.0"}, ""},
		"10000:00:02.0": {"8086:352a", "0000:0000", 0x060400, 0, "pcieport", 20, 0, node0, "pci10000:00", nil, "Gen4 x4"},
		"10000:01:00.0": {"144d:a80a", "144d:a812", 0x010802, 0, "nvme", 20, 0, node0, "pci10000:00", []string{"10000:00:02.0"}, "Gen4 x4"},
	}
	for addr, w := range tests {
		t.Run(addr, func(t *testing.T) {
			d := lookup(t, tree, addr)
			if d.Address.String() != addr {
				t.Errorf("Lookup(%s).Address = %s", addr, d.Address)
			}
			if d.ID() != w.id || d.SubsystemID() != w.subsys || d.Class != w.class || d.Revision != w.rev {
				t.Errorf("identity %s sub %s class %06x rev %02x; want %s sub %s class %06x rev %02x",
					d.ID(), d.SubsystemID(), d.Class, d.Revision, w.id, w.subsys, w.class, w.rev)
			}
			if d.Driver != w.driver {
				t.Errorf("Driver = %q, want %q", d.Driver, w.driver)
			}
			if d.DriverOverride != "" {
				t.Errorf("DriverOverride = %q, want \"\" for (null)", d.DriverOverride)
			}
			if d.IOMMUGroup != w.group {
				t.Errorf("IOMMUGroup = %d, want %d", d.IOMMUGroup, w.group)
			}
			if d.NUMANode != w.numa {
				t.Errorf("NUMANode = %d, want %d", d.NUMANode, w.numa)
			}
			if d.LocalCPUs.String() != w.cpus {
				t.Errorf("LocalCPUs = %q, want %q", d.LocalCPUs, w.cpus)
			}
			if d.HostBridge.String() != w.hostBridge {
				t.Errorf("HostBridge = %s, want %s", d.HostBridge, w.hostBridge)
			}
			var parents []string
			for _, p := range d.Parents {
				parents = append(parents, p.String())
			}
			if !slices.Equal(parents, w.parents) {
				t.Errorf("Parents = %v, want %v", parents, w.parents)
			}
			rp, ok := d.RootPort()
			if ok != (len(w.parents) > 0) || ok && rp.String() != w.parents[0] {
				t.Errorf("RootPort() = %v, %v; want the first of %v", rp, ok, w.parents)
			}
			if got := d.Link.String(); got != w.link {
				t.Errorf("Link = %q (%+v), want %q", got, d.Link, w.link)
			}
			if wantPath := "/" + filepath.ToSlash(strings.TrimPrefix(deviceDir(t, root, addr), realRoot+string(filepath.Separator))); d.Path != wantPath {
				t.Errorf("Path = %q, want %q", d.Path, wantPath)
			}
			if !strings.HasPrefix(d.Path, "/sys/devices/"+w.hostBridge+"/") || !strings.HasSuffix(d.Path, "/"+addr) {
				t.Errorf("Path = %q, want one under %s ending in the address", d.Path, w.hostBridge)
			}
		})
	}

	gpu := lookup(t, tree, "0000:03:00.0")
	if gpu.Link != (pci.Link{Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16, Gen: 5, MaxGen: 5}) {
		t.Errorf("GPU link %+v", gpu.Link)
	}
	wantBARs := []pci.BAR{
		{Index: 0, Start: 0xf8000000, Size: 64 << 20, Flags: 0x40200},
		{Index: 1, Start: 0x380000000000, Size: 128 << 30, Flags: 0x14220c, Is64Bit: true, Prefetchable: true},
		{Index: 3, Start: 0x382000000000, Size: 32 << 20, Flags: 0x14220c, Is64Bit: true, Prefetchable: true},
		{Index: 5, Start: 0xf000, Size: 0x80, Flags: 0x40101, IO: true},
		{Index: 6, Start: 0xfc000000, Size: 512 << 10, Flags: 0x46200, Prefetchable: true},
	}
	if !slices.Equal(gpu.BARs, wantBARs) {
		t.Errorf("GPU BARs:\n got %+v\nwant %+v", gpu.BARs, wantBARs)
	}
	if gpu.VendorName != "NVIDIA Corporation" || gpu.DeviceName != "GB202GL [RTX PRO 6000 Blackwell Workstation Edition]" ||
		gpu.ClassName != "VGA compatible controller" || gpu.Name() != gpu.DeviceName {
		t.Errorf("GPU names %q, %q, %q", gpu.VendorName, gpu.DeviceName, gpu.ClassName)
	}
	if nic := lookup(t, tree, "0000:81:00.0"); nic.VendorName != "" || nic.Name() != "15b3:1021" {
		t.Errorf("NIC unknown to the names: %q, Name() %q", nic.VendorName, nic.Name())
	}
	if bmc := lookup(t, tree, "0000:83:00.0"); bmc.Name() != "ASPEED Technology, Inc. device 2000" {
		t.Errorf("BMC Name() = %q", bmc.Name())
	}
	down := lookup(t, tree, "0000:04:00.0")
	wantDown := []pci.BAR{
		{Index: 0, Start: 0xf4000000, Size: 64 << 20, Flags: 0x40200},
		{Index: 1, Start: 0, Size: 128 << 30, Flags: 0x14220c | 0x20000000, Is64Bit: true, Prefetchable: true, Unassigned: true},
	}
	if !slices.Equal(down.BARs, wantDown) {
		t.Errorf("BARs of the GPU with an unassigned BAR:\n got %+v\nwant %+v", down.BARs, wantDown)
	}
	if down.Link.Gen != 1 || down.Link.MaxGen != 5 || down.Link.Speed != gen1 || down.Link.MaxSpeed != gen5 {
		t.Errorf("trained-down link %+v", down.Link)
	}
	if up := lookup(t, tree, "0000:01:00.0"); !up.IsBridge() || len(up.BARs) != 1 || up.BARs[0].Size != 256<<10 {
		t.Errorf("switch upstream port: bridge %v, BARs %+v", up.IsBridge(), up.BARs)
	}
	if root := lookup(t, tree, "0000:00:00.0"); root.BARs != nil || root.Link != (pci.Link{}) {
		t.Errorf("host bridge function: BARs %+v, link %+v; want none", root.BARs, root.Link)
	}

	// SR-IOV: the VF names its PF; the PF and the other functions name none.
	vf := lookup(t, tree, "0000:81:00.2")
	if vf.PhysFn == nil || vf.PhysFn.String() != "0000:81:00.0" {
		t.Errorf("VF PhysFn = %v, want 0000:81:00.0", vf.PhysFn)
	}
	if vf.Link != (pci.Link{}) {
		t.Errorf("VF link %+v, want none (Unknown)", vf.Link)
	}
	for _, d := range tree.Devices {
		if d.PhysFn != nil && d != vf {
			t.Errorf("%s has PhysFn %v", d.Address, d.PhysFn)
		}
	}

	// IOMMU groups and slots.
	for g, want := range map[int][]string{
		4:  {"0000:03:00.0", "0000:03:00.1"},
		6:  {"0000:04:00.0"},
		14: {"0000:80:03.1", "0000:82:00.0", "0000:83:00.0"},
		20: {"10000:00:02.0", "10000:01:00.0"},
		7:  nil,
		-1: nil,
	} {
		if got := addrsOf(tree.Group(g)); !slices.Equal(got, want) {
			t.Errorf("Group(%d) = %v, want %v", g, got, want)
		}
	}
	for a, want := range map[string][]string{
		"0000:03:00.0": {"0000:03:00.0", "0000:03:00.1"},
		"0000:03:00.1": {"0000:03:00.0", "0000:03:00.1"},
		"0000:81:00.2": {"0000:81:00.0", "0000:81:00.1", "0000:81:00.2"},
		"0000:04:00.0": {"0000:04:00.0"},
		"0000:05:00.0": nil,
	} {
		addr, _ := pci.ParseAddress(a)
		if got := addrsOf(tree.Slot(addr)); !slices.Equal(got, want) {
			t.Errorf("Slot(%s) = %v, want %v", a, got, want)
		}
	}

	// The default GPUs: the two NVIDIA GPUs, the first with its audio; not the BMC.
	gpus, err := pci.GPUs(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range gpus {
		s := g.Address.String()
		for _, f := range g.Functions {
			s += "+" + f.Address.String()
		}
		got = append(got, s)
	}
	if want := []string{"0000:03:00.0+0000:03:00.1", "0000:04:00.0"}; !slices.Equal(got, want) {
		t.Errorf("GPUs = %v, want %v", got, want)
	}
}

// A QEMU i440fx guest: everything on the root bus, no NUMA information, no IOMMU.
func TestScanRootBus(t *testing.T) {
	m := fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-7"}},
		Bridges: []fakehost.HostBridge{{Domain: 0, Bus: 0, NUMA: -1, Devices: []fakehost.Device{
			{Slot: 0, Vendor: 0x8086, Device: 0x1237, Class: 0x060000, Rev: 0x02},
			{Slot: 1, Vendor: 0x8086, Device: 0x7000, Class: 0x060100},
			{Slot: 2, Vendor: 0x1234, Device: 0x1111, Class: 0x030000, Rev: 0x02, Driver: "bochs-drm"},
			{Slot: 0x10, Vendor: 0x10de, Device: 0x2bb1, SubVendor: 0x10de, SubDevice: 0x204b, Class: 0x030000,
				Rev: 0xa1, Driver: "nvidia", BARs: gpuBARs},
			{Slot: 0x10, Func: 1, Vendor: 0x10de, Device: 0x22e8, Class: 0x040300, Rev: 0xa1, Driver: "snd_hda_intel"},
		}}},
	}
	tree := scanDir(t, writeMachine(t, m))
	if len(tree.Warnings) != 0 {
		t.Errorf("warnings:\n%s", strings.Join(tree.Warnings, "\n"))
	}
	want := []string{"0000:00:00.0", "0000:00:01.0", "0000:00:02.0", "0000:00:10.0", "0000:00:10.1"}
	if got := addrsOf(tree.Devices); !slices.Equal(got, want) {
		t.Fatalf("devices %v, want %v", got, want)
	}
	for _, d := range tree.Devices {
		if d.Parents != nil {
			t.Errorf("%s: Parents = %v, want none on the root bus", d.Address, d.Parents)
		}
		if _, ok := d.RootPort(); ok {
			t.Errorf("%s: has a root port", d.Address)
		}
		if d.HostBridge != (pci.HostBridge{}) {
			t.Errorf("%s: HostBridge = %s, want pci0000:00", d.Address, d.HostBridge)
		}
		if d.NUMANode != -1 || d.IOMMUGroup != -1 {
			t.Errorf("%s: NUMA %d, group %d; want -1, -1", d.Address, d.NUMANode, d.IOMMUGroup)
		}
		if d.LocalCPUs.String() != "0-7" {
			t.Errorf("%s: LocalCPUs = %s, want 0-7", d.Address, d.LocalCPUs)
		}
		if d.Link != (pci.Link{}) {
			t.Errorf("%s: Link = %+v, want none", d.Address, d.Link)
		}
	}
	gpus, err := pci.GPUs(tree, nil)
	if err != nil || len(gpus) != 1 || gpus[0].Address.String() != "0000:00:10.0" ||
		len(gpus[0].Functions) != 1 || gpus[0].Functions[0].Address.String() != "0000:00:10.1" {
		t.Errorf("GPUs = %+v, %v; want 0000:00:10.0 with its audio", gpus, err)
	}
	// count:N on a host without NUMA information.
	sels, _ := pci.ParseSelectors("count:2")
	picked, err := pci.Select(tree.Devices, sels, "PCI device")
	if err != nil || !slices.Equal(addrsOf(picked), want[:2]) {
		t.Errorf("Select(count:2) = %v, %v", addrsOf(picked), err)
	}
}

// hasWarning reports whether one warning contains every part.
func hasWarning(tree *pci.Tree, parts ...string) bool {
	for _, w := range tree.Warnings {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(w, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// moveDir moves the directory from (relative to root) to to, and rewrites every link of the
// tree that lives in it or points into it, so that the tree reads as if it had been laid
// out there.
func moveDir(t *testing.T, root, from, to string) {
	t.Helper()
	from, to = filepath.Join(root, from), filepath.Join(root, to)
	type link struct{ at, target string } // absolute, after the move
	var links []link
	moved := func(p string) string {
		if p == from || strings.HasPrefix(p, from+string(filepath.Separator)) {
			return to + strings.TrimPrefix(p, from)
		}
		return p
	}
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.Type()&os.ModeSymlink == 0 {
			return err
		}
		tgt, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if !filepath.IsAbs(tgt) {
			tgt = filepath.Join(filepath.Dir(p), tgt)
		}
		if moved(p) != p || moved(tgt) != tgt {
			links = append(links, link{moved(p), moved(tgt)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		rel, err := filepath.Rel(filepath.Dir(l.at), l.target)
		if err != nil {
			t.Fatal(err)
		}
		symlink(t, rel, l.at)
	}
}

// moveDevice moves the directory of the device at addr into newParent (relative to root).
func moveDevice(t *testing.T, root, addr, newParent string) {
	t.Helper()
	rel, err := filepath.Rel(root, deviceDir(t, root, addr))
	if err != nil {
		t.Fatal(err)
	}
	moveDir(t, root, rel, filepath.Join(newParent, addr))
}

// Behind an Intel VMD controller the kernel nests a host bridge of its own, in a domain of
// 5 hex digits, inside the VMD device's directory: the innermost host bridge counts.
func TestScanVMD(t *testing.T) {
	m := server()
	m.Bridges[0].Devices = append(m.Bridges[0].Devices, fakehost.Device{
		Slot: 0x0e, Vendor: 0x8086, Device: 0x467f, Class: 0x010400, Driver: "vmd", Group: 21,
	})
	root := writeMachine(t, m)
	moveDir(t, root, "sys/devices/pci10000:00", "sys/devices/pci0000:00/0000:00:0e.0/pci10000:00")
	tree := scanDir(t, root)
	if len(tree.Warnings) != 0 {
		t.Errorf("warnings:\n%s", strings.Join(tree.Warnings, "\n"))
	}
	nvme := lookup(t, tree, "10000:01:00.0")
	if nvme.HostBridge.String() != "pci10000:00" || len(nvme.Parents) != 1 || nvme.Parents[0].String() != "10000:00:02.0" {
		t.Errorf("NVMe behind VMD: HostBridge %s, Parents %v; want pci10000:00, [10000:00:02.0]", nvme.HostBridge, nvme.Parents)
	}
	if nvme.Path != "/sys/devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/10000:01:00.0" {
		t.Errorf("Path = %s", nvme.Path)
	}
	if nvme.Driver != "nvme" || nvme.IOMMUGroup != 20 || nvme.Link.String() != "Gen4 x4" {
		t.Errorf("NVMe behind VMD read as %+v", nvme)
	}
	if rp := lookup(t, tree, "10000:00:02.0"); rp.HostBridge.String() != "pci10000:00" || rp.Parents != nil {
		t.Errorf("VMD root port: HostBridge %s, Parents %v", rp.HostBridge, rp.Parents)
	}
	want := append(slices.Clone(serverAddrs[:2]), "0000:00:0e.0")
	want = append(want, serverAddrs[2:]...)
	if got := addrsOf(tree.Devices); !slices.Equal(got, want) {
		t.Errorf("devices %v, want %v", got, want)
	}
}

func TestScanBadInput(t *testing.T) {
	const gpu = "0000:03:00.0"
	tests := []struct {
		name   string
		mutate func(t *testing.T, root, dev string)
		check  func(t *testing.T, tree *pci.Tree)
		// quiet: no warning at all is expected.
		quiet bool
	}{
		{
			name:   "numa_node holds garbage",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/numa_node", "garbage\n") },
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.NUMANode != -1 || d.LocalCPUs.String() != "0-15,32-47" {
					t.Errorf("NUMANode = %d, LocalCPUs %s; want -1 and the CPUs still read", d.NUMANode, d.LocalCPUs)
				}
				if !hasWarning(tree, gpu, "numa_node", "garbage") {
					t.Errorf("no warning naming %s, numa_node and its content", gpu)
				}
			},
		},
		{
			name:   "numa_node below -1",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/numa_node", "-2\n") },
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.NUMANode != -1 {
					t.Errorf("NUMANode = %d, want -1", d.NUMANode)
				}
				if !hasWarning(tree, gpu, "numa_node", `"-2"`) {
					t.Errorf("no warning naming %s and numa_node", gpu)
				}
			},
		},
		{
			name:   "numa_node missing",
			mutate: func(t *testing.T, root, dev string) { remove(t, dev+"/numa_node") },
			quiet:  true,
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.NUMANode != -1 {
					t.Errorf("NUMANode = %d, want -1", d.NUMANode)
				}
			},
		},
		{
			name: "resource truncated in the middle of a line",
			mutate: func(t *testing.T, root, dev string) {
				b, err := os.ReadFile(dev + "/resource")
				if err != nil {
					t.Fatal(err)
				}
				// Three whole lines (BAR0, BAR1 and its upper half), then half of BAR3's line.
				lines := strings.SplitAfter(string(b), "\n")
				writeFile(t, dev+"/resource", strings.Join(lines[:3], "")+lines[3][:25])
			},
			check: func(t *testing.T, tree *pci.Tree) {
				d := lookup(t, tree, gpu)
				want := []pci.BAR{
					{Index: 0, Start: 0xf8000000, Size: 64 << 20, Flags: 0x40200},
					{Index: 1, Start: 0x380000000000, Size: 128 << 30, Flags: 0x14220c, Is64Bit: true, Prefetchable: true},
				}
				if !slices.Equal(d.BARs, want) {
					t.Errorf("BARs = %+v, want %+v", d.BARs, want)
				}
				if !hasWarning(tree, gpu, "resource line 4") {
					t.Errorf("no warning naming %s and line 4 of resource", gpu)
				}
			},
		},
		{
			name:   "resource missing",
			mutate: func(t *testing.T, root, dev string) { remove(t, dev+"/resource") },
			quiet:  true,
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.BARs != nil {
					t.Errorf("BARs = %+v, want none", d.BARs)
				}
			},
		},
		{
			// With uevent, modalias and config the vendor is read from uevent
			// (TestScanIdentityFallbacks); without them the device means nothing.
			name: "vendor missing, and every other file of the ids",
			mutate: func(t *testing.T, root, dev string) {
				for _, f := range []string{"vendor", "uevent", "modalias", "config"} {
					remove(t, dev+"/"+f)
				}
			},
			check: func(t *testing.T, tree *pci.Tree) {
				checkLeftOut(t, tree, gpu, "no vendor file", "uevent is missing", "modalias is missing", "config is missing")
			},
		},
		{
			name:   "device holds garbage",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/device", "0xzzzz\n") },
			check: func(t *testing.T, tree *pci.Tree) {
				checkLeftOut(t, tree, gpu, "device", "0xzzzz")
			},
		},
		{
			name:   "class holds garbage",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/class", "garbage\n") },
			check: func(t *testing.T, tree *pci.Tree) {
				checkLeftOut(t, tree, gpu, "class", "garbage")
			},
		},
		{
			name:   "class too wide",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/class", "0x1030000\n") },
			check: func(t *testing.T, tree *pci.Tree) {
				checkLeftOut(t, tree, gpu, "class", "0x1030000")
			},
		},
		{
			name:   "vendor without 0x",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/vendor", "10de\n") },
			check: func(t *testing.T, tree *pci.Tree) {
				checkLeftOut(t, tree, gpu, "vendor", "10de")
			},
		},
		{
			name:   "vendor empty",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/vendor", "") },
			check: func(t *testing.T, tree *pci.Tree) {
				checkLeftOut(t, tree, gpu, "vendor")
			},
		},
		{
			name:   "revision holds garbage",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/revision", "0xa1a1\n") },
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.Revision != 0 || d.VendorID != 0x10de {
					t.Errorf("Revision = %02x, vendor %04x; want 00, 10de", d.Revision, d.VendorID)
				}
				if !hasWarning(tree, gpu, "revision", "0xa1a1") {
					t.Errorf("no warning naming %s and revision", gpu)
				}
			},
		},
		{
			name: "iommu_group points at a non-numeric name",
			mutate: func(t *testing.T, root, dev string) {
				g := filepath.Join(root, "sys/kernel/iommu_groups/abc")
				if err := os.MkdirAll(g, 0o755); err != nil {
					t.Fatal(err)
				}
				rel, err := filepath.Rel(dev, g)
				if err != nil {
					t.Fatal(err)
				}
				symlink(t, rel, dev+"/iommu_group")
			},
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.IOMMUGroup != -1 {
					t.Errorf("IOMMUGroup = %d, want -1", d.IOMMUGroup)
				}
				if !hasWarning(tree, gpu, "iommu_group", `"abc"`) {
					t.Errorf("no warning naming %s, iommu_group and abc", gpu)
				}
				if got := addrsOf(tree.Group(4)); !slices.Equal(got, []string{"0000:03:00.1"}) {
					t.Errorf("Group(4) = %v, want the audio function alone", got)
				}
			},
		},
		{
			name: "iommu_group points at a negative number",
			mutate: func(t *testing.T, root, dev string) {
				g := filepath.Join(root, "sys/kernel/iommu_groups/-4")
				if err := os.MkdirAll(g, 0o755); err != nil {
					t.Fatal(err)
				}
				rel, _ := filepath.Rel(dev, g)
				symlink(t, rel, dev+"/iommu_group")
			},
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.IOMMUGroup != -1 {
					t.Errorf("IOMMUGroup = %d, want -1", d.IOMMUGroup)
				}
				if !hasWarning(tree, gpu, "iommu_group", `"-4"`) {
					t.Errorf("no warning naming %s and iommu_group", gpu)
				}
			},
		},
		{
			name: "iommu_group link escapes the root",
			mutate: func(t *testing.T, root, dev string) {
				symlink(t, "../../../../../../../../../../etc", dev+"/iommu_group")
			},
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.IOMMUGroup != -1 {
					t.Errorf("IOMMUGroup = %d, want -1", d.IOMMUGroup)
				}
				if !hasWarning(tree, gpu, host.ErrEscapesRoot.Error()) {
					t.Errorf("no warning naming %s and the escape", gpu)
				}
			},
		},
		{
			name:   "driver_override set",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/driver_override", "vfio-pci\n") },
			quiet:  true,
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.DriverOverride != "vfio-pci" || d.Driver != "nvidia" {
					t.Errorf("Driver %q, DriverOverride %q; want nvidia, vfio-pci", d.Driver, d.DriverOverride)
				}
			},
		},
		{
			name:   "no driver",
			mutate: func(t *testing.T, root, dev string) { remove(t, dev+"/driver") },
			quiet:  true,
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.Driver != "" {
					t.Errorf("Driver %q, want none", d.Driver)
				}
			},
		},
		{
			name: "entries of /sys/bus/pci/devices that are not addresses",
			mutate: func(t *testing.T, root, dev string) {
				devices := filepath.Join(root, "sys/bus/pci/devices")
				writeFile(t, devices+"/garbage", "")
				symlink(t, "../../../devices/pci0000:00/0000:00:00.0", devices+"/0000:00:00.0.bak")
				symlink(t, "../../../devices/pci0000:00/0000:00:00.0", devices+"/0000:E1:00.0")
				symlink(t, "../../../devices/pci0000:00/0000:00:00.0", devices+"/00:00.0")
			},
			check: func(t *testing.T, tree *pci.Tree) {
				if got := addrsOf(tree.Devices); !slices.Equal(got, serverAddrs) {
					t.Errorf("devices %v, want %v", got, serverAddrs)
				}
				// One warning for all, however many there are.
				want := "/sys/bus/pci/devices: 4 entries are not PCI addresses (0000:00:00.0.bak, 0000:E1:00.0, 00:00.0 and 1 more); skipped"
				if len(tree.Warnings) != 1 || tree.Warnings[0] != want {
					t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(tree.Warnings, "\n"), want)
				}
			},
		},
		{
			name: "garbage in the attributes of every device",
			mutate: func(t *testing.T, root, _ string) {
				for _, a := range serverAddrs {
					dev := deviceDir(t, root, a)
					for _, f := range []string{"subsystem_vendor", "subsystem_device", "revision", "local_cpulist", "current_link_speed", "max_link_speed", "resource"} {
						writeFile(t, dev+"/"+f, "garbage\n")
					}
				}
			},
			check: func(t *testing.T, tree *pci.Tree) {
				// 7 for each of 18 devices: 126, of which 100 are kept and the rest counted.
				if len(tree.Warnings) != 101 || tree.Warnings[100] != "… and 26 more warnings" {
					t.Errorf("%d warnings, the last %q; want 100 and a count of 26 more", len(tree.Warnings), tree.Warnings[len(tree.Warnings)-1])
				}
				// The first 100 in address order, 7 for each device.
				for i, w := range tree.Warnings[:min(100, len(tree.Warnings))] {
					if want := serverAddrs[i/7] + ": "; !strings.HasPrefix(w, want) {
						t.Errorf("warning %d is %q, want one of %s", i, w, want)
						break
					}
				}
				if got := addrsOf(tree.Devices); !slices.Equal(got, serverAddrs) {
					t.Errorf("devices %v, want %v", got, serverAddrs)
				}
			},
		},
		{
			name: "a /sys/bus/pci/devices link escapes the root",
			mutate: func(t *testing.T, root, dev string) {
				symlink(t, "../../../../../../etc", filepath.Join(root, "sys/bus/pci/devices/0000:99:00.0"))
			},
			check: func(t *testing.T, tree *pci.Tree) {
				if got := addrsOf(tree.Devices); !slices.Equal(got, serverAddrs) {
					t.Errorf("devices %v, want %v", got, serverAddrs)
				}
				if !hasWarning(tree, "0000:99:00.0", host.ErrEscapesRoot.Error(), "../../../../../../etc", "skipped") {
					t.Errorf("no warning naming 0000:99:00.0 and the escape:\n%s", strings.Join(tree.Warnings, "\n"))
				}
			},
		},
		{
			name: "a /sys/bus/pci/devices link with an absolute target stays inside the root",
			mutate: func(t *testing.T, root, dev string) {
				abs := strings.TrimPrefix(dev, root)
				symlink(t, abs, filepath.Join(root, "sys/bus/pci/devices/0000:03:00.0"))
			},
			quiet: true,
			check: func(t *testing.T, tree *pci.Tree) {
				d := lookup(t, tree, gpu)
				if d.Driver != "nvidia" || len(d.Parents) != 3 {
					t.Errorf("device read through an absolute link: driver %q, parents %v", d.Driver, d.Parents)
				}
			},
		},
		{
			name: "a dangling /sys/bus/pci/devices link",
			mutate: func(t *testing.T, root, dev string) {
				symlink(t, "../../../devices/pci0000:00/0000:00:05.0", filepath.Join(root, "sys/bus/pci/devices/0000:00:05.0"))
			},
			check: func(t *testing.T, tree *pci.Tree) {
				if got := addrsOf(tree.Devices); !slices.Equal(got, serverAddrs) {
					t.Errorf("devices %v, want %v", got, serverAddrs)
				}
				if !hasWarning(tree, "0000:00:05.0", "skipped") {
					t.Errorf("no warning naming 0000:00:05.0")
				}
			},
		},
		{
			name:   "local_cpulist holds garbage",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/local_cpulist", "0-abc\n") },
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.LocalCPUs.Len() != 0 || d.NUMANode != 0 {
					t.Errorf("LocalCPUs = %q, NUMA %d; want empty, 0", d.LocalCPUs, d.NUMANode)
				}
				if !hasWarning(tree, gpu, "local_cpulist", "0-abc") {
					t.Errorf("no warning naming %s and local_cpulist", gpu)
				}
			},
		},
		{
			name: "local_cpulist and local_cpus missing",
			mutate: func(t *testing.T, root, dev string) {
				remove(t, dev+"/local_cpulist")
				remove(t, dev+"/local_cpus")
			},
			quiet: true,
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.LocalCPUs.Len() != 0 {
					t.Errorf("LocalCPUs = %q, want empty", d.LocalCPUs)
				}
			},
		},
		{
			name:   "local_cpulist missing: the mask in local_cpus is read",
			mutate: func(t *testing.T, root, dev string) { remove(t, dev+"/local_cpulist") },
			quiet:  true,
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.LocalCPUs.String() != "0-15,32-47" {
					t.Errorf("LocalCPUs = %q, want 0-15,32-47 from local_cpus", d.LocalCPUs)
				}
			},
		},
		{
			name: "local_cpulist missing, local_cpus holds garbage",
			mutate: func(t *testing.T, root, dev string) {
				remove(t, dev+"/local_cpulist")
				writeFile(t, dev+"/local_cpus", "0000,ffffffff,zz\n")
			},
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.LocalCPUs.Len() != 0 {
					t.Errorf("LocalCPUs = %q, want empty", d.LocalCPUs)
				}
				if !hasWarning(tree, gpu, "local_cpus", "zz", "CPU affinity taken as unknown") {
					t.Errorf("no warning naming %s and local_cpus:\n%s", gpu, strings.Join(tree.Warnings, "\n"))
				}
			},
		},
		{
			// A mask is read only where the list is missing, not in place of a bad one.
			name:   "local_cpulist holds garbage, local_cpus is fine",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/local_cpulist", "0-x\n") },
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.LocalCPUs.Len() != 0 {
					t.Errorf("LocalCPUs = %q, want empty", d.LocalCPUs)
				}
				if !hasWarning(tree, gpu, "local_cpulist", "0-x") {
					t.Errorf("no warning naming %s and local_cpulist", gpu)
				}
			},
		},
		{
			name: "current_link_speed Unknown",
			mutate: func(t *testing.T, root, dev string) {
				writeFile(t, dev+"/current_link_speed", "Unknown\n")
				writeFile(t, dev+"/current_link_width", "0\n")
			},
			quiet: true,
			check: func(t *testing.T, tree *pci.Tree) {
				d := lookup(t, tree, gpu)
				want := pci.Link{MaxSpeed: gen5, MaxWidth: 16, MaxGen: 5}
				if d.Link != want {
					t.Errorf("Link = %+v, want %+v", d.Link, want)
				}
				if s := d.Link.String(); s != "down (max Gen5 x16)" {
					t.Errorf("Link.String() = %q", s)
				}
			},
		},
		{
			name:   "current_link_speed Unknown speed (before 5.7)",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/current_link_speed", "Unknown speed\n") },
			quiet:  true,
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.Link.Speed != "" || d.Link.Gen != 0 || d.Link.Width != 16 {
					t.Errorf("Link = %+v", d.Link)
				}
			},
		},
		{
			name:   "link speed before 5.7",
			mutate: func(t *testing.T, root, dev string) { writeFile(t, dev+"/max_link_speed", "16 GT/s\n") },
			quiet:  true,
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.Link.MaxSpeed != "16 GT/s" || d.Link.MaxGen != 4 || d.Link.Gen != 5 {
					t.Errorf("Link = %+v", d.Link)
				}
			},
		},
		{
			name: "link speed and width hold garbage",
			mutate: func(t *testing.T, root, dev string) {
				writeFile(t, dev+"/current_link_speed", "fast\n")
				writeFile(t, dev+"/max_link_width", "x16\n")
			},
			check: func(t *testing.T, tree *pci.Tree) {
				d := lookup(t, tree, gpu)
				if d.Link.Speed != "" || d.Link.Gen != 0 || d.Link.MaxWidth != 0 || d.Link.MaxGen != 5 || d.Link.Width != 16 {
					t.Errorf("Link = %+v", d.Link)
				}
				if !hasWarning(tree, gpu, "current_link_speed", "fast") || !hasWarning(tree, gpu, "max_link_width", "x16") {
					t.Errorf("no warnings naming the link files:\n%s", strings.Join(tree.Warnings, "\n"))
				}
			},
		},
		{
			name: "a non-address component between the host bridge and the device",
			mutate: func(t *testing.T, root, dev string) {
				moveDevice(t, root, gpu, "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/extra")
			},
			check: func(t *testing.T, tree *pci.Tree) {
				d := lookup(t, tree, gpu)
				if d.HostBridge.String() != "pci0000:00" || d.Parents != nil {
					t.Errorf("HostBridge %s, Parents %v; want pci0000:00 and none", d.HostBridge, d.Parents)
				}
				if d.Driver != "nvidia" || d.IOMMUGroup != 4 || d.VendorID != 0x10de {
					t.Errorf("the moved device lost its attributes: %+v", d)
				}
				if !hasWarning(tree, gpu, `"extra"`, "placed directly under host bridge pci0000:00") {
					t.Errorf("no warning naming %s and the odd component:\n%s", gpu, strings.Join(tree.Warnings, "\n"))
				}
			},
		},
		{
			name: "a device path without a host bridge",
			mutate: func(t *testing.T, root, dev string) {
				moveDevice(t, root, gpu, "sys/devices/platform/soc")
			},
			check: func(t *testing.T, tree *pci.Tree) {
				d := lookup(t, tree, gpu)
				if d.HostBridge.String() != "pci0000:03" || d.Parents != nil {
					t.Errorf("HostBridge %s, Parents %v; want the device's own domain and bus, no parents", d.HostBridge, d.Parents)
				}
				if !hasWarning(tree, gpu, "no host bridge") {
					t.Errorf("no warning naming %s and the missing host bridge:\n%s", gpu, strings.Join(tree.Warnings, "\n"))
				}
			},
		},
		{
			name: "a /sys/bus/pci/devices link to a directory of another name",
			mutate: func(t *testing.T, root, dev string) {
				symlink(t, "../../../devices/pci0000:00/0000:00:00.0", filepath.Join(root, "sys/bus/pci/devices/0000:00:07.0"))
			},
			check: func(t *testing.T, tree *pci.Tree) {
				d := lookup(t, tree, "0000:00:07.0")
				if d.HostBridge.String() != "pci0000:00" || d.Parents != nil {
					t.Errorf("HostBridge %s, Parents %v", d.HostBridge, d.Parents)
				}
				if !hasWarning(tree, "0000:00:07.0", "does not end in the device's address") {
					t.Errorf("no warning:\n%s", strings.Join(tree.Warnings, "\n"))
				}
			},
		},
		{
			name: "a device file that is a directory",
			mutate: func(t *testing.T, root, dev string) {
				remove(t, dev+"/numa_node")
				if err := os.Mkdir(dev+"/numa_node", 0o755); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, tree *pci.Tree) {
				if d := lookup(t, tree, gpu); d.NUMANode != -1 {
					t.Errorf("NUMANode = %d, want -1", d.NUMANode)
				}
				if !hasWarning(tree, gpu, "numa_node") {
					t.Errorf("no warning naming %s and numa_node", gpu)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := writeMachine(t, server())
			tt.mutate(t, root, deviceDir(t, root, gpu))
			tree := scanDir(t, root)
			tt.check(t, tree)
			if tt.quiet && len(tree.Warnings) != 0 {
				t.Errorf("warnings:\n%s", strings.Join(tree.Warnings, "\n"))
			}
			// Whatever was broken, the other devices read as before.
			for _, d := range tree.Devices {
				if d.Address.String() == gpu || d.Address.String() == "0000:00:07.0" {
					continue
				}
				if d.VendorID == 0 || d.NUMANode < 0 {
					t.Errorf("%s read as %+v", d.Address, d)
				}
			}
		})
	}
}

// checkLeftOut checks that the device at addr is left out of the tree, with a warning
// naming it and each part, and that every other device is there.
func checkLeftOut(t *testing.T, tree *pci.Tree, addr string, parts ...string) {
	t.Helper()
	a, _ := pci.ParseAddress(addr)
	if d := tree.Lookup(a); d != nil {
		t.Errorf("%s is in the tree: %+v", addr, d)
	}
	want := slices.DeleteFunc(slices.Clone(serverAddrs), func(s string) bool { return s == addr })
	if got := addrsOf(tree.Devices); !slices.Equal(got, want) {
		t.Errorf("devices %v, want %v", got, want)
	}
	if !hasWarning(tree, append([]string{addr + ":", "skipped"}, parts...)...) {
		t.Errorf("no warning naming %s and %q:\n%s", addr, parts, strings.Join(tree.Warnings, "\n"))
	}
	// The slot's other function no longer has the left-out one as a companion.
	if len(tree.Slot(a)) != 1 {
		t.Errorf("Slot(%s) = %v", addr, addrsOf(tree.Slot(a)))
	}
}

func TestScanWithoutDevicesDir(t *testing.T) {
	tests := map[string]func(t *testing.T, root string){
		"empty root": func(t *testing.T, root string) {},
		"no devices directory": func(t *testing.T, root string) {
			if err := os.MkdirAll(filepath.Join(root, "sys/bus/pci/drivers"), 0o755); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, setup := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			setup(t, root)
			h, err := host.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			tree, err := pci.Scan(h, nil)
			if err == nil {
				t.Fatalf("Scan of %s = %d devices, want an error", root, len(tree.Devices))
			}
			for _, part := range []string{root, pci.DevicesDir, "missing"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("Scan error %q does not say %q", err, part)
				}
			}
		})
	}

	t.Run("devices is a file", func(t *testing.T) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "sys/bus/pci"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, "sys/bus/pci/devices"), "")
		h, err := host.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pci.Scan(h, nil); err == nil || !strings.Contains(err.Error(), pci.DevicesDir) {
			t.Errorf("Scan error %v; want one naming %s", err, pci.DevicesDir)
		}
	})

	t.Run("devices escapes the root", func(t *testing.T) {
		root := t.TempDir()
		symlink(t, "../../../../etc", filepath.Join(root, "sys/bus/pci/devices"))
		h, err := host.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pci.Scan(h, nil)
		if err == nil || !errors.Is(err, host.ErrEscapesRoot) {
			t.Errorf("Scan error %v; want %v", err, host.ErrEscapesRoot)
		}
	})

	t.Run("no devices", func(t *testing.T) {
		root := writeMachine(t, fakehost.Machine{Nodes: []fakehost.Node{{ID: 0, CPUs: "0-3"}}})
		tree := scanDir(t, root)
		if len(tree.Devices) != 0 || len(tree.Warnings) != 0 {
			t.Errorf("Scan of a host without PCI devices: %v, %v", addrsOf(tree.Devices), tree.Warnings)
		}
		gpus, err := pci.GPUs(tree, nil)
		if err != nil || len(gpus) != 0 {
			t.Errorf("GPUs = %v, %v", gpus, err)
		}
	})
}

// render prints every field of every device, and the warnings with the root replaced.
func render(tree *pci.Tree, root string) string {
	var b strings.Builder
	for _, d := range tree.Devices {
		physfn := "-"
		if d.PhysFn != nil {
			physfn = d.PhysFn.String()
		}
		fmt.Fprintf(&b, "%s %s sub %s class %06x rev %02x driver %q override %q group %d numa %d cpus %s "+
			"link %+v bars %+v hb %s parents %v physfn %s path %s names %q %q %q\n",
			d.Address, d.ID(), d.SubsystemID(), d.Class, d.Revision, d.Driver, d.DriverOverride, d.IOMMUGroup,
			d.NUMANode, d.LocalCPUs, d.Link, d.BARs, d.HostBridge, d.Parents, physfn, d.Path,
			d.VendorName, d.DeviceName, d.ClassName)
	}
	for _, w := range tree.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", strings.ReplaceAll(w, root, "ROOT"))
	}
	return b.String()
}

func TestScanArchiveMatchesDirectory(t *testing.T) {
	broken := server()
	gpuDir := "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0"
	broken.Files = map[string]string{
		gpuDir + "/numa_node":     "garbage\n",
		gpuDir + "/local_cpulist": "1-x\n",
		gpuDir + "/resource":      "0x00000000f8000000 0x00000000fbffffff 0x0000000000040200\n0x00000",
		"/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.1/class": "bad\n",
		"/sys/bus/pci/devices/not-an-address":                                               "",
	}
	broken.Links["/sys/bus/pci/devices/0000:99:00.0"] = "../../../../../../etc"
	for name, m := range map[string]fakehost.Machine{"well-formed": server(), "with bad input": broken} {
		t.Run(name, func(t *testing.T) {
			ft, err := m.Build()
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := ft.WriteDir(dir); err != nil {
				t.Fatal(err)
			}
			archive, err := ft.Archive()
			if err != nil {
				t.Fatal(err)
			}
			const snap = "snapshot.tar.gz"
			ah, err := host.OpenArchive(snap, bytes.NewReader(archive))
			if err != nil {
				t.Fatal(err)
			}
			fromArchive, err := pci.Scan(ah, nil)
			if err != nil {
				t.Fatal(err)
			}
			fromDir := scanDir(t, dir)
			if len(fromDir.Devices) < 10 {
				t.Fatalf("only %d devices", len(fromDir.Devices))
			}
			a, d := render(fromArchive, snap), render(fromDir, dir)
			if a != d {
				t.Errorf("the archive and the directory scan differently:\narchive:\n%s\ndirectory:\n%s", a, d)
			}
			if name == "with bad input" && len(fromDir.Warnings) < 5 {
				t.Errorf("expected a warning for each bad input, got:\n%s", strings.Join(fromDir.Warnings, "\n"))
			}

			// The archive written to a file and opened by name reads the same.
			file := filepath.Join(t.TempDir(), snap)
			if err := os.WriteFile(file, archive, 0o644); err != nil {
				t.Fatal(err)
			}
			fh, err := host.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			fromFile, err := pci.Scan(fh, nil)
			if err != nil {
				t.Fatal(err)
			}
			if f := render(fromFile, file); f != d {
				t.Errorf("the archive file and the directory scan differently:\nfile:\n%s\ndirectory:\n%s", f, d)
			}
		})
	}
}
