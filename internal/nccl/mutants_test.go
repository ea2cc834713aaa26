package nccl

import (
	"strings"
	"testing"
)

// A bus id names a slot of 00 to 1f and a function of 0 to 7, as a PCI address does.
func TestIsBusIDBounds(t *testing.T) {
	for s, want := range map[string]bool{
		"0000:00:1f.7": true,
		"0000:ff:00.0": true,
		"0000:00:20.0": false,
		"0000:00:1f.8": false,
		"0000:00:ff.0": false,
	} {
		if got := IsBusID(s); got != want {
			t.Errorf("IsBusID(%q) = %v, want %v", s, got, want)
		}
	}
	if _, err := Parse([]byte(strings.Replace(minimal, "0000:00:16.0", "0000:00:20.0", 1))); err == nil || !strings.Contains(err.Error(), "lower-case PCI address") {
		t.Errorf("slot 20: err = %v, want the bus id refused", err)
	}
}

// NCCL keeps 16 attributes of an element: a file with exactly 16 reads as it is.
func TestParseSixteenAttributes(t *testing.T) {
	attrs := `<cpu numaid="0"`
	for i := range MaxAttrs - 1 {
		attrs += " a" + hex2(i) + `="x"`
	}
	n, err := Parse([]byte(strings.Replace(minimal, `<cpu numaid="0"`, attrs, 1)))
	if err != nil {
		t.Fatalf("16 attributes: %v", err)
	}
	if got := len(n.Children[0].Attrs); got != MaxAttrs {
		t.Errorf("<cpu> has %d attributes, want %d", got, MaxAttrs)
	}
}

// A cpumap is groups of eight hex digits, only the first of them shorter.
func TestCPUMapGroups(t *testing.T) {
	for s, want := range map[string]bool{
		"ff":                true,
		"ff,ffffffff":       true,
		"ffffffff,ffffffff": true,
		"ffffffff,ff":       false,
		"ff,ff":             false,
		"fffffffff":         false,
	} {
		if got := isCPUMap(s); got != want {
			t.Errorf("isCPUMap(%q) = %v, want %v", s, got, want)
		}
	}
	if _, err := Parse([]byte(strings.Replace(minimal, `<cpu numaid="0">`, `<cpu numaid="0" affinity="ffffffff,ff">`, 1))); err == nil || !strings.Contains(err.Error(), "cpumap") {
		t.Errorf("affinity ffffffff,ff: err = %v, want the cpumap refused", err)
	}
}
