package pci

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in   string
		want Address
		str  string // String() of the result
	}{
		{"0000:81:00.0", Address{0, 0x81, 0, 0}, "0000:81:00.0"},
		{"0000:00:00.0", Address{}, "0000:00:00.0"},
		{"81:00.0", Address{0, 0x81, 0, 0}, "0000:81:00.0"},
		{"c1:00.1", Address{0, 0xc1, 0, 1}, "0000:c1:00.1"},
		{"0000:E1:00.0", Address{0, 0xe1, 0, 0}, "0000:e1:00.0"},
		{"0000:e1:1F.7", Address{0, 0xe1, 0x1f, 7}, "0000:e1:1f.7"},
		{"ABCD:Ef:0a.3", Address{0xabcd, 0xef, 0x0a, 3}, "abcd:ef:0a.3"},
		{"0001:02:03.4", Address{1, 2, 3, 4}, "0001:02:03.4"},
		{"ffff:ff:1f.7", Address{0xffff, 0xff, 0x1f, 7}, "ffff:ff:1f.7"},
		// Intel VMD puts its devices in domains of 5 hex digits.
		{"10000:01:00.0", Address{0x10000, 1, 0, 0}, "10000:01:00.0"},
		{"10001:e1:00.0", Address{0x10001, 0xe1, 0, 0}, "10001:e1:00.0"},
		// Up to 8 domain digits are accepted; String writes the shortest of at least 4.
		{"00010000:01:00.0", Address{0x10000, 1, 0, 0}, "10000:01:00.0"},
		{"000000ab:01:00.0", Address{0xab, 1, 0, 0}, "00ab:01:00.0"},
		{"ffffffff:ff:1f.7", Address{0xffffffff, 0xff, 0x1f, 7}, "ffffffff:ff:1f.7"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAddress(tt.in)
			if err != nil {
				t.Fatalf("ParseAddress(%q) = %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseAddress(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.str {
				t.Errorf("ParseAddress(%q).String() = %q, want %q", tt.in, s, tt.str)
			}
			back, err := ParseAddress(got.String())
			if err != nil || back != got {
				t.Errorf("ParseAddress(%q) = %v, %v; want %v (round trip)", got.String(), back, err, got)
			}
		})
	}
}

func TestParseAddressRejects(t *testing.T) {
	tests := []struct {
		in  string
		why string // part of the error message
	}{
		{"", "wrong number of ':'"},
		{"garbage", "wrong number of ':'"},
		{"0000", "wrong number of ':'"},
		{"0000:00:00:00.0", "wrong number of ':'"},
		{"0000:81:00.0:", "wrong number of ':'"},
		{":0000:81:00.0", "wrong number of ':'"},
		{"0000::81:00.0", "wrong number of ':'"},
		// Domain digits.
		{"000:81:00.0", "4 to 8 hex digits"},
		{"0:81:00.0", "4 to 8 hex digits"},
		{":81:00.0", "4 to 8 hex digits"},
		{"000000000:81:00.0", "4 to 8 hex digits"},
		{"00g0:81:00.0", "domain is not hexadecimal"},
		{"+000:81:00.0", "domain is not hexadecimal"},
		{"-001:81:00.0", "domain is not hexadecimal"},
		{"0x00:81:00.0", "domain is not hexadecimal"},
		// Bus digits.
		{"0000:1:00.0", "bus must have 2 hex digits"},
		{"0000:081:00.0", "bus must have 2 hex digits"},
		{"1:00.0", "bus must have 2 hex digits"},
		{"0000::00.0", "bus must have 2 hex digits"},
		{"0000:g1:00.0", "bus is not hexadecimal"},
		{"0000:+1:00.0", "bus is not hexadecimal"},
		{"0000: 1:00.0", "bus is not hexadecimal"},
		// Slot and function.
		{"0000:81:00", "SS.F"},
		{"0000:81:0.0", "SS.F"},
		{"0000:81:000.0", "SS.F"},
		{"0000:81:00.", "SS.F"},
		{"0000:81:00.00", "SS.F"},
		{"0000:81:00.0.0", "SS.F"},
		{"0000:81:.0", "SS.F"},
		{"81:00-0", "SS.F"},
		{"0000:81:20.0", "slot must be 00 to 1f"},
		{"0000:81:ff.0", "slot must be 00 to 1f"},
		{"0000:81:zz.0", "slot must be 00 to 1f"},
		{"0000:81:+1.0", "slot must be 00 to 1f"},
		{"0000:81:00.8", "function must be 0 to 7"},
		{"0000:81:00.f", "function must be 0 to 7"},
		{"0000:81:00.x", "function must be 0 to 7"},
		{"0000:81:00.-", "function must be 0 to 7"},
		// Surrounding space is not trimmed: the caller passes exact names.
		{" 0000:81:00.0", "domain is not hexadecimal"},
		{"0000:81:00.0\n", "SS.F"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAddress(tt.in)
			if err == nil {
				t.Fatalf("ParseAddress(%q) = %v, want an error", tt.in, got)
			}
			if got != (Address{}) {
				t.Errorf("ParseAddress(%q) returned %#v with its error, want the zero Address", tt.in, got)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.why) {
				t.Errorf("ParseAddress(%q) error %q does not say %q", tt.in, msg, tt.why)
			}
			if !strings.Contains(msg, "0000:81:00.0") {
				t.Errorf("ParseAddress(%q) error %q shows no example of the right form", tt.in, msg)
			}
			if !strings.Contains(msg, strconv.Quote(tt.in)) {
				t.Errorf("ParseAddress(%q) error %q does not quote the input", tt.in, msg)
			}
		})
	}
}

func TestAddressSlot(t *testing.T) {
	a := Address{Domain: 0x10000, Bus: 0xe1, Device: 0x1f, Function: 5}
	want := Address{Domain: 0x10000, Bus: 0xe1, Device: 0x1f, Function: 0}
	if got := a.Slot(); got != want {
		t.Errorf("%v.Slot() = %v, want %v", a, got, want)
	}
	if a.Function != 5 {
		t.Errorf("Slot changed its receiver")
	}
}

func mustAddr(t testing.TB, s string) Address {
	t.Helper()
	a, err := ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAddressCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0000:81:00.0", "0000:81:00.0", 0},
		{"81:00.0", "0000:81:00.0", 0},
		{"0000:81:00.0", "0000:81:00.1", -1},
		{"0000:81:00.7", "0000:81:01.0", -1},
		{"0000:81:1f.7", "0000:82:00.0", -1},
		// Numeric, not textual: bus 0x09 sorts before bus 0x10, and "0a" before "10".
		{"0000:09:00.0", "0000:10:00.0", -1},
		{"0000:0a:00.0", "0000:10:00.0", -1},
		{"0000:10:00.0", "0000:09:00.0", 1},
		{"0000:00:09.0", "0000:00:10.0", -1},
		{"0000:00:0f.0", "0000:00:10.0", -1},
		{"0000:00:1f.0", "0000:00:02.0", 1},
		// Domain first: a high bus in domain 0 comes before a low bus in domain 1.
		{"0000:ff:1f.7", "0001:00:00.0", -1},
		{"0001:00:00.0", "0000:ff:1f.7", 1},
		// A 5-digit VMD domain sorts after every 4-digit one, though "10000" < "ffff" as text.
		{"ffff:00:00.0", "10000:00:00.0", -1},
		{"10000:00:00.0", "ffff:ff:1f.7", 1},
		{"1000:00:00.0", "10000:00:00.0", -1},
		{"ffffffff:ff:1f.7", "fffffffe:ff:1f.7", 1},
	}
	for _, tt := range tests {
		a, b := mustAddr(t, tt.a), mustAddr(t, tt.b)
		if got := a.Compare(b); got != tt.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := b.Compare(a); got != -tt.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

func TestAddressCompareSortsNumerically(t *testing.T) {
	in := []string{
		"10000:01:00.0", "0000:10:00.0", "0001:00:00.0", "0000:09:00.0",
		"0000:c1:00.1", "0000:c1:00.0", "0000:00:1f.7", "0000:00:02.0", "ffff:00:00.0",
	}
	want := []string{
		"0000:00:02.0", "0000:00:1f.7", "0000:09:00.0", "0000:10:00.0",
		"0000:c1:00.0", "0000:c1:00.1", "0001:00:00.0", "ffff:00:00.0", "10000:01:00.0",
	}
	var addrs []Address
	for _, s := range in {
		addrs = append(addrs, mustAddr(t, s))
	}
	slices.SortFunc(addrs, Address.Compare)
	var got []string
	for _, a := range addrs {
		got = append(got, a.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("sorted:\n got %v\nwant %v", got, want)
	}
}

func TestAddressJSON(t *testing.T) {
	type doc struct {
		GPU    Address            `json:"gpu"`
		Others []Address          `json:"others"`
		ByAddr map[Address]string `json:"by_addr"`
		Ptr    *Address           `json:"ptr"`
	}
	vmd := Address{Domain: 0x10000, Bus: 1}
	in := doc{
		GPU:    Address{Bus: 0x81},
		Others: []Address{{Bus: 0xc1, Function: 1}, vmd},
		ByAddr: map[Address]string{{Bus: 0xe1}: "gpu"},
		Ptr:    &vmd,
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"gpu":"0000:81:00.0","others":["0000:c1:00.1","10000:01:00.0"],"by_addr":{"0000:e1:00.0":"gpu"},"ptr":"10000:01:00.0"}`
	if string(b) != want {
		t.Errorf("json.Marshal:\n got %s\nwant %s", b, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", b, err)
	}
	if out.GPU != in.GPU || !slices.Equal(out.Others, in.Others) || out.ByAddr[Address{Bus: 0xe1}] != "gpu" ||
		out.Ptr == nil || *out.Ptr != vmd {
		t.Errorf("json round trip: got %+v, want %+v", out, in)
	}

	// Unmarshal takes every form ParseAddress takes.
	for in, want := range map[string]Address{
		`"81:00.0"`:       {Bus: 0x81},
		`"0000:E1:00.1"`:  {Bus: 0xe1, Function: 1},
		`"10000:01:00.0"`: vmd,
	} {
		var a Address
		if err := json.Unmarshal([]byte(in), &a); err != nil || a != want {
			t.Errorf("json.Unmarshal(%s) = %v, %v; want %v", in, a, err, want)
		}
	}
	// And refuses what it refuses, leaving the value alone.
	for _, in := range []string{`"0000:81:00.8"`, `""`, `"garbage"`, `129`, `{"Bus":129}`} {
		a := Address{Bus: 7}
		if err := json.Unmarshal([]byte(in), &a); err == nil {
			t.Errorf("json.Unmarshal(%s) = %v, want an error", in, a)
		}
		if a != (Address{Bus: 7}) {
			t.Errorf("json.Unmarshal(%s) changed the value to %v on error", in, a)
		}
	}
}

func TestHostBridgeText(t *testing.T) {
	tests := []struct {
		hb   HostBridge
		want string
	}{
		{HostBridge{}, "pci0000:00"},
		{HostBridge{Domain: 0, Bus: 0x80}, "pci0000:80"},
		{HostBridge{Domain: 0x10000, Bus: 0}, "pci10000:00"},
		{HostBridge{Domain: 0xabcd, Bus: 0x0e}, "pciabcd:0e"},
	}
	for _, tt := range tests {
		if got := tt.hb.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.hb, got, tt.want)
		}
		b, err := json.Marshal(tt.hb)
		if err != nil || string(b) != `"`+tt.want+`"` {
			t.Errorf("json.Marshal(%#v) = %s, %v; want %q", tt.hb, b, err, tt.want)
		}
		got, ok := parseHostBridge(tt.want)
		if !ok || got != tt.hb {
			t.Errorf("parseHostBridge(%q) = %v, %v; want %v (round trip)", tt.want, got, ok, tt.hb)
		}
	}
}

func TestParseHostBridge(t *testing.T) {
	tests := []struct {
		in   string
		want HostBridge
		ok   bool
	}{
		{"pci0000:00", HostBridge{0, 0}, true},
		{"pci0000:80", HostBridge{0, 0x80}, true},
		{"pci0001:e0", HostBridge{1, 0xe0}, true},
		{"pci10000:00", HostBridge{0x10000, 0}, true}, // VMD
		{"pci0000c0de:3a", HostBridge{0xc0de, 0x3a}, true},
		{"pciffffffff:ff", HostBridge{0xffffffff, 0xff}, true},
		{"", HostBridge{}, false},
		{"pci", HostBridge{}, false},
		{"pci:", HostBridge{}, false},
		{"pci0000", HostBridge{}, false},
		{"pci0000:", HostBridge{}, false},
		{"pci:00", HostBridge{}, false},
		{"pci000:00", HostBridge{}, false},
		{"pci000000000:00", HostBridge{}, false},
		{"pci0000:0", HostBridge{}, false},
		{"pci0000:000", HostBridge{}, false},
		{"pci0000:00:00", HostBridge{}, false},
		{"pci0000:gg", HostBridge{}, false},
		{"pci00g0:00", HostBridge{}, false},
		{"pci+000:00", HostBridge{}, false},
		{"pci0000:+0", HostBridge{}, false},
		{"PCI0000:00", HostBridge{}, false},
		{"0000:00", HostBridge{}, false},
		{"pci_bus", HostBridge{}, false},
		{"0000:00:01.0", HostBridge{}, false},
		{"xpci0000:00", HostBridge{}, false},
		{"pnp0", HostBridge{}, false},
		{"platform", HostBridge{}, false},
		{"LNXSYSTM:00", HostBridge{}, false},
	}
	for _, tt := range tests {
		got, ok := parseHostBridge(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseHostBridge(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestIsSysfsAddress(t *testing.T) {
	tests := []struct {
		in   string
		want Address
		ok   bool
	}{
		{"0000:81:00.0", Address{0, 0x81, 0, 0}, true},
		{"0000:00:1f.7", Address{0, 0, 0x1f, 7}, true},
		{"10000:01:00.0", Address{0x10000, 1, 0, 0}, true},
		{"abcd:ef:0a.3", Address{0xabcd, 0xef, 0x0a, 3}, true},
		// ParseAddress takes these, but sysfs never writes them.
		{"81:00.0", Address{}, false},
		{"0000:E1:00.0", Address{}, false},
		{"ABCD:ef:0a.3", Address{}, false},
		{"0000:e1:0A.0", Address{}, false},
		{"00000000:81:00.0", Address{}, false},
		{"00010000:01:00.0", Address{}, false},
		{"010000:01:00.0", Address{}, false},
		// Not addresses at all.
		{"", Address{}, false},
		{"pci0000:00", Address{}, false},
		{"0000:81:00.8", Address{}, false},
		{"0000:81:20.0", Address{}, false},
		{"0000:81:00.0.bak", Address{}, false},
		{"driver", Address{}, false},
		{"pci_bus", Address{}, false},
		{"0000:00", Address{}, false},
		{"0000:81:00.0 ", Address{}, false},
	}
	for _, tt := range tests {
		got, ok := isSysfsAddress(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("isSysfsAddress(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{
		"0000:81:00.0", "81:00.0", "0000:E1:00.0", "10000:01:00.0", "ffffffff:ff:1f.7",
		"0000:81:20.0", "0000:81:00.8", "", ":", "::", "0000:00:00:00.0", "00000000:00:00.0",
		"+000:00:00.0", "0000:-1:00.0", "0000:00:0_.0", "0000:81:00.\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			if a != (Address{}) {
				t.Fatalf("ParseAddress(%q) = %v with error %v", s, a, err)
			}
			if !strings.Contains(err.Error(), "invalid PCI address") {
				t.Fatalf("ParseAddress(%q) error %q", s, err)
			}
			return
		}
		if a.Device > 0x1f || a.Function > 7 {
			t.Fatalf("ParseAddress(%q) = %#v: slot or function out of range", s, a)
		}
		str := a.String()
		b, err := ParseAddress(str)
		if err != nil {
			t.Fatalf("ParseAddress(%q) = %v, but its String %q does not parse: %v", s, a, str, err)
		}
		if b != a {
			t.Fatalf("ParseAddress(%q) = %#v, String %q parses to %#v", s, a, str, b)
		}
		if c, ok := isSysfsAddress(str); !ok || c != a {
			t.Fatalf("isSysfsAddress(%q) = %v, %v; want %v, true", str, c, ok, a)
		}
		text, err := a.MarshalText()
		if err != nil || string(text) != str {
			t.Fatalf("%#v.MarshalText() = %q, %v; want %q", a, text, err, str)
		}
		var u Address
		if err := u.UnmarshalText([]byte(s)); err != nil || u != a {
			t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", s, u, err, a)
		}
	})
}
