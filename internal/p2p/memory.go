package p2p

import "github.com/gpusplit/gpusplit/internal/pci"

// Memory is each GPU's memory as driver d reports it, by PCI address: what fit takes
// over its table of GPUs. A GPU without a readable address or memory is left out, and
// a driver that cannot list its GPUs gives an empty map.
func Memory(d Driver) map[pci.Address]int64 {
	out := map[pci.Address]int64{}
	gpus, err := d.GPUs()
	if err != nil {
		return out
	}
	for _, g := range gpus {
		if a, err := pci.ParseAddress(g.Address); err == nil && g.Memory > 0 {
			out[a] = g.Memory
		}
	}
	return out
}
