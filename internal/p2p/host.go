package p2p

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/nccl"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/topo"
)

// OnHost sets o's Relation and LinkGBps from the host's inventory, numaNodes being the
// host's NUMA nodes (topo.NUMANodes): how each pair of GPUs is connected, and the rate
// of each GPU's link, that a pair's "slow" verdict is judged against.
func (o *Options) OnHost(inv *inventory.Inventory, numaNodes int) {
	o.Relation = func(a, b string) string {
		da, db := lookup(inv, a), lookup(inv, b)
		if da == nil || db == nil {
			return ""
		}
		return string(topo.Relate(da, db, numaNodes))
	}
	o.LinkGBps = func(a string) float64 {
		if d := lookup(inv, a); d != nil {
			speed, width := nccl.Link(inv.Tree, d)
			return linkGBps(speed, width)
		}
		return 0
	}
}

// lookup finds a GPU of the inventory by the address CUDA gives.
func lookup(inv *inventory.Inventory, addr string) *pci.Device {
	a, err := pci.ParseAddress(addr)
	if err != nil {
		return nil
	}
	return inv.Tree.Lookup(a)
}

// linkGBps is a PCIe link's one-way rate in GB/s, from its sysfs speed and width.
func linkGBps(speed string, width int) float64 {
	gts, gen, err := pci.ParseLinkSpeed(speed)
	if err != nil {
		return 0
	}
	return LinkGBps(gts, gen, width)
}

// ParseSizes reads "4K,1M,256M" (K, M, G in powers of two; plain numbers are bytes).
func ParseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mult := int64(1)
		switch strings.ToUpper(f[len(f)-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		}
		num := f
		if mult > 1 {
			num = f[:len(f)-1]
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n <= 0 || n > (4<<30)/mult {
			return nil, fmt.Errorf("%q is not a size from 1 byte to 4G (4K, 1M, 256M)", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}
