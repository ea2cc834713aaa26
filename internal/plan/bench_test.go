package plan

import (
	"fmt"
	"testing"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// bigInventory is a host of 64 GPUs with audio functions on 4 NUMA nodes, each pair in
// its own IOMMU group behind its own root port, built in memory: planning reads nothing.
func bigInventory(b *testing.B) *inventory.Inventory {
	var gpus []inventory.GPU
	var devs []*pci.Device
	for i := range 64 {
		hb := pci.HostBridge{Bus: uint8(i * 4)}
		port := &pci.Device{Address: pci.Address{Bus: uint8(i * 4), Device: 1, Function: 1}, Class: 0x060400, Driver: "pcieport", IOMMUGroup: 3 * i, NUMANode: i / 16, HostBridge: hb}
		gpu := &pci.Device{Address: pci.Address{Bus: uint8(i*4 + 1)}, VendorID: pci.VendorNVIDIA, DeviceID: 0x2bb1, Class: 0x030000, Driver: "nvidia", IOMMUGroup: 3*i + 1, NUMANode: i / 16, HostBridge: hb, Parents: []pci.Address{port.Address}}
		audio := &pci.Device{Address: pci.Address{Bus: uint8(i*4 + 1), Function: 1}, VendorID: pci.VendorNVIDIA, DeviceID: 0x22e8, Class: 0x040300, Driver: "snd_hda_intel", IOMMUGroup: 3*i + 1, NUMANode: i / 16, HostBridge: hb, Parents: []pci.Address{port.Address}}
		devs = append(devs, port, gpu, audio)
		gpus = append(gpus, inventory.GPU{GPU: pci.GPU{Device: gpu, Functions: []*pci.Device{audio}}, Minor: i})
	}
	return &inventory.Inventory{Root: "synthetic", Tree: pci.NewTree(devs, nil), GPUs: gpus}
}

func BenchmarkMake64GPUs(b *testing.B) {
	inv := bigInventory(b)
	for _, sel := range []string{"numa:2,numa:3", "count:32", "0000:05:00.0"} {
		sels, err := pci.ParseSelectors(sel)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(sel, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := Make(inv, ForVFIO([][]pci.Selector{sels}))
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Moves) == 0 {
					b.Fatal(fmt.Sprint("no moves for ", sel))
				}
			}
		})
	}
}
