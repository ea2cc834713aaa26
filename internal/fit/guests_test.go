package fit

import (
	"fmt"
	"testing"

	"github.com/gpusplit/gpusplit/docs"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// TestGuests finds the sample host's guests' GPUs, now and after docs/split.toml's split:
// container 129 has all eight now (its config passes /dev/nvidia0 to 7) and keeps the
// four of NUMA node 0; VM 131 would get the first four of its mapping now, and gets the
// four of node 1 on vfio-pci.
func TestGuests(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	file, err := plan.ParseFile("docs/split.toml", []byte(docs.SplitTOML))
	if err != nil {
		t.Fatal(err)
	}
	d, err := file.Desired()
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	nodes := func(gpus []inventory.GPU) []int {
		var out []int
		for _, g := range gpus {
			out = append(out, g.NUMANode)
		}
		return out
	}
	var paths []string
	for i := range 8 {
		paths = append(paths, fmt.Sprintf("/dev/nvidia%d", i))
	}
	ct := ContainerGPUs(inv, append(paths, "/dev/nvidiactl", "/dev/dri/by-path"))
	if len(ct) != 8 {
		t.Fatalf("container 129: %d GPUs", len(ct))
	}
	if got := ContainerGPUs(inv, []string{"/dev/nvidia3", "/dev/nvidia"}); len(got) != 1 {
		t.Errorf("/dev/nvidia3 and a prefix of no node's directory: %d GPUs", len(got))
	}
	after, from := AfterSplit(inv, p, d, Guest{Container, 129}, ct)
	if got := nodes(after); len(got) != 4 || got[0] != 0 || got[3] != 0 || from != `group "inference"` {
		t.Errorf("container 129 after the split: nodes %v, from %s", got, from)
	}
	var first []pci.Address
	for _, g := range inv.GPUs[:4] {
		first = append(first, g.Address)
	}
	vm := GPUsAt(inv, first)
	if len(vm) != 4 {
		t.Fatalf("VM 131: %d GPUs", len(vm))
	}
	after, _ = AfterSplit(inv, p, d, Guest{VM, 131}, vm)
	if got := nodes(after); len(got) != 4 || got[0] != 1 || got[3] != 1 {
		t.Errorf("VM 131 after the split: nodes %v", got)
	}
	// A container no group names keeps what it has now that stays on nvidia.
	after, from = AfterSplit(inv, p, d, Guest{Container, 150}, ct)
	if len(after) != 4 || from != "no group names container 150: the GPUs it has now that stay on nvidia" {
		t.Errorf("unnamed container: %d GPUs, %s", len(after), from)
	}
	// A container named in a group that goes to vfio-pci keeps none of its GPUs: a
	// container uses GPUs through the nvidia driver's nodes.
	wrong, err := plan.ParseFile("split.toml", []byte("[[group]]\nname = \"vfio\"\nselect = [\"numa:0\"]\ndriver = \"vfio-pci\"\ncontainers = [129]\n"))
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := wrong.Desired()
	wp, err := plan.Make(inv, wd)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := AfterSplit(inv, wp, wd, Guest{Container, 129}, ct); len(after) != 0 {
		t.Errorf("container on a vfio-pci group keeps %d GPUs", len(after))
	}
	gpus, err := Memory(ct, 0, nil)
	if err != nil || gpus[0].Memory != 97887*MiB || gpus[0].Name != "RTX PRO 6000 Blackwell Workstation Edition" {
		t.Errorf("memory %+v, %v", gpus[0], err)
	}
	// What the CUDA driver measured comes before the table, and --gpu-memory before both.
	measured := map[pci.Address]int64{ct[0].Address: 95 * GiB}
	if gpus, _ := Memory(ct, 0, measured); gpus[0].Memory != 95*GiB || gpus[0].MemoryFrom != "the CUDA driver (cuDeviceTotalMem)" || gpus[1].Memory == 95*GiB {
		t.Errorf("measured: %+v", gpus)
	}
	if gpus, _ := Memory(ct, 80*GiB, measured); gpus[0].Memory != 80*GiB || gpus[0].MemoryFrom != "--gpu-memory" {
		t.Errorf("override %+v", gpus[0])
	}
}
