package inventory

import (
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
)

func TestTextCells(t *testing.T) {
	for n, want := range map[uint64]string{128 << 30: "128G", 32 << 20: "32M", 512 << 10: "512K", 128: "128", 3 << 9: "1536", 2 << 40: "2T"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
	for name, want := range map[string]string{
		"GB202GL [RTX PRO 6000 Blackwell Server Edition]": "RTX PRO 6000 Blackwell Server Edition",
		"AD102 [GeForce RTX 4090]":                        "GeForce RTX 4090",
		"Navi 31 [Radeon RX 7900 XT/7900 XTX]":            "Navi 31 [Radeon RX 7900 XT/7900 XTX]",
	} {
		if got := ShortName(name); got != want {
			t.Errorf("ShortName(%q) = %q, want %q", name, got, want)
		}
	}
	bars := []pci.BAR{{Index: 0, Size: 64 << 20}, {Index: 1, Size: 128 << 30, Is64Bit: true, Prefetchable: true}, {Index: 6, Size: 256 << 30}}
	if got := largestBAR(bars); got != bars[1].Name()+" 128G" {
		t.Errorf("largestBAR = %q (the ROM is not a BAR to count)", got)
	}
	if got := barText(bars[1]); got != bars[1].Name()+" 128G (64-bit, prefetchable)" {
		t.Errorf("barText = %q", got)
	}
	if HeldBy(nil) != "-" || group(-1) != "-" || group(7) != "7" {
		t.Error("empty cells are not -")
	}
}
