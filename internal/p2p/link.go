package p2p

// LinkGBps is a PCIe link's one-way rate in GB/s: lanes × transfer rate × line code
// (8b/10b up to 5 GT/s, 128b/130b from 8 GT/s; PCIe 6's FLIT mode counted as 242/256).
// gts is the rate of one lane in GT/s and gen the PCIe generation, as
// pci.ParseLinkSpeed gives them; 0 for a link without lanes.
func LinkGBps(gts float64, gen, width int) float64 {
	if width <= 0 {
		return 0
	}
	code := 128.0 / 130
	switch {
	case gen <= 2:
		code = 0.8
	case gen >= 6:
		code = 242.0 / 256
	}
	return gts * float64(width) * code / 8
}
