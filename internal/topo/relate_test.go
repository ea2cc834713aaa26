package topo_test

import (
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/topo"
)

func addr(t testing.TB, s string) pci.Address {
	t.Helper()
	a, err := pci.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// dev is a device at address a under host bridge pci0000:<hb>, on NUMA node numa, below
// the bridges parents (root port first).
func dev(t testing.TB, a string, hb uint8, numa int, parents ...string) *pci.Device {
	t.Helper()
	d := &pci.Device{Address: addr(t, a), HostBridge: pci.HostBridge{Bus: hb}, NUMANode: numa, IOMMUGroup: -1}
	for _, p := range parents {
		d.Parents = append(d.Parents, addr(t, p))
	}
	return d
}

func TestRelate(t *testing.T) {
	// The bridge chains used below: a root port 30:02.0 leading to a switch whose
	// upstream port is 31:00.0 and whose downstream ports are 32:0N.0; below 32:04.0 a
	// second switch (upstream 37:00.0, downstream 38:0N.0).
	const (
		rp  = "0000:30:02.0"
		up  = "0000:31:00.0"
		up2 = "0000:37:00.0"
	)
	tests := []struct {
		name      string
		a, b      *pci.Device
		numaNodes int
		want      topo.Relation
	}{
		{
			name: "X: the device itself",
			a:    dev(t, "0000:34:00.0", 0x30, 0, rp, up, "0000:32:01.0"),
			b:    dev(t, "0000:34:00.0", 0x30, 0, rp, up, "0000:32:01.0"),
			want: topo.Self, numaNodes: 2,
		},
		{
			name: "PIX: two GPUs under one switch",
			a:    dev(t, "0000:34:00.0", 0x30, 0, rp, up, "0000:32:01.0"),
			b:    dev(t, "0000:35:00.0", 0x30, 0, rp, up, "0000:32:02.0"),
			want: topo.PIX, numaNodes: 2,
		},
		{
			name: "PIX: two functions of one slot below a root port",
			a:    dev(t, "0000:81:00.0", 0x80, 1, "0000:80:03.1"),
			b:    dev(t, "0000:81:00.1", 0x80, 1, "0000:80:03.1"),
			want: topo.PIX, numaNodes: 2,
		},
		{
			name: "PIX: two GPUs under the inner of two nested switches",
			a:    dev(t, "0000:39:00.0", 0x30, 0, rp, up, "0000:32:04.0", up2, "0000:38:01.0"),
			b:    dev(t, "0000:3a:00.0", 0x30, 0, rp, up, "0000:32:04.0", up2, "0000:38:02.0"),
			want: topo.PIX, numaNodes: 2,
		},
		{
			name: "PXB: nested switches, each GPU below its own inner switch",
			a:    dev(t, "0000:39:00.0", 0x30, 0, rp, up, "0000:32:03.0", "0000:36:00.0", "0000:37:01.0"),
			b:    dev(t, "0000:3d:00.0", 0x30, 0, rp, up, "0000:32:04.0", "0000:3b:00.0", "0000:3c:01.0"),
			want: topo.PXB, numaNodes: 2,
		},
		{
			name: "PXB: one side deeper (outer switch, and a switch nested below it)",
			a:    dev(t, "0000:34:00.0", 0x30, 0, rp, up, "0000:32:01.0"),
			b:    dev(t, "0000:39:00.0", 0x30, 0, rp, up, "0000:32:04.0", up2, "0000:38:01.0"),
			want: topo.PXB, numaNodes: 2,
		},
		{
			// PIX allows one bridge below the common switch on each side, no more: a
			// GPU behind a bridge of its own (a PCI card on a PCIe-to-PCI adapter) is
			// two below it, and its sibling on the next downstream port is PXB to it.
			name: "PXB: a GPU behind a bridge on one downstream port, its sibling on the next",
			a:    dev(t, "0000:34:00.0", 0x30, 0, rp, up, "0000:32:01.0"),
			b:    dev(t, "0000:37:00.0", 0x30, 0, rp, up, "0000:32:03.0", "0000:36:00.0"),
			want: topo.PXB, numaNodes: 2,
		},
		{
			name: "PXB: two GPUs under one switch, each behind a bridge of its own",
			a:    dev(t, "0000:37:00.0", 0x30, 0, rp, up, "0000:32:03.0", "0000:36:00.0"),
			b:    dev(t, "0000:39:00.0", 0x30, 0, rp, up, "0000:32:04.0", "0000:38:00.0"),
			want: topo.PXB, numaNodes: 2,
		},
		{
			name: "PHB: different root ports of one host bridge",
			a:    dev(t, "0000:e1:00.0", 0xe0, 0, "0000:e0:01.1"),
			b:    dev(t, "0000:e2:00.0", 0xe0, 0, "0000:e0:03.1"),
			want: topo.PHB, numaNodes: 1,
		},
		{
			name: "PHB: both on the root bus (QEMU i440fx)",
			a:    dev(t, "0000:00:10.0", 0x00, -1),
			b:    dev(t, "0000:00:11.0", 0x00, -1),
			want: topo.PHB, numaNodes: 1,
		},
		{
			name: "PHB: one on the root bus, one below a root port",
			a:    dev(t, "0000:00:10.0", 0x00, -1),
			b:    dev(t, "0000:01:00.0", 0x00, -1, "0000:00:1c.0"),
			want: topo.PHB, numaNodes: 1,
		},
		{
			name: "PHB: different root ports, numa -1 on a two-node machine",
			a:    dev(t, "0000:01:00.0", 0x00, -1, "0000:00:10.0"),
			b:    dev(t, "0000:02:00.0", 0x00, -1, "0000:00:10.1"),
			want: topo.PHB, numaNodes: 2,
		},
		{
			name: "NODE: different host bridges of one node",
			a:    dev(t, "0000:01:00.0", 0x00, 0, "0000:00:01.1"),
			b:    dev(t, "0000:41:00.0", 0x40, 0, "0000:40:01.1"),
			want: topo.NODE, numaNodes: 2,
		},
		{
			name: "NODE: both numa -1 on a machine with one NUMA node",
			a:    dev(t, "0000:01:00.0", 0x00, -1, "0000:00:01.1"),
			b:    dev(t, "0000:41:00.0", 0x40, -1, "0000:40:01.1"),
			want: topo.NODE, numaNodes: 1,
		},
		{
			name: "NODE: one numa 0, one -1, on a machine with one NUMA node",
			a:    dev(t, "0000:01:00.0", 0x00, 0, "0000:00:01.1"),
			b:    dev(t, "0000:41:00.0", 0x40, -1, "0000:40:01.1"),
			want: topo.NODE, numaNodes: 1,
		},
		{
			name: "NODE: separate PCI domains (Hyper-V style) on one node",
			a:    &pci.Device{Address: addr(t, "0001:00:00.0"), HostBridge: pci.HostBridge{Domain: 1}, NUMANode: 0},
			b:    &pci.Device{Address: addr(t, "0002:00:00.0"), HostBridge: pci.HostBridge{Domain: 2}, NUMANode: 0},
			want: topo.NODE, numaNodes: 1,
		},
		{
			name: "SYS: different NUMA nodes",
			a:    dev(t, "0000:34:00.0", 0x30, 0, rp, up, "0000:32:01.0"),
			b:    dev(t, "0000:b4:00.0", 0xb0, 1, "0000:b0:02.0", "0000:b1:00.0", "0000:b2:01.0"),
			want: topo.SYS, numaNodes: 2,
		},
		{
			name: "SYS: one node known, the other unknown, two NUMA nodes (oracle O5)",
			a:    dev(t, "0000:09:00.0", 0x00, -1, "0000:00:03.1"),
			b:    dev(t, "0000:41:00.0", 0x40, 1, "0000:40:03.1"),
			want: topo.SYS, numaNodes: 2,
		},
		{
			name: "SYS: both unknown, two NUMA nodes",
			a:    dev(t, "0000:01:00.0", 0x00, -1, "0000:00:01.1"),
			b:    dev(t, "0000:81:00.0", 0x80, -1, "0000:80:01.1"),
			want: topo.SYS, numaNodes: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := topo.Relate(tt.a, tt.b, tt.numaNodes); got != tt.want {
				t.Errorf("Relate(%s, %s) = %s, want %s", tt.a.Address, tt.b.Address, got, tt.want)
			}
			// The relation is symmetric.
			if got := topo.Relate(tt.b, tt.a, tt.numaNodes); got != tt.want {
				t.Errorf("Relate(%s, %s) = %s, want %s", tt.b.Address, tt.a.Address, got, tt.want)
			}
		})
	}
}

func TestRank(t *testing.T) {
	order := []topo.Relation{topo.Self, topo.PIX, topo.PXB, topo.PHB, topo.NODE, topo.SYS}
	for i, r := range order {
		if r.Rank() != i {
			t.Errorf("%s.Rank() = %d, want %d", r, r.Rank(), i)
		}
	}
	if r := topo.Relation("NV4").Rank(); r != -1 {
		t.Errorf("NV4.Rank() = %d, want -1", r)
	}
}
