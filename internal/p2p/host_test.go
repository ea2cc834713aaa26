package p2p

import "testing"

func TestLinkRate(t *testing.T) {
	for _, c := range []struct {
		speed string
		width int
		want  float64
	}{
		{"32.0 GT/s PCIe", 16, 63.0},
		{"16.0 GT/s PCIe", 16, 31.5},
		{"8.0 GT/s PCIe", 16, 15.75},
		{"2.5 GT/s PCIe", 1, 0.25},
		{"Unknown", 16, 0},
		{"32.0 GT/s PCIe", 0, 0},
	} {
		if got := linkGBps(c.speed, c.width); got < c.want-0.05 || got > c.want+0.05 {
			t.Errorf("%s x%d: %.2f GB/s, want %.2f", c.speed, c.width, got, c.want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	got, err := ParseSizes("4K, 1M,256M,512")
	if err != nil || len(got) != 4 || got[0] != 4096 || got[2] != 256<<20 || got[3] != 512 {
		t.Errorf("%v %v", got, err)
	}
	for _, bad := range []string{"0", "-1K", "5G", "1T", "K"} {
		if _, err := ParseSizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
