package pci

import (
	"math"
	"strings"
	"testing"
)

func TestParseLinkSpeed(t *testing.T) {
	tests := []struct {
		in  string
		gts float64
		gen int
	}{
		// Kernel 5.7 and later.
		{"2.5 GT/s PCIe", 2.5, 1},
		{"5.0 GT/s PCIe", 5, 2},
		{"8.0 GT/s PCIe", 8, 3},
		{"16.0 GT/s PCIe", 16, 4},
		{"32.0 GT/s PCIe", 32, 5},
		{"64.0 GT/s PCIe", 64, 6},
		// Before 5.7.
		{"2.5 GT/s", 2.5, 1},
		{"5 GT/s", 5, 2},
		{"8 GT/s", 8, 3},
		{"16 GT/s", 16, 4},
		{"32 GT/s", 32, 5},
		// Read from a file: surrounding white space.
		{"16.0 GT/s PCIe\n", 16, 4},
		{"  8 GT/s\n", 8, 3},
		// A rate the table does not know parses, with generation 0.
		{"20.0 GT/s PCIe", 20, 0},
		{"0.5 GT/s", 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			gts, gen, err := ParseLinkSpeed(tt.in)
			if err != nil {
				t.Fatalf("ParseLinkSpeed(%q): %v", tt.in, err)
			}
			if gts != tt.gts || gen != tt.gen {
				t.Errorf("ParseLinkSpeed(%q) = %v, %d; want %v, %d", tt.in, gts, gen, tt.gts, tt.gen)
			}
		})
	}
}

func TestParseLinkSpeedRejects(t *testing.T) {
	for _, in := range []string{
		"Unknown", "Unknown speed", "", " ", "\n",
		"abc GT/s", "NaN GT/s", "nan GT/s", "Inf GT/s", "+Inf GT/s", "-Inf GT/s", "infinity GT/s",
		"-8 GT/s", "+8 GT/s", "0 GT/s", "0.0 GT/s PCIe", "-0 GT/s",
		"1e1 GT/s", "0x10 GT/s", "0x1p4 GT/s", "1_6 GT/s",
		"16.0GT/s", "16.0 GT/s PCIe5", "16.0 GT/s pcie", "16.0 GT/s  PCIe", "16.0 GT/s PCIe PCIe",
		"16.0 gt/s", "16.0 Gb/s", "16.0  GT/s", " GT/s", "GT/s", "16.0", "16.0 GT/s GT/s",
		"2.5 GT/s PCIe\x00",
	} {
		t.Run(in, func(t *testing.T) {
			gts, gen, err := ParseLinkSpeed(in)
			if err == nil {
				t.Fatalf("ParseLinkSpeed(%q) = %v, %d; want an error", in, gts, gen)
			}
			if gts != 0 || gen != 0 {
				t.Errorf("ParseLinkSpeed(%q) = %v, %d with its error; want 0, 0", in, gts, gen)
			}
			if !strings.Contains(err.Error(), "GT/s") {
				t.Errorf("ParseLinkSpeed(%q) error %q does not show the expected form", in, err)
			}
		})
	}
}

func TestLinkString(t *testing.T) {
	const gen5, gen1, gen4 = "32.0 GT/s PCIe", "2.5 GT/s PCIe", "16.0 GT/s PCIe"
	tests := []struct {
		name string
		link Link
		want string
	}{
		{"no link", Link{}, ""},
		{"Gen5 x16", Link{Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16, Gen: 5, MaxGen: 5}, "Gen5 x16"},
		{"trained down in speed", Link{Speed: gen1, Width: 16, MaxSpeed: gen5, MaxWidth: 16, Gen: 1, MaxGen: 5},
			"Gen1 x16 (max Gen5 x16)"},
		{"trained down in width", Link{Speed: gen4, Width: 8, MaxSpeed: gen4, MaxWidth: 16, Gen: 4, MaxGen: 4},
			"Gen4 x8 (max Gen4 x16)"},
		{"maximum unknown", Link{Speed: gen4, Width: 16, Gen: 4}, "Gen4 x16"},
		{"link down", Link{MaxSpeed: gen5, MaxWidth: 16, MaxGen: 5}, "down (max Gen5 x16)"},
		{"rate without a generation", Link{Speed: "20.0 GT/s PCIe", Width: 4, MaxSpeed: "20.0 GT/s PCIe", MaxWidth: 4},
			"20.0 GT/s PCIe x4"},
		{"width without a speed", Link{Width: 8, MaxWidth: 8}, "? x8"},
		{"speed without a width", Link{Speed: gen5, Gen: 5, MaxSpeed: gen5, MaxGen: 5}, "Gen5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.link.String(); got != tt.want {
				t.Errorf("%+v.String() = %q, want %q", tt.link, got, tt.want)
			}
		})
	}
}

func FuzzParseLinkSpeed(f *testing.F) {
	for _, s := range []string{
		"2.5 GT/s PCIe", "32.0 GT/s PCIe", "8 GT/s", "Unknown", "Unknown speed", "",
		"NaN GT/s", "Inf GT/s", "-8 GT/s", "1e308 GT/s", "1e400 GT/s", "0x1p-2 GT/s", ".5 GT/s",
	} {
		f.Add(s)
	}
	known := map[float64]int{2.5: 1, 5: 2, 8: 3, 16: 4, 32: 5, 64: 6, 128: 7}
	f.Fuzz(func(t *testing.T, s string) {
		gts, gen, err := ParseLinkSpeed(s)
		if err != nil {
			if gts != 0 || gen != 0 {
				t.Fatalf("ParseLinkSpeed(%q) = %v, %d with error %v", s, gts, gen, err)
			}
			return
		}
		if math.IsNaN(gts) || math.IsInf(gts, 0) || gts <= 0 {
			t.Fatalf("ParseLinkSpeed(%q) = %v", s, gts)
		}
		if want := known[gts]; gen != want {
			t.Fatalf("ParseLinkSpeed(%q) = %v, generation %d; want generation %d", s, gts, gen, want)
		}
		if !strings.Contains(s, " GT/s") {
			t.Fatalf("ParseLinkSpeed(%q) accepted a speed without GT/s", s)
		}
		// White space around the value, as read from a file, changes nothing.
		gts2, gen2, err := ParseLinkSpeed(" " + s + "\n")
		if err != nil || gts2 != gts || gen2 != gen {
			t.Fatalf("ParseLinkSpeed(%q) = %v, %d, %v; ParseLinkSpeed(%q) = %v, %d", " "+s+"\n", gts2, gen2, err, s, gts, gen)
		}
	})
}
