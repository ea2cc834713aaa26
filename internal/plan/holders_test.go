package plan

import (
	"testing"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// Each move carries the holders of its own device, whatever its role: a NIC that is up
// and shares the GPU's IOMMU group makes its move (and so the apply) refused, while the
// GPU and its function, unused, have none.
func TestMovesCarryTheirHolders(t *testing.T) {
	m := fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-3"}},
		IOMMU: true,
		Bridges: []fakehost.HostBridge{{NUMA: 0, Devices: []fakehost.Device{
			{Slot: 1, Vendor: 0x1002, Device: 0x744c, Class: 0x030000, Driver: "amdgpu", Group: 7, Speed: "16.0 GT/s PCIe", Width: 16},
			{Slot: 1, Func: 1, Vendor: 0x1002, Device: 0xab30, Class: 0x040300, Driver: "snd_hda_intel", Group: 7, Speed: "16.0 GT/s PCIe", Width: 16},
			{Slot: 3, Vendor: 0x8086, Device: 0x10d3, Class: 0x020000, Driver: "e1000e", Group: 7, Speed: "2.5 GT/s PCIe", Width: 1},
		}}},
		Files: map[string]string{
			"/sys/devices/pci0000:00/0000:00:03.0/net/eth0/flags":     "0x1003\n",
			"/sys/devices/pci0000:00/0000:00:03.0/net/eth0/operstate": "up\n",
		},
		Links: map[string]string{"/sys/class/net/eth0": "../../devices/pci0000:00/0000:00:03.0/net/eth0"},
	}
	h, err := m.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := ForVFIO(choices(t, "0000:00:01.0"))
	d.AllowSharedGroups = true
	p, err := Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]string{}
	for _, mv := range p.Moves {
		for _, h := range mv.Holders {
			held[mv.Device.String()+" "+string(mv.Role)] += h.String()
		}
	}
	if len(p.Moves) != 3 || len(held) != 1 || held["0000:00:03.0 group member"] != "interface eth0 (up)" {
		t.Errorf("moves %v, holders %v; want the group member's move to carry eth0", moves(p.Moves), held)
	}
}
