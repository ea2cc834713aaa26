package pci

import "slices"

// GPU vendors whose display-class devices count as GPUs by default. A BMC's VGA
// (ASPEED 1a03, Matrox 102b) is display class too, and must never be moved.
const (
	VendorNVIDIA = 0x10de
	VendorAMD    = 0x1002
)

// GPU is a device that counts as a GPU, with the other functions of its slot
// (HDMI audio, USB-C controller), which must move with it.
type GPU struct {
	*Device
	Functions []*Device
}

// IsDefaultGPU reports whether d counts as a GPU when the user names no selector:
// an NVIDIA or AMD display controller that is not an SR-IOV virtual function.
func IsDefaultGPU(d *Device) bool {
	return d.IsDisplay() && (d.VendorID == VendorNVIDIA || d.VendorID == VendorAMD) && d.PhysFn == nil
}

// GPUs returns the devices that count as GPUs, with their companion functions. With no
// selectors the default rule applies (IsDefaultGPU); otherwise the selectors pick among
// all the devices of the tree. An empty result is not an error.
func GPUs(t *Tree, sels []Selector) ([]GPU, error) {
	var picked []*Device
	if len(sels) == 0 {
		for _, d := range t.Devices {
			if IsDefaultGPU(d) {
				picked = append(picked, d)
			}
		}
	} else {
		var err error
		if picked, err = Select(t.Devices, sels, "PCI device"); err != nil {
			return nil, err
		}
	}
	isGPU := map[Address]bool{}
	for _, d := range picked {
		isGPU[d.Address] = true
	}
	out := make([]GPU, 0, len(picked))
	for _, d := range picked {
		g := GPU{Device: d}
		for _, f := range t.Slot(d.Address) {
			if !isGPU[f.Address] {
				g.Functions = append(g.Functions, f)
			}
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(x, y GPU) int { return x.Address.Compare(y.Address) })
	return out, nil
}
