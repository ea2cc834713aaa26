package pci

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// A slot names all the functions of a device, as Proxmox's pci.cfg and hostpci lines
// do. Among all the devices (--devices) it is one GPU, its other functions companions,
// not GPUs of their own; among GPUs (--vfio) it is every GPU of the slot.
func TestSelectSlot(t *testing.T) {
	tests := []struct {
		sels string
		want []string
	}{
		{"0000:01:00", []string{"0000:01:00.0+0000:01:00.1"}},
		{"01:00", []string{"0000:01:00.0+0000:01:00.1"}},
		{"00000000:61:00", []string{"0000:61:00.0+0000:61:00.1"}},
		// A slot that holds no default GPU: its lowest function, the others its companions.
		{"81:00", []string{"0000:81:00.0"}},
		{"0000:03:00,0000:21:00", []string{"0000:03:00.0", "0000:21:00.0"}},
		// The PF's slot, not its VF's (another slot).
		{"0000:c1:00", []string{"0000:c1:00.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.sels, func(t *testing.T) {
			gpus, err := GPUs(mixedHost(t), mustSelectors(t, tt.sels))
			if err != nil {
				t.Fatalf("GPUs(%s): %v", tt.sels, err)
			}
			if got := gpuSummary(gpus); !slices.Equal(got, tt.want) {
				t.Errorf("GPUs(%s):\n got %v\nwant %v", tt.sels, got, tt.want)
			}
		})
	}

	// The GPUs of the choice are both functions of one slot (--devices made the audio
	// function a GPU too): the slot chooses both, so they move together.
	tree := mixedHost(t)
	both := []*Device{tree.Lookup(mustAddr(t, "0000:01:00.0")), tree.Lookup(mustAddr(t, "0000:01:00.1")), tree.Lookup(mustAddr(t, "0000:21:00.0"))}
	got, err := Choose(both, both, mustSelectors(t, "0000:01:00"), "GPU", "GPU")
	if err != nil || !slices.Equal(addrs(got), []string{"0000:01:00.0", "0000:01:00.1"}) {
		t.Errorf("Choose(0000:01:00) among both functions = %v, %v", addrs(got), err)
	}

	// A slot with no device says what there is, and is a NoMatchError whose address is
	// the slot's function 0 (plan names that device when it is not a GPU).
	_, err = Choose(eightPlusTwo(t), eightPlusTwo(t), mustSelectors(t, "0000:05:00"), "GPU", "GPU")
	var nm *NoMatchError
	if err == nil || !strings.Contains(err.Error(), "selector 0000:05:00 matches no GPU (the 10 GPUs have addresses 0000:01:00.0,") || !errors.As(err, &nm) {
		t.Fatalf("Choose(0000:05:00): %v", err)
	}
	if a, ok := nm.Selector.Address(); !ok || a.String() != "0000:05:00.0" {
		t.Errorf("the slot's address = %s, %v", a, ok)
	}
}

// GPU4 and gpu:4 are the GPU that inventory and topo label 4: the fifth default GPU in
// address order, whatever order the candidates come in.
func TestSelectGPUNumber(t *testing.T) {
	tests := []struct {
		sels string
		want []string
	}{
		{"GPU0", []string{"0000:01:00.0+0000:01:00.1"}},
		{"gpu:2", []string{"0000:41:00.0"}},
		{"GPU4,gpu1", []string{"0000:21:00.0", "0000:c1:00.0"}},
		// Numbers count the default GPUs, also beside other naming selectors.
		{"8086:10d3,GPU3", []string{"0000:61:00.0+0000:61:00.1", "0000:81:00.0", "0000:82:00.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.sels, func(t *testing.T) {
			gpus, err := GPUs(mixedHost(t), mustSelectors(t, tt.sels))
			if err != nil {
				t.Fatalf("GPUs(%s): %v", tt.sels, err)
			}
			if got := gpuSummary(gpus); !slices.Equal(got, tt.want) {
				t.Errorf("GPUs(%s):\n got %v\nwant %v", tt.sels, got, tt.want)
			}
		})
	}

	// Among GPUs given out of order, as plan gives the inventory's.
	gpus := eightPlusTwo(t)
	slices.Reverse(gpus)
	for sels, want := range map[string][]string{
		"GPU0":             {"0000:01:00.0"},
		"GPU9":             {"0001:02:00.0"},
		"gpu:4,gpu:5":      {"0000:81:00.0", "0000:91:00.0"},
		"GPU1,GPU4,numa:1": {"0000:81:00.0"},
	} {
		got, err := Choose(gpus, gpus, mustSelectors(t, sels), "GPU", "GPU")
		if err != nil || !slices.Equal(addrs(got), want) {
			t.Errorf("Choose(%s) = %v, %v; want %v", sels, addrs(got), err, want)
		}
	}

	// A number past the last lists the numbers there are.
	_, err := Choose(gpus, gpus, mustSelectors(t, "GPU10"), "GPU", "GPU")
	if err == nil || !strings.Contains(err.Error(), "selector GPU10 matches no GPU (there are 10 GPUs, GPU0 (0000:01:00.0) to GPU9 (0001:02:00.0)") {
		t.Errorf("Choose(GPU10) of 10: %v", err)
	}
	_, err = GPUs(newTree(dev(t, "0000:03:00.0", 0x1a03, 0x2000, 0x030000)), mustSelectors(t, "gpu:0"))
	if err == nil || !strings.Contains(err.Error(), "there is no GPU") {
		t.Errorf("GPUs(gpu:0) without GPUs: %v", err)
	}
	one := eightPlusTwo(t)[:1]
	if _, err := Select(one, mustSelectors(t, "GPU1"), "GPU"); err == nil || !strings.Contains(err.Error(), "there is 1 GPU, GPU0 (0000:01:00.0)") {
		t.Errorf("Select(GPU1) of 1: %v", err)
	}
}

// A mapping: selector picks the devices its lookup gives, each path an address or a
// slot; it must be resolved before it picks.
func TestResolveMappings(t *testing.T) {
	lookup := func(name string) ([]string, error) {
		switch name {
		case "pro6000":
			return []string{"0000:01:00", "0000:61:00.0"}, nil
		case "nics":
			return []string{"0000:81:00.0", "0000:82:00"}, nil
		case "broken":
			return []string{"0000:81:00.0;0000:82:00.0"}, nil
		}
		return nil, errors.New("no mapping " + name)
	}
	sels := mustSelectors(t, "mapping:pro6000")
	if _, err := GPUs(mixedHost(t), sels); err == nil || !strings.Contains(err.Error(), "selector mapping:pro6000 names a Proxmox mapping, which is not read here") {
		t.Errorf("GPUs with an unresolved mapping: %v", err)
	}
	resolved, err := ResolveMappings(sels, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if sels[0].paths != nil {
		t.Error("ResolveMappings changed the selectors it was given")
	}
	gpus, err := GPUs(mixedHost(t), resolved)
	if got := gpuSummary(gpus); err != nil || !slices.Equal(got, []string{"0000:01:00.0+0000:01:00.1", "0000:61:00.0+0000:61:00.1"}) {
		t.Errorf("GPUs(mapping:pro6000) = %v, %v", got, err)
	}
	nics, _ := ResolveMappings(mustSelectors(t, "mapping:nics"), lookup)
	if gpus, err := GPUs(mixedHost(t), nics); err != nil || !slices.Equal(gpuSummary(gpus), []string{"0000:81:00.0", "0000:82:00.0"}) {
		t.Errorf("GPUs(mapping:nics) = %v, %v", gpuSummary(gpus), err)
	}
	// A slot path among GPUs that are both its functions takes both, as the slot alone.
	tree := mixedHost(t)
	both := []*Device{tree.Lookup(mustAddr(t, "0000:01:00.0")), tree.Lookup(mustAddr(t, "0000:01:00.1"))}
	resolved, _ = ResolveMappings(mustSelectors(t, "mapping:pro6000"), lookup)
	if got, err := Choose(both, both, resolved, "GPU", "GPU"); err != nil || !slices.Equal(addrs(got), []string{"0000:01:00.0", "0000:01:00.1"}) {
		t.Errorf("Choose(mapping:pro6000) among both functions = %v, %v", addrs(got), err)
	}
	// Among GPUs, a mapping of no GPU says what it holds and what there is.
	var cands []*Device
	defaults, _ := GPUs(mixedHost(t), nil)
	for _, g := range defaults {
		cands = append(cands, g.Device)
	}
	_, err = Choose(cands, cands, nics, "GPU", "GPU")
	if err == nil || !strings.Contains(err.Error(), "selector mapping:nics matches no GPU: on this node it holds 0000:81:00.0, 0000:82:00 (the 5 GPUs have addresses 0000:01:00.0,") {
		t.Errorf("Choose(mapping:nics) among GPUs: %v", err)
	}

	// Without mapping: selectors, the lookup is not asked, and may be nil.
	plain := mustSelectors(t, "numa:1,GPU2")
	if got, err := ResolveMappings(plain, nil); err != nil || !slices.Equal(got, plain) {
		t.Errorf("ResolveMappings without mappings = %v, %v", got, err)
	}
	for sels, want := range map[string]string{
		"mapping:other":          "selector mapping:other: no mapping other",
		"mapping:broken":         `selector mapping:broken: the mapping's path "0000:81:00.0;0000:82:00.0" is not a PCI address`,
		"numa:0,mapping:pro6000": "",
	} {
		_, err := ResolveMappings(mustSelectors(t, sels), lookup)
		if want == "" && err != nil || want != "" && (err == nil || err.Error() != want) {
			t.Errorf("ResolveMappings(%s): %v, want %q", sels, err, want)
		}
	}
	if _, err := ResolveMappings(mustSelectors(t, "mapping:pro6000"), nil); err == nil || !strings.Contains(err.Error(), "not read here") {
		t.Errorf("ResolveMappings without a lookup: %v", err)
	}
}
