package p2p

import "testing"

func TestLinkGBps(t *testing.T) {
	for _, c := range []struct {
		gts        float64
		gen, width int
		want       float64
	}{
		{64, 6, 16, 121.0},
		{32, 5, 16, 63.0},
		{16, 4, 16, 31.5},
		{8, 3, 16, 15.75},
		{5, 2, 16, 8.0},
		{2.5, 1, 1, 0.25},
		{32, 5, 0, 0},
	} {
		if got := LinkGBps(c.gts, c.gen, c.width); got < c.want-0.05 || got > c.want+0.05 {
			t.Errorf("%g GT/s (gen %d) x%d: %.2f GB/s, want %.2f", c.gts, c.gen, c.width, got, c.want)
		}
	}
}
