package pci

import (
	"fmt"
	"slices"
	"testing"
)

// A slot has eight functions, 0 to 7: the last one moves with the GPU like the others.
func TestSlotHasEightFunctions(t *testing.T) {
	devs := []*Device{dev(t, "0000:01:00.0", 0x10de, 0x2bb1, 0x030000)}
	for f := 1; f <= 7; f++ {
		devs = append(devs, dev(t, fmt.Sprintf("0000:01:00.%d", f), 0x10de, 0x22e8, 0x040300))
	}
	tree := newTree(devs...)
	want := []string{"0000:01:00.0", "0000:01:00.1", "0000:01:00.2", "0000:01:00.3", "0000:01:00.4", "0000:01:00.5", "0000:01:00.6", "0000:01:00.7"}
	if got := addrs(tree.Slot(mustAddr(t, "0000:01:00.7"))); !slices.Equal(got, want) {
		t.Errorf("Slot = %v, want %v", got, want)
	}
	gpus, err := GPUs(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 1 || len(gpus[0].Functions) != 7 || gpus[0].Functions[6].Address.String() != "0000:01:00.7" {
		t.Errorf("GPUs = %+v, want one GPU with functions .1 to .7", gpus)
	}
}
