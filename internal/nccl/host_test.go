package nccl

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// TestHostTopology: the sample host's topology has its GPUs and NICs; a device that is
// not an NVIDIA GPU is warned of; a q35 guest, every GPU on one host bridge, gets the
// note that points to the manifest; no GPU is ErrNoGPU.
func TestHostTopology(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	build := func(h *host.Host, devices string) *inventory.Inventory {
		t.Helper()
		sels, err := pci.ParseSelectors(devices)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := inventory.Build(h, sels)
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	x, warnings, notes, err := HostTopology(h, build(h, ""), Options{})
	if err != nil || len(warnings) != 0 || len(notes) != 0 {
		t.Fatalf("%v, %v, %v", err, warnings, notes)
	}
	if got := strings.Count(string(Marshal(x)), "class=\"0x030000\""); got != 8 {
		t.Errorf("%d GPUs in\n%s", got, Marshal(x))
	}
	if _, warnings, _, _ := HostTopology(h, build(h, "class:0x0200"), Options{}); len(warnings) == 0 || !strings.Contains(warnings[0], "is not an NVIDIA GPU") {
		t.Errorf("NICs as GPUs: %v", warnings)
	}
	if _, _, _, err := HostTopology(h, &inventory.Inventory{}, Options{}); !errors.Is(err, ErrNoGPU) {
		t.Errorf("no GPU: %v", err)
	}
	f, err := os.Open("../../testdata/hosts/q35-guest-8gpu.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	guest, err := host.OpenArchive(f.Name(), f)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, notes, err := HostTopology(guest, build(guest, ""), Options{}); err != nil || len(notes) != 1 || !strings.HasPrefix(notes[0], "this looks like a VM") {
		t.Errorf("q35 guest: %v, %v", err, notes)
	}
}

// TestCheck counts what NCCL's parser reads of the sample host's file with its GPUs, and
// refuses what it would refuse.
func TestCheck(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, _, _, err := HostTopology(h, inv, Options{WithGPUs: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check("kpro6.xml", Marshal(x))
	if err != nil || !r.OK || r.File != "kpro6.xml" || r.CPUs != 2 || r.GPUs != 8 || r.PCIs != 10 || r.Elements != x.Count() {
		t.Errorf("%+v, %v", r, err)
	}
	if _, err := Check("bad.xml", []byte("<system version=\"1\"><cpu numaid=\"x\"\n")); err == nil {
		t.Error("a newline inside a tag is read")
	}
}
