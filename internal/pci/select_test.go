package pci

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParseSelector(t *testing.T) {
	tests := []struct {
		in   string
		want Selector
	}{
		{"numa:0", Selector{text: "numa:0", kind: byNUMA, n: 0}},
		{"numa:1", Selector{text: "numa:1", kind: byNUMA, n: 1}},
		{"NUMA:3", Selector{text: "NUMA:3", kind: byNUMA, n: 3}},
		{" numa:1 ", Selector{text: "numa:1", kind: byNUMA, n: 1}},
		{"group:0", Selector{text: "group:0", kind: byGroup, n: 0}},
		{"group:42", Selector{text: "group:42", kind: byGroup, n: 42}},
		{"count:1", Selector{text: "count:1", kind: byCount, n: 1}},
		{"count:8", Selector{text: "count:8", kind: byCount, n: 8}},
		{"Count:2", Selector{text: "Count:2", kind: byCount, n: 2}},
		{"0000:81:00.0", Selector{text: "0000:81:00.0", kind: byAddress, addr: Address{Bus: 0x81}}},
		{"81:00.0", Selector{text: "81:00.0", kind: byAddress, addr: Address{Bus: 0x81}}},
		{"0000:E1:00.1", Selector{text: "0000:E1:00.1", kind: byAddress, addr: Address{Bus: 0xe1, Function: 1}}},
		{"10000:01:00.0", Selector{text: "10000:01:00.0", kind: byAddress, addr: Address{Domain: 0x10000, Bus: 1}}},
		{"10de:2bb1", Selector{text: "10de:2bb1", kind: byID, vendor: 0x10de, device: 0x2bb1}},
		{"10DE:2BB1", Selector{text: "10DE:2BB1", kind: byID, vendor: 0x10de, device: 0x2bb1}},
		{"8086:10d3", Selector{text: "8086:10d3", kind: byID, vendor: 0x8086, device: 0x10d3}},
		{"0000:0000", Selector{text: "0000:0000", kind: byID}},
		{"class:0x03", Selector{text: "class:0x03", kind: byClass, class: 0x03, classBits: 8}},
		{"class:0x0300", Selector{text: "class:0x0300", kind: byClass, class: 0x0300, classBits: 16}},
		{"class:0x030000", Selector{text: "class:0x030000", kind: byClass, class: 0x030000, classBits: 24}},
		{"class:03", Selector{text: "class:03", kind: byClass, class: 0x03, classBits: 8}},
		{"class:0302", Selector{text: "class:0302", kind: byClass, class: 0x0302, classBits: 16}},
		{"class:020000", Selector{text: "class:020000", kind: byClass, class: 0x020000, classBits: 24}},
		{"class:0X0300", Selector{text: "class:0X0300", kind: byClass, class: 0x0300, classBits: 16}},
		{"CLASS:0x0C03", Selector{text: "CLASS:0x0C03", kind: byClass, class: 0x0c03, classBits: 16}},
		// nvidia-smi's bus id: a domain of 8 hex digits, upper case.
		{"00000000:81:00.0", Selector{text: "00000000:81:00.0", kind: byAddress, addr: Address{Bus: 0x81}}},
		{"00000000:E1:00.0", Selector{text: "00000000:E1:00.0", kind: byAddress, addr: Address{Bus: 0xe1}}},
		// A slot as Proxmox writes it (pci.cfg paths, hostpci lines): all its functions.
		{"0000:81:00", Selector{text: "0000:81:00", kind: bySlot, addr: Address{Bus: 0x81}}},
		{"81:00", Selector{text: "81:00", kind: bySlot, addr: Address{Bus: 0x81}}},
		{"0000:C1:1f", Selector{text: "0000:C1:1f", kind: bySlot, addr: Address{Bus: 0xc1, Device: 0x1f}}},
		{"00000000:81:00", Selector{text: "00000000:81:00", kind: bySlot, addr: Address{Bus: 0x81}}},
		{"10000:01:02", Selector{text: "10000:01:02", kind: bySlot, addr: Address{Domain: 0x10000, Bus: 1, Device: 2}}},
		// The GPU numbers of inventory and topo.
		{"GPU4", Selector{text: "GPU4", kind: byNumber, n: 4}},
		{"gpu0", Selector{text: "gpu0", kind: byNumber, n: 0}},
		{"gpu:4", Selector{text: "gpu:4", kind: byNumber, n: 4}},
		{"GPU:12", Selector{text: "GPU:12", kind: byNumber, n: 12}},
		// A Proxmox mapping, by its id.
		{"mapping:pro6000", Selector{text: "mapping:pro6000", kind: byMapping, mapping: "pro6000"}},
		{"Mapping:A6000-ws_2", Selector{text: "Mapping:A6000-ws_2", kind: byMapping, mapping: "A6000-ws_2"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSelector(tt.in)
			if err != nil {
				t.Fatalf("ParseSelector(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseSelector(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if got.String() != strings.TrimSpace(tt.in) {
				t.Errorf("ParseSelector(%q).String() = %q", tt.in, got.String())
			}
		})
	}
}

func TestParseSelectorRejects(t *testing.T) {
	tests := []struct {
		in  string
		why string
	}{
		{"", "unknown form"},
		{"gpu", "gpu needs a number"},
		{"gpu:", "gpu needs a number"},
		{"gpu:-1", "gpu needs a number"},
		{"gpu:x", "gpu needs a number"},
		{"GPU-1", "unknown form"},
		{"GPUx", "unknown form"},
		{"GPU99999999999999999999", "GPU number is too large"},
		{"mapping:", "a mapping name is"},
		{"mapping:1gpu", "a mapping name is"},
		{"mapping:a", "a mapping name is"},
		{"mapping:pro 6000", "a mapping name is"},
		{"mapping:pro.6000", "a mapping name is"},
		{"0000:81:20", "slot must be 00 to 1f"},
		{"0000:8g:00", "bus is not hexadecimal"},
		{"000:81:00", "domain must have 4 to 8 hex digits"},
		{"0000:81:0", "unknown form"},
		{"81:0", "unknown form"},
		{"0000:81", "unknown form"},
		{"numa", "numa needs a number"},
		{"numa:", "numa needs a number"},
		{"numa:x", "numa needs a number"},
		{"numa:-1", "numa needs a number"},
		{"numa:1.5", "numa needs a number"},
		{"numa: 1", "numa needs a number"},
		{"numa:0x1", "numa needs a number"},
		{"numa:1:2", "numa needs a number"},
		{"group:", "group needs a number"},
		{"group:-3", "group needs a number"},
		{"group:abc", "group needs a number"},
		{"count:0", "count must be at least 1"},
		{"count:-1", "count needs a number"},
		{"count:", "count needs a number"},
		{"count:two", "count needs a number"},
		{"count:99999999999999999999", "count needs a number"},
		{"class:", "2, 4 or 6 hex digits"},
		{"class:0x", "2, 4 or 6 hex digits"},
		{"class:3", "2, 4 or 6 hex digits"},
		{"class:0x3", "2, 4 or 6 hex digits"},
		{"class:0x030", "2, 4 or 6 hex digits"},
		{"class:0x03000", "2, 4 or 6 hex digits"},
		{"class:0x03000000", "2, 4 or 6 hex digits"},
		{"class:0xzz", "class is not hexadecimal"},
		{"class:0x03g0", "class is not hexadecimal"},
		{"class:0x0x03", "class is not hexadecimal"},
		{"class:+300", "class is not hexadecimal"},
		{"class", "2, 4 or 6 hex digits"},
		{"0000:81:00.8", "function must be 0 to 7"},
		{"0000:81:20.0", "slot must be 00 to 1f"},
		{"81:0.0", "SS.F"},
		{"0000:00:81:00.0", "wrong number of ':'"},
		{"10de:2bb", "unknown form"},
		{"10de:2bb1a", "unknown form"},
		{"10d:2bb1", "unknown form"},
		{"10dx:2bb1", "unknown form"},
		{"10de:zzzz", "unknown form"},
		{"10de:2bb1:0", "unknown form"},
		{"vendor:10de", "unknown form"},
		{"foo:1", "unknown form"},
		{"node:0", "unknown form"},
		{"iommu:3", "unknown form"},
		{":", "unknown form"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSelector(tt.in)
			if err == nil {
				t.Fatalf("ParseSelector(%q) = %+v, want an error", tt.in, got)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.why) {
				t.Errorf("ParseSelector(%q) error %q does not say %q", tt.in, msg, tt.why)
			}
			if !strings.Contains(msg, fmt.Sprintf("%q", tt.in)) {
				t.Errorf("ParseSelector(%q) error %q does not quote the selector", tt.in, msg)
			}
			if !strings.Contains(msg, SelectorHelp) {
				t.Errorf("ParseSelector(%q) error %q does not list the forms", tt.in, msg)
			}
		})
	}
}

func TestParseSelectors(t *testing.T) {
	tests := []struct {
		in   string
		want []string // String() of each selector
	}{
		{"", nil},
		{",", nil},
		{" , ,", nil},
		{"numa:0", []string{"numa:0"}},
		{"numa:0,count:2", []string{"numa:0", "count:2"}},
		{"numa:0, 10de:2bb1 ,class:0x03", []string{"numa:0", "10de:2bb1", "class:0x03"}},
		{"0000:81:00.0,0000:c1:00.0", []string{"0000:81:00.0", "0000:c1:00.0"}},
		// Empty entries (a doubled or trailing comma) are skipped.
		{"numa:0,,group:3,", []string{"numa:0", "group:3"}},
		{",81:00.0", []string{"81:00.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			sels, err := ParseSelectors(tt.in)
			if err != nil {
				t.Fatalf("ParseSelectors(%q): %v", tt.in, err)
			}
			var got []string
			for _, s := range sels {
				got = append(got, s.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseSelectors(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	for _, in := range []string{"numa:0,count:0", "numa:0,bogus", "count:2,,numa:x", "0000:81:00.0,0000:81:00.9"} {
		sels, err := ParseSelectors(in)
		if err == nil {
			t.Errorf("ParseSelectors(%q) = %v, want an error", in, sels)
		} else if sels != nil {
			t.Errorf("ParseSelectors(%q) returned %v with its error", in, sels)
		}
	}
	// The error names the bad entry, not the whole list.
	if _, err := ParseSelectors("numa:0,count:0,group:1"); err == nil || !strings.Contains(err.Error(), `"count:0"`) {
		t.Errorf("ParseSelectors error %v does not name the bad entry", err)
	}
}

// gpu makes a GPU-like device for the selection tests.
func gpu(t testing.TB, addr string, numa, group int) *Device {
	t.Helper()
	return &Device{
		Address: mustAddr(t, addr), VendorID: 0x10de, DeviceID: 0x2bb1, Class: 0x030000,
		NUMANode: numa, IOMMUGroup: group,
	}
}

// eightPlusTwo is 4 GPUs on each of NUMA nodes 0 and 1 and 2 on node 2.
func eightPlusTwo(t testing.TB) []*Device {
	return []*Device{
		gpu(t, "0000:01:00.0", 0, 10), gpu(t, "0000:11:00.0", 0, 11), gpu(t, "0000:21:00.0", 0, 12), gpu(t, "0000:31:00.0", 0, 13),
		gpu(t, "0000:81:00.0", 1, 20), gpu(t, "0000:91:00.0", 1, 21), gpu(t, "0000:a1:00.0", 1, 22), gpu(t, "0000:b1:00.0", 1, 23),
		gpu(t, "0001:01:00.0", 2, 30), gpu(t, "0001:02:00.0", 2, 31),
	}
}

func addrs(devs []*Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.Address.String())
	}
	return out
}

func mustSelectors(t testing.TB, list string) []Selector {
	t.Helper()
	sels, err := ParseSelectors(list)
	if err != nil {
		t.Fatal(err)
	}
	return sels
}

func TestSelect(t *testing.T) {
	tests := []struct {
		sels string
		want []string
	}{
		// count:N takes the lowest node that has N on its own.
		{"count:1", []string{"0000:01:00.0"}},
		{"count:2", []string{"0000:01:00.0", "0000:11:00.0"}},
		{"count:4", []string{"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0"}},
		// Otherwise the fullest nodes first, the lower node first among equals.
		{"count:5", []string{"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0", "0000:81:00.0"}},
		{"count:6", []string{"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0", "0000:81:00.0", "0000:91:00.0"}},
		{"count:8", []string{
			"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0",
			"0000:81:00.0", "0000:91:00.0", "0000:a1:00.0", "0000:b1:00.0",
		}},
		{"count:9", []string{
			"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0",
			"0000:81:00.0", "0000:91:00.0", "0000:a1:00.0", "0000:b1:00.0", "0001:01:00.0",
		}},
		{"count:10", []string{
			"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0",
			"0000:81:00.0", "0000:91:00.0", "0000:a1:00.0", "0000:b1:00.0", "0001:01:00.0", "0001:02:00.0",
		}},
		{"numa:0", []string{"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0"}},
		{"numa:2", []string{"0001:01:00.0", "0001:02:00.0"}},
		{"group:22", []string{"0000:a1:00.0"}},
		{"0000:91:00.0", []string{"0000:91:00.0"}},
		{"91:00.0", []string{"0000:91:00.0"}},
		{"10de:2bb1", addrs(eightPlusTwo(t))},
		{"class:0x03", addrs(eightPlusTwo(t))},
		{"class:0x0300", addrs(eightPlusTwo(t))},
		{"class:0x030000", addrs(eightPlusTwo(t))},
		// A union, in address order, each device once.
		{"numa:2,0000:01:00.0", []string{"0000:01:00.0", "0001:01:00.0", "0001:02:00.0"}},
		{"0001:02:00.0,0000:b1:00.0,0000:01:00.0", []string{"0000:01:00.0", "0000:b1:00.0", "0001:02:00.0"}},
		{"numa:1,group:21,0000:91:00.0,91:00.0", []string{"0000:81:00.0", "0000:91:00.0", "0000:a1:00.0", "0000:b1:00.0"}},
		{"count:2,numa:0", []string{"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0"}},
		{"numa:2,count:2", []string{"0000:01:00.0", "0000:11:00.0", "0001:01:00.0", "0001:02:00.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.sels, func(t *testing.T) {
			got, err := Select(eightPlusTwo(t), mustSelectors(t, tt.sels), "GPU")
			if err != nil {
				t.Fatalf("Select(%s): %v", tt.sels, err)
			}
			if g := addrs(got); !slices.Equal(g, tt.want) {
				t.Errorf("Select(%s):\n got %v\nwant %v", tt.sels, g, tt.want)
			}
		})
	}
}

// Nodes numbered out of address order, a small node first: count:N looks at nodes by
// number and size, never at which comes first on the bus.
func TestSelectCountPacksByNode(t *testing.T) {
	cands := []*Device{
		gpu(t, "0000:01:00.0", 3, 1), gpu(t, "0000:02:00.0", 3, 2), gpu(t, "0000:03:00.0", 3, 3), gpu(t, "0000:04:00.0", 3, 4),
		gpu(t, "0000:41:00.0", 1, 5), gpu(t, "0000:42:00.0", 1, 6), gpu(t, "0000:43:00.0", 1, 7), gpu(t, "0000:44:00.0", 1, 8),
		gpu(t, "0000:81:00.0", 0, 9), gpu(t, "0000:82:00.0", 0, 10),
	}
	tests := []struct {
		n    int
		want []string
	}{
		{1, []string{"0000:81:00.0"}},
		{2, []string{"0000:81:00.0", "0000:82:00.0"}},
		{3, []string{"0000:41:00.0", "0000:42:00.0", "0000:43:00.0"}},
		{4, []string{"0000:41:00.0", "0000:42:00.0", "0000:43:00.0", "0000:44:00.0"}},
		// Nodes 1 and 3 are the fullest; node 1 comes first, then the lowest address of node 3.
		{5, []string{"0000:01:00.0", "0000:41:00.0", "0000:42:00.0", "0000:43:00.0", "0000:44:00.0"}},
		{8, []string{
			"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0",
			"0000:41:00.0", "0000:42:00.0", "0000:43:00.0", "0000:44:00.0",
		}},
		{9, []string{
			"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0",
			"0000:41:00.0", "0000:42:00.0", "0000:43:00.0", "0000:44:00.0", "0000:81:00.0",
		}},
	}
	for _, tt := range tests {
		sel := fmt.Sprintf("count:%d", tt.n)
		got, err := Select(cands, mustSelectors(t, sel), "GPU")
		if err != nil {
			t.Fatalf("Select(%s): %v", sel, err)
		}
		if g := addrs(got); !slices.Equal(g, tt.want) {
			t.Errorf("Select(%s):\n got %v\nwant %v", sel, g, tt.want)
		}
		// packByNUMA itself returns n devices on the fewest nodes.
		p, err := packByNUMA(cands, tt.n, "GPU")
		if err != nil || len(p) != tt.n {
			t.Errorf("packByNUMA(%d) = %v, %v", tt.n, addrs(p), err)
		}
	}
}

// Within a node the lowest addresses come first, whatever the order of the candidates.
func TestSelectCountTakesLowestAddresses(t *testing.T) {
	cands := eightPlusTwo(t)
	slices.Reverse(cands)
	for sel, want := range map[string][]string{
		"count:1": {"0000:01:00.0"},
		"count:2": {"0000:01:00.0", "0000:11:00.0"},
		"count:3": {"0000:01:00.0", "0000:11:00.0", "0000:21:00.0"},
		"count:5": {"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0", "0000:81:00.0"},
		"count:9": {
			"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0",
			"0000:81:00.0", "0000:91:00.0", "0000:a1:00.0", "0000:b1:00.0", "0001:01:00.0",
		},
		"numa:1,numa:0": {
			"0000:01:00.0", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0",
			"0000:81:00.0", "0000:91:00.0", "0000:a1:00.0", "0000:b1:00.0",
		},
	} {
		got, err := Select(cands, mustSelectors(t, sel), "GPU")
		if err != nil {
			t.Fatalf("Select(%s): %v", sel, err)
		}
		if g := addrs(got); !slices.Equal(g, want) {
			t.Errorf("Select(%s) of candidates in reverse order:\n got %v\nwant %v", sel, g, want)
		}
	}
	// The candidates are left as they were.
	if cands[0].Address.String() != "0001:02:00.0" {
		t.Errorf("Select reordered its candidates: %v", addrs(cands))
	}
}

// A VM guest without NUMA information: every device on node -1.
func TestSelectCountWithoutNUMA(t *testing.T) {
	cands := []*Device{gpu(t, "0000:00:10.0", -1, -1), gpu(t, "0000:00:11.0", -1, -1), gpu(t, "0000:00:12.0", -1, -1)}
	got, err := Select(cands, mustSelectors(t, "count:2"), "GPU")
	if err != nil {
		t.Fatal(err)
	}
	if g, want := addrs(got), []string{"0000:00:10.0", "0000:00:11.0"}; !slices.Equal(g, want) {
		t.Errorf("Select(count:2) = %v, want %v", g, want)
	}
	_, err = Select(cands, mustSelectors(t, "numa:0"), "GPU")
	if err == nil || !strings.Contains(err.Error(), "NUMA nodes -1") {
		t.Errorf("Select(numa:0) error = %v, want one saying the GPUs are on node -1", err)
	}
	_, err = Select(cands, mustSelectors(t, "group:0"), "GPU")
	if err == nil || !strings.Contains(err.Error(), "IOMMU groups -1") {
		t.Errorf("Select(group:0) error = %v, want one saying the GPUs have no group", err)
	}
}

func TestSelectErrors(t *testing.T) {
	tests := []struct {
		sels string
		want []string // parts of the error message
	}{
		{"count:11", []string{"count:11", "more than the 10 GPUs"}},
		{"count:100", []string{"count:100", "10 GPUs"}},
		{"numa:3", []string{"selector numa:3 matches no GPU", "the 10 GPUs have NUMA nodes 0, 1, 2"}},
		{"group:99", []string{"selector group:99", "IOMMU groups 10, 11, 12, 13, 20, 21, 22, 23, 30, 31"}},
		{"0000:c1:00.0", []string{"selector 0000:c1:00.0", "addresses 0000:01:00.0, 0000:11:00.0,", "0001:02:00.0"}},
		{"10de:2330", []string{"selector 10de:2330", "ids 10de:2bb1"}},
		{"class:0x0302", []string{"selector class:0x0302", "classes 0x030000"}},
		{"class:0x02", []string{"selector class:0x02", "classes 0x030000"}},
		// One selector that matches nothing fails the whole selection.
		{"numa:0,numa:7", []string{"numa:7", "NUMA nodes 0, 1, 2"}},
		{"count:2,10de:2330", []string{"10de:2330"}},
	}
	for _, tt := range tests {
		t.Run(tt.sels, func(t *testing.T) {
			got, err := Select(eightPlusTwo(t), mustSelectors(t, tt.sels), "GPU")
			if err == nil {
				t.Fatalf("Select(%s) = %v, want an error", tt.sels, addrs(got))
			}
			if got != nil {
				t.Errorf("Select(%s) returned %v with its error", tt.sels, addrs(got))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Select(%s) error %q does not say %q", tt.sels, err, w)
				}
			}
		})
	}

	// Two nodes: the message lists exactly those.
	two := eightPlusTwo(t)[:8]
	_, err := Select(two, mustSelectors(t, "numa:3"), "GPU")
	if err == nil || !strings.HasSuffix(err.Error(), "(the 8 GPUs have NUMA nodes 0, 1)") {
		t.Errorf("Select(numa:3) of 8 GPUs on nodes 0 and 1: error %v", err)
	}
	// Nothing to select from.
	for _, sel := range []string{"numa:0", "10de:2bb1", "0000:01:00.0"} {
		_, err := Select(nil, mustSelectors(t, sel), "GPU")
		if err == nil || !strings.Contains(err.Error(), "there is no GPU") {
			t.Errorf("Select(%s) of nothing: error %v", sel, err)
		}
	}
	if _, err := Select(nil, mustSelectors(t, "count:1"), "GPU"); err == nil || !strings.Contains(err.Error(), "0 GPUs") {
		t.Errorf("Select(count:1) of nothing: error %v", err)
	}
	// The noun is the caller's.
	_, err = Select(two, mustSelectors(t, "numa:5"), "PCI device")
	if err == nil || !strings.Contains(err.Error(), "matches no PCI device (the 8 PCI devices have") {
		t.Errorf("Select with noun \"PCI device\": error %v", err)
	}
}

func TestSelectNoSelectors(t *testing.T) {
	got, err := Select(eightPlusTwo(t), nil, "GPU")
	if err != nil || len(got) != 0 {
		t.Errorf("Select with no selectors = %v, %v; want nothing", addrs(got), err)
	}
}

// newTree makes a Tree of devices, as Scan would: sorted and indexed.
func newTree(devs ...*Device) *Tree {
	t := &Tree{index: map[Address]*Device{}}
	for _, d := range devs {
		t.Devices = append(t.Devices, d)
		t.index[d.Address] = d
	}
	slices.SortFunc(t.Devices, func(x, y *Device) int { return x.Address.Compare(y.Address) })
	return t
}

func dev(t testing.TB, addr string, vendor, device uint16, class uint32) *Device {
	t.Helper()
	return &Device{Address: mustAddr(t, addr), VendorID: vendor, DeviceID: device, Class: class, NUMANode: -1, IOMMUGroup: -1}
}

// mixedHost has GPUs of both vendors, their audio functions, a BMC's VGA, an NVSwitch,
// an SR-IOV VF of a GPU, an iGPU and two NICs.
func mixedHost(t testing.TB) *Tree {
	pf := mustAddr(t, "0000:c1:00.0")
	vf := dev(t, "0000:c1:01.2", 0x10de, 0x2330, 0x030200)
	vf.PhysFn = &pf
	return newTree(
		dev(t, "0000:00:02.0", 0x8086, 0xa780, 0x030000), // Intel iGPU
		dev(t, "0000:01:00.0", 0x10de, 0x2bb1, 0x030000), // RTX PRO 6000, VGA
		dev(t, "0000:01:00.1", 0x10de, 0x22e8, 0x040300), // its HDMI audio
		dev(t, "0000:03:00.0", 0x1a03, 0x2000, 0x030000), // ASPEED BMC VGA
		dev(t, "0000:21:00.0", 0x10de, 0x2330, 0x030200), // H100, 3D controller
		dev(t, "0000:41:00.0", 0x1002, 0x74a1, 0x038000), // MI300X, display controller
		dev(t, "0000:61:00.0", 0x1002, 0x744c, 0x030000), // Radeon RX 7900, VGA
		dev(t, "0000:61:00.1", 0x1002, 0xab30, 0x040300), // its HDMI audio
		dev(t, "0000:62:00.0", 0x10de, 0x22a3, 0x068000), // NVSwitch
		dev(t, "0000:81:00.0", 0x8086, 0x10d3, 0x020000), // NIC
		dev(t, "0000:82:00.0", 0x8086, 0x10d3, 0x020000), // NIC
		dev(t, "0000:c1:00.0", 0x10de, 0x2330, 0x030200), // SR-IOV PF
		vf,
	)
}

// gpuSummary renders GPUs as "address[+companion...]".
func gpuSummary(gpus []GPU) []string {
	var out []string
	for _, g := range gpus {
		s := g.Address.String()
		for _, f := range g.Functions {
			s += "+" + f.Address.String()
		}
		out = append(out, s)
	}
	return out
}

func TestGPUs(t *testing.T) {
	tests := []struct {
		name string
		sels string
		want []string
	}{
		{"default rule: NVIDIA and AMD display controllers that are not VFs", "", []string{
			"0000:01:00.0+0000:01:00.1",
			"0000:21:00.0",
			"0000:41:00.0",
			"0000:61:00.0+0000:61:00.1",
			"0000:c1:00.0",
		}},
		{"selectors pick among all devices: NICs", "8086:10d3", []string{"0000:81:00.0", "0000:82:00.0"}},
		{"selectors pick the BMC's VGA when asked", "0000:03:00.0", []string{"0000:03:00.0"}},
		{"selectors pick a VF", "0000:c1:01.2", []string{"0000:c1:01.2"}},
		{"a selected audio function takes the GPU as its companion", "10de:22e8", []string{"0000:01:00.1+0000:01:00.0"}},
		{"two functions of one slot both selected: neither is the other's companion", "10de:2bb1,10de:22e8",
			[]string{"0000:01:00.0", "0000:01:00.1"}},
		{"the same, by class", "class:0x0300,class:0x0403", []string{
			"0000:00:02.0", "0000:01:00.0", "0000:01:00.1", "0000:03:00.0", "0000:61:00.0", "0000:61:00.1",
		}},
		{"class selects every display controller", "class:0x03", []string{
			"0000:00:02.0",
			"0000:01:00.0+0000:01:00.1",
			"0000:03:00.0",
			"0000:21:00.0",
			"0000:41:00.0",
			"0000:61:00.0+0000:61:00.1",
			"0000:c1:00.0",
			"0000:c1:01.2",
		}},
		{"one address keeps its companion", "61:00.0", []string{"0000:61:00.0+0000:61:00.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := mixedHost(t)
			gpus, err := GPUs(tree, mustSelectors(t, tt.sels))
			if err != nil {
				t.Fatalf("GPUs(%q): %v", tt.sels, err)
			}
			if got := gpuSummary(gpus); !slices.Equal(got, tt.want) {
				t.Errorf("GPUs(%q):\n got %v\nwant %v", tt.sels, got, tt.want)
			}
			for _, g := range gpus {
				if g.Device != tree.Lookup(g.Address) {
					t.Errorf("GPU %s is not the tree's device", g.Address)
				}
			}
		})
	}
}

func TestGPUsErrors(t *testing.T) {
	tree := mixedHost(t)
	_, err := GPUs(tree, mustSelectors(t, "10de:ffff"))
	if err == nil || !strings.Contains(err.Error(), "10de:ffff matches no PCI device") ||
		!strings.Contains(err.Error(), "10de:2bb1") || !strings.Contains(err.Error(), "8086:10d3") {
		t.Errorf("GPUs(10de:ffff) error %v; want one naming the selector and the ids there are", err)
	}
	if gpus, err := GPUs(tree, mustSelectors(t, "count:14")); err == nil {
		t.Errorf("GPUs(count:14) of 13 devices = %v, want an error", gpuSummary(gpus))
	}
	// No GPU is not an error.
	gpus, err := GPUs(newTree(dev(t, "0000:03:00.0", 0x1a03, 0x2000, 0x030000)), nil)
	if err != nil || len(gpus) != 0 {
		t.Errorf("GPUs of a host with only a BMC VGA = %v, %v; want none", gpuSummary(gpus), err)
	}
	gpus, err = GPUs(newTree(), nil)
	if err != nil || len(gpus) != 0 {
		t.Errorf("GPUs of an empty tree = %v, %v; want none", gpuSummary(gpus), err)
	}
}

func TestIsDefaultGPU(t *testing.T) {
	pf := mustAddr(t, "0000:c1:00.0")
	tests := []struct {
		vendor uint16
		class  uint32
		vf     bool
		want   bool
	}{
		{0x10de, 0x030000, false, true},
		{0x10de, 0x030200, false, true},
		{0x10de, 0x038000, false, true},
		{0x1002, 0x030000, false, true},
		{0x1002, 0x038000, false, true},
		{0x10de, 0x030200, true, false}, // a VF
		{0x1002, 0x038000, true, false},
		{0x10de, 0x040300, false, false}, // audio
		{0x10de, 0x068000, false, false}, // NVSwitch
		{0x10de, 0x060400, false, false}, // bridge
		{0x1a03, 0x030000, false, false}, // ASPEED
		{0x102b, 0x030000, false, false}, // Matrox
		{0x8086, 0x030000, false, false}, // Intel
		{0x1022, 0x030000, false, false}, // AMD's other vendor id (CPUs, chipsets)
	}
	for _, tt := range tests {
		d := &Device{VendorID: tt.vendor, Class: tt.class}
		if tt.vf {
			d.PhysFn = &pf
		}
		if got := IsDefaultGPU(d); got != tt.want {
			t.Errorf("IsDefaultGPU(%04x class %06x, VF %v) = %v, want %v", tt.vendor, tt.class, tt.vf, got, tt.want)
		}
	}
}

func TestTreeLookupSlotGroup(t *testing.T) {
	a := dev(t, "0000:01:00.0", 0x10de, 0x2bb1, 0x030000)
	b := dev(t, "0000:01:00.1", 0x10de, 0x22e8, 0x040300)
	c := dev(t, "0000:01:00.3", 0x10de, 0x1ad9, 0x0c0330) // a USB-C controller, .2 missing
	d := dev(t, "0000:01:01.0", 0x10de, 0x2bb1, 0x030000) // next slot
	e := dev(t, "0001:01:00.1", 0x10de, 0x22e8, 0x040300) // same bus and slot, other domain
	a.IOMMUGroup, b.IOMMUGroup, c.IOMMUGroup, d.IOMMUGroup = 7, 7, 7, 8
	tree := newTree(e, d, c, b, a)

	if got := tree.Lookup(mustAddr(t, "0000:01:00.3")); got != c {
		t.Errorf("Lookup(0000:01:00.3) = %v", got)
	}
	if got := tree.Lookup(mustAddr(t, "0000:01:00.2")); got != nil {
		t.Errorf("Lookup(0000:01:00.2) = %v, want nil", got)
	}
	for from, want := range map[string][]string{
		"0000:01:00.0": {"0000:01:00.0", "0000:01:00.1", "0000:01:00.3"},
		"0000:01:00.3": {"0000:01:00.0", "0000:01:00.1", "0000:01:00.3"},
		"0000:01:00.2": {"0000:01:00.0", "0000:01:00.1", "0000:01:00.3"},
		"0000:01:01.0": {"0000:01:01.0"},
		"0001:01:00.0": {"0001:01:00.1"},
		"0000:02:00.0": nil,
	} {
		if got := addrs(tree.Slot(mustAddr(t, from))); !slices.Equal(got, want) {
			t.Errorf("Slot(%s) = %v, want %v", from, got, want)
		}
	}
	for g, want := range map[int][]string{
		7:  {"0000:01:00.0", "0000:01:00.1", "0000:01:00.3"},
		8:  {"0000:01:01.0"},
		9:  nil,
		-1: nil, // devices without a group are not a group
	} {
		if got := addrs(tree.Group(g)); !slices.Equal(got, want) {
			t.Errorf("Group(%d) = %v, want %v", g, got, want)
		}
	}
}

func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{
		"numa:0", "group:12", "count:4", "count:0", "0000:81:00.0", "81:00.0", "10de:2bb1",
		"class:0x03", "class:0x030000", "class:", ":", "", "numa:-1", "10000:01:00.0",
		"0000:81:00", "81:00", "GPU4", "gpu:4", "mapping:pro6000", "00000000:81:00.0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector(s)
		if err != nil {
			return
		}
		if sel.String() != strings.TrimSpace(s) {
			t.Fatalf("ParseSelector(%q).String() = %q", s, sel.String())
		}
		if sel.kind == byCount && sel.n < 1 || sel.n < 0 {
			t.Fatalf("ParseSelector(%q) = %+v", s, sel)
		}
		if sel.kind == byClass && (sel.classBits != 8 && sel.classBits != 16 && sel.classBits != 24 || sel.class>>sel.classBits != 0) {
			t.Fatalf("ParseSelector(%q) = %+v", s, sel)
		}
		// Matching never panics, whatever the device.
		d := &Device{Class: 0xffffff, NUMANode: -1, IOMMUGroup: -1}
		_ = sel.matches(d)
		// A list of the same selector twice parses to the same selector twice.
		if !strings.Contains(s, ",") {
			sels, err := ParseSelectors(s + "," + s)
			if err != nil || len(sels) != 2 || sels[0] != sel || sels[1] != sel {
				t.Fatalf("ParseSelectors(%q) = %+v, %v", s+","+s, sels, err)
			}
		}
	})
}

// numaHost is eightPlusTwo with the first GPU's audio function and a NIC on each of
// nodes 0 and 1.
func numaHost(t testing.TB) *Tree {
	devs := eightPlusTwo(t)
	audio := dev(t, "0000:01:00.1", 0x10de, 0x22e8, 0x040300)
	audio.NUMANode, audio.IOMMUGroup = 0, 10
	nic0 := dev(t, "0000:05:00.0", 0x8086, 0x10d3, 0x020000)
	nic0.NUMANode = 0
	nic1 := dev(t, "0000:85:00.0", 0x8086, 0x10d3, 0x020000)
	nic1.NUMANode = 1
	return newTree(append(devs, audio, nic0, nic1)...)
}

// numa:, group: and count: narrow the devices the other selectors (or the default rule)
// picked; count: packs what is left after the others.
func TestGPUsNarrowing(t *testing.T) {
	tests := []struct {
		sels string
		want []string
	}{
		{"numa:1", []string{"0000:81:00.0", "0000:91:00.0", "0000:a1:00.0", "0000:b1:00.0"}},
		{"numa:0", []string{"0000:01:00.0+0000:01:00.1", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0"}},
		{"numa:2", []string{"0001:01:00.0", "0001:02:00.0"}},
		{"group:22", []string{"0000:a1:00.0"}},
		{"count:2", []string{"0000:01:00.0+0000:01:00.1", "0000:11:00.0"}},
		{"count:6", []string{
			"0000:01:00.0+0000:01:00.1", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0", "0000:81:00.0", "0000:91:00.0",
		}},
		{"numa:1,count:2", []string{"0000:81:00.0", "0000:91:00.0"}},
		{"count:2,numa:1", []string{"0000:81:00.0", "0000:91:00.0"}},
		{"numa:1,group:21", []string{"0000:91:00.0"}},
		// Selectors of one kind add up; kinds narrow each other.
		{"numa:0,numa:2", []string{"0000:01:00.0+0000:01:00.1", "0000:11:00.0", "0000:21:00.0", "0000:31:00.0", "0001:01:00.0", "0001:02:00.0"}},
		{"group:21,group:22", []string{"0000:91:00.0", "0000:a1:00.0"}},
		{"numa:0,numa:1,group:21", []string{"0000:91:00.0"}},
		{"8086:10d3", []string{"0000:05:00.0", "0000:85:00.0"}},
		{"8086:10d3,numa:0", []string{"0000:05:00.0"}},
		{"numa:1,8086:10d3", []string{"0000:85:00.0"}},
		{"8086:10d3,count:1", []string{"0000:05:00.0"}},
		{"0000:b1:00.0,0000:01:00.0,numa:1", []string{"0000:b1:00.0"}},
		// The audio function, named, is narrowed like any device.
		{"10de:22e8,numa:0", []string{"0000:01:00.1+0000:01:00.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.sels, func(t *testing.T) {
			gpus, err := GPUs(numaHost(t), mustSelectors(t, tt.sels))
			if err != nil {
				t.Fatalf("GPUs(%s): %v", tt.sels, err)
			}
			if got := gpuSummary(gpus); !slices.Equal(got, tt.want) {
				t.Errorf("GPUs(%s):\n got %v\nwant %v", tt.sels, got, tt.want)
			}
		})
	}

	errs := []struct {
		sels string
		want []string
	}{
		{"numa:3", []string{"selector numa:3 matches no GPU", "the 10 GPUs have NUMA nodes 0, 1, 2"}},
		{"count:11", []string{"count:11", "more than the 10 GPUs"}},
		{"numa:2,count:3", []string{"count:3", "more than the 2 GPUs"}},
		{"8086:10d3,numa:2", []string{"selector numa:2 matches no GPU", "the 2 GPUs have NUMA nodes 0, 1"}},
		{"10de:ffff,numa:0", []string{"selector 10de:ffff matches no PCI device"}},
	}
	for _, tt := range errs {
		gpus, err := GPUs(numaHost(t), mustSelectors(t, tt.sels))
		if err == nil {
			t.Errorf("GPUs(%s) = %v, want an error", tt.sels, gpuSummary(gpus))
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("GPUs(%s) error %q does not say %q", tt.sels, err, w)
			}
		}
	}
}

func TestSelectorNarrows(t *testing.T) {
	for s, want := range map[string]bool{
		"numa:0": true, "group:3": true, "count:2": true,
		"0000:81:00.0": false, "81:00.0": false, "10de:2bb1": false, "class:0x03": false,
		"0000:81:00": false, "GPU4": false, "gpu:4": false, "mapping:pro6000": false,
	} {
		if got := mustSelectors(t, s)[0].Narrows(); got != want {
			t.Errorf("%s.Narrows() = %v, want %v", s, got, want)
		}
	}
}

// count: fills known NUMA nodes before devices whose node the kernel does not know.
func TestSelectCountPrefersKnownNodes(t *testing.T) {
	cands := []*Device{
		gpu(t, "0000:00:10.0", -1, -1), gpu(t, "0000:00:11.0", -1, -1), gpu(t, "0000:00:12.0", -1, -1),
		gpu(t, "0000:41:00.0", 1, 5), gpu(t, "0000:42:00.0", 1, 6),
	}
	for _, c := range []struct {
		sel  string
		want []string
	}{
		{"count:2", []string{"0000:41:00.0", "0000:42:00.0"}},
		{"count:3", []string{"0000:00:10.0", "0000:00:11.0", "0000:00:12.0"}},
		{"count:4", []string{"0000:00:10.0", "0000:00:11.0", "0000:41:00.0", "0000:42:00.0"}},
	} {
		got, err := Select(cands, mustSelectors(t, c.sel), "GPU")
		if err != nil {
			t.Fatal(err)
		}
		if g := addrs(got); !slices.Equal(g, c.want) {
			t.Errorf("Select(%s) = %v, want %v", c.sel, g, c.want)
		}
	}
}

// An SR-IOV virtual function in a GPU's slot is a device of its own, not a companion.
func TestGPUsVirtualFunctionIsNoCompanion(t *testing.T) {
	pf := gpu(t, "0000:41:00.0", 0, 7)
	vf := gpu(t, "0000:41:00.4", 0, 8)
	vf.PhysFn = &pf.Address
	audio := dev(t, "0000:41:00.1", 0x10de, 0x22e8, 0x040300)
	gpus, err := GPUs(newTree(pf, vf, audio), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := gpuSummary(gpus); !slices.Equal(got, []string{"0000:41:00.0+0000:41:00.1"}) {
		t.Errorf("GPUs = %v, want the PF with only its audio function", got)
	}
}
