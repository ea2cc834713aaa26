package pci

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// resLine formats one line of a sysfs "resource" file as the kernel does.
func resLine(start, end, flags uint64) string {
	return fmt.Sprintf("0x%016x 0x%016x 0x%016x\n", start, end, flags)
}

var zeroLine = resLine(0, 0, 0)

// gpuResource is the resource file of a data-centre GPU: 13 lines (BAR0–5, ROM, and the
// six SR-IOV BARs, the first of which is set to check that it is not taken as a BAR).
var gpuResource = resLine(0xf8000000, 0xfbffffff, 0x40200) + // BAR0: 64 MiB, 32-bit
	resLine(0x380000000000, 0x381fffffffff, 0x14220c) + // BAR1: 128 GiB, 64-bit prefetchable
	zeroLine + // upper half of BAR1
	resLine(0x382000000000, 0x382001ffffff, 0x14220c) + // BAR3: 32 MiB, 64-bit prefetchable
	zeroLine + // upper half of BAR3
	resLine(0xf000, 0xf07f, 0x40101) + // BAR5: I/O ports
	resLine(0xfc000000, 0xfc07ffff, 0x46200) + // ROM: 512 KiB
	resLine(0x383000000000, 0x3830ffffffff, 0x14220c) + // VF BAR0
	strings.Repeat(zeroLine, 5)

var gpuBARs = []BAR{
	{Index: 0, Start: 0xf8000000, Size: 64 << 20, Flags: 0x40200},
	{Index: 1, Start: 0x380000000000, Size: 128 << 30, Flags: 0x14220c, Is64Bit: true, Prefetchable: true},
	{Index: 3, Start: 0x382000000000, Size: 32 << 20, Flags: 0x14220c, Is64Bit: true, Prefetchable: true},
	{Index: 5, Start: 0xf000, Size: 0x80, Flags: 0x40101, IO: true},
	{Index: 6, Start: 0xfc000000, Size: 512 << 10, Flags: 0x46200, Prefetchable: true},
}

// bridgeResource is a switch upstream port's: 17 lines, BAR0 set, the four bridge
// windows (lines 14–17) set and not BARs.
var bridgeResource = resLine(0xfc400000, 0xfc43ffff, 0x40200) +
	strings.Repeat(zeroLine, 12) +
	resLine(0xe000, 0xefff, 0x101) + // I/O window
	resLine(0xf8000000, 0xfc3fffff, 0x200) + // memory window
	resLine(0x380000000000, 0x3830ffffffff, 0x102201) + // prefetchable window
	zeroLine

func TestParseResource(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []BAR
	}{
		{"GPU endpoint, 13 lines", gpuResource, gpuBARs},
		{"GPU endpoint, no trailing newline", strings.TrimSuffix(gpuResource, "\n"), gpuBARs},
		{"GPU endpoint, 7 lines (kernel without SR-IOV)", strings.Join(strings.SplitAfter(gpuResource, "\n")[:7], ""), gpuBARs},
		{"switch port, 17 lines", bridgeResource, []BAR{{Index: 0, Start: 0xfc400000, Size: 256 << 10, Flags: 0x40200}}},
		{"root port, 17 lines, nothing but windows", strings.Repeat(zeroLine, 13) +
			resLine(0xe000, 0xefff, 0x101) + resLine(0xf8000000, 0xfc3fffff, 0x200) +
			resLine(0x380000000000, 0x3830ffffffff, 0x102201) + zeroLine, nil},
		{"all zero", strings.Repeat(zeroLine, 13), nil},
		{
			"unassigned BAR: start 0, end size-1, IORESOURCE_UNSET",
			zeroLine + resLine(0, 0x1fffffffff, 0x14220c|resUnset) + strings.Repeat(zeroLine, 11),
			[]BAR{{Index: 1, Start: 0, Size: 128 << 30, Flags: 0x14220c | resUnset, Is64Bit: true, Prefetchable: true, Unassigned: true}},
		},
		{
			"unassigned BAR: start 0 without the UNSET flag",
			resLine(0, 0x3ffffff, 0x40200) + strings.Repeat(zeroLine, 12),
			[]BAR{{Index: 0, Start: 0, Size: 64 << 20, Flags: 0x40200, Unassigned: true}},
		},
		{
			"unassigned I/O BAR",
			strings.Repeat(zeroLine, 5) + resLine(0, 0x7f, 0x40101) + strings.Repeat(zeroLine, 7),
			[]BAR{{Index: 5, Size: 0x80, Flags: 0x40101, IO: true, Unassigned: true}},
		},
		{
			"UNSET flag with an address",
			resLine(0xf8000000, 0xfbffffff, 0x40200|resUnset) + strings.Repeat(zeroLine, 12),
			[]BAR{{Index: 0, Start: 0xf8000000, Size: 64 << 20, Flags: 0x40200 | resUnset, Unassigned: true}},
		},
		{
			"64-bit BAR exposed non-prefetchable",
			resLine(0x384000000000, 0x384000ffffff, 0x140204) + strings.Repeat(zeroLine, 12),
			[]BAR{{Index: 0, Start: 0x384000000000, Size: 16 << 20, Flags: 0x140204, Is64Bit: true}},
		},
		{
			"disabled ROM without an address is not unassigned",
			strings.Repeat(zeroLine, 6) + resLine(0, 0x7ffff, 0x46200|resDisabled) + strings.Repeat(zeroLine, 6),
			[]BAR{{Index: 6, Size: 512 << 10, Flags: 0x46200 | resDisabled, Prefetchable: true}},
		},
		{
			"disabled and unset ROM is not unassigned",
			strings.Repeat(zeroLine, 6) + resLine(0, 0x7ffff, 0x46200|resDisabled|resUnset) + strings.Repeat(zeroLine, 6),
			[]BAR{{Index: 6, Size: 512 << 10, Flags: 0x46200 | resDisabled | resUnset, Prefetchable: true}},
		},
		{
			"enabled ROM without an address is unassigned",
			strings.Repeat(zeroLine, 6) + resLine(0, 0x7ffff, 0x46200) + strings.Repeat(zeroLine, 6),
			[]BAR{{Index: 6, Size: 512 << 10, Flags: 0x46200, Prefetchable: true, Unassigned: true}},
		},
		{
			"a BAR that is not the ROM keeps Unassigned with the DISABLED flag",
			resLine(0, 0x3ffffff, 0x40200|resDisabled) + strings.Repeat(zeroLine, 12),
			[]BAR{{Index: 0, Size: 64 << 20, Flags: 0x40200 | resDisabled, Unassigned: true}},
		},
		{
			"flags without a range",
			resLine(0, 0, 0x40200) + strings.Repeat(zeroLine, 12),
			[]BAR{{Index: 0, Flags: 0x40200, Unassigned: true}},
		},
		{
			"end before start gives no size",
			resLine(0xf8000000, 0xf7ffffff, 0x40200) + strings.Repeat(zeroLine, 12),
			[]BAR{{Index: 0, Start: 0xf8000000, Flags: 0x40200}},
		},
		{
			"tabs, extra spaces and CRLF",
			"0xf8000000\t0xfbffffff  0x40200\r\n" + strings.Repeat(zeroLine, 12),
			[]BAR{{Index: 0, Start: 0xf8000000, Size: 64 << 20, Flags: 0x40200}},
		},
		{"empty input", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResource(tt.in)
			if err != nil {
				t.Fatalf("ParseResource: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseResource:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseResourceErrors(t *testing.T) {
	gpuLines := strings.SplitAfter(gpuResource, "\n")
	tests := []struct {
		name    string
		in      string
		want    []BAR  // what was read before the bad line
		errWant string // part of the error
	}{
		{
			"truncated in the middle of line 4",
			strings.Join(gpuLines[:3], "") + "0x0000382000000000 0x00000",
			gpuBARs[:2], "line 4",
		},
		{
			"truncated in the middle of the first number",
			"0x00000000f8",
			nil, "line 1",
		},
		{
			"truncated after a space on line 7",
			strings.Join(gpuLines[:6], "") + "0x00000000fc000000 ",
			gpuBARs[:4], "line 7",
		},
		{
			"truncated inside the last number of line 2",
			gpuLines[0] + "0x0000380000000000 0x0000381fffffffff 0x",
			gpuBARs[:1], "line 2",
		},
		{
			"empty line in the middle",
			gpuLines[0] + "\n" + strings.Join(gpuLines[1:], ""),
			gpuBARs[:1], "line 2 is empty",
		},
		{
			"a lone newline",
			"\n",
			nil, "line 1 is empty",
		},
		{
			"blank first line",
			"\n" + gpuResource,
			nil, "line 1 is empty",
		},
		{
			"four fields",
			"0x0 0x0 0x0 0x0\n",
			nil, "want 3 fields, got 4",
		},
		{
			"garbage",
			"this is not a resource file\n",
			nil, "line 1",
		},
		{
			"missing 0x prefix",
			"00000000f8000000 00000000fbffffff 0000000000040200\n",
			nil, `"00000000f8000000" is not 0x-prefixed hex`,
		},
		{
			"upper-case 0X prefix",
			gpuLines[0] + "0X0 0X0 0X0\n",
			gpuBARs[:1], "line 2",
		},
		{
			"missing 0x prefix on the flags",
			"0x00000000f8000000 0x00000000fbffffff 40200\n",
			nil, `"40200" is not 0x-prefixed hex`,
		},
		{
			"not hex after 0x",
			"0x00000000f8000000 0xzz 0x40200\n",
			nil, `"0xzz" is not 0x-prefixed hex`,
		},
		{
			"bare 0x",
			"0x 0x 0x\n",
			nil, "line 1",
		},
		{
			"negative",
			"0x0 -0x1 0x200\n",
			nil, "line 1",
		},
		{
			"more than 64 bits",
			"0x10000000000000000 0x0 0x200\n",
			nil, "line 1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResource(tt.in)
			if err == nil {
				t.Fatalf("ParseResource = %+v, nil; want an error", got)
			}
			if !strings.Contains(err.Error(), tt.errWant) {
				t.Errorf("ParseResource error %q does not say %q", err, tt.errWant)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseResource returned with its error:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// Lines past the ROM are never read: a malformed SR-IOV or bridge-window line does not
// spoil the BARs.
func TestParseResourceIgnoresLinesPastROM(t *testing.T) {
	lines := strings.SplitAfter(gpuResource, "\n")
	in := strings.Join(lines[:7], "") + "garbage\n0x1\n"
	got, err := ParseResource(in)
	if err != nil {
		t.Fatalf("ParseResource: %v", err)
	}
	if !slices.Equal(got, gpuBARs) {
		t.Errorf("ParseResource:\n got %+v\nwant %+v", got, gpuBARs)
	}
}

func TestBARName(t *testing.T) {
	for i, want := range []string{"BAR0", "BAR1", "BAR2", "BAR3", "BAR4", "BAR5", "ROM"} {
		if got := (BAR{Index: i}).Name(); got != want {
			t.Errorf("BAR{Index: %d}.Name() = %q, want %q", i, got, want)
		}
	}
}

func FuzzParseResource(f *testing.F) {
	f.Add(gpuResource)
	f.Add(bridgeResource)
	f.Add("")
	f.Add("\n\n")
	f.Add("0x0 0x0 0x0")
	f.Add(resLine(0, 0x1fffffffff, 0x14220c|resUnset))
	f.Add(resLine(0xffffffffffffffff, 0xffffffffffffffff, 0xffffffffffffffff))
	f.Add("0x1 0x0 0x200\n0x 0x 0x\n")
	f.Fuzz(func(t *testing.T, s string) {
		bars, err := ParseResource(s)
		prev := -1
		for _, b := range bars {
			if b.Index < 0 || b.Index > 6 {
				t.Fatalf("ParseResource(%q): %s has index %d", s, b.Name(), b.Index)
			}
			if b.Index <= prev {
				t.Fatalf("ParseResource(%q): indexes out of order: %+v", s, bars)
			}
			prev = b.Index
			if b.IO != (b.Flags&resIO != 0) || b.Is64Bit != (b.Flags&resMem64 != 0) || b.Prefetchable != (b.Flags&resPrefetch != 0) {
				t.Fatalf("ParseResource(%q): %+v does not match its flags", s, b)
			}
		}
		if err == nil {
			return
		}
		// The error names the bad line, and what came back is what the lines before it give.
		var n int
		if _, serr := fmt.Sscanf(err.Error(), "resource line %d", &n); serr != nil || n < 1 || n > 7 {
			t.Fatalf("ParseResource(%q) error %q does not name a line 1–7", s, err)
		}
		prefix := ""
		if n > 1 {
			prefix = strings.Join(strings.Split(s, "\n")[:n-1], "\n") + "\n"
		}
		before, perr := ParseResource(prefix)
		if perr != nil {
			t.Fatalf("ParseResource(%q) failed at line %d, but the lines before it fail too: %v", s, n, perr)
		}
		if !slices.Equal(before, bars) {
			t.Fatalf("ParseResource(%q) failed at line %d returning %+v; the lines before it give %+v", s, n, bars, before)
		}
	})
}

// A root port's resource file from a real kernel (root port 0000:00:10.0 of
// testdata/vm/flat-vm.tar.gz, Debian's kernel under QEMU q35): 13 lines of its own, then its I/O, memory and
// prefetchable windows and an unused fourth.
func TestParseWindows(t *testing.T) {
	own := strings.Repeat("0x0000000000000000 0x0000000000000000 0x0000000000000000\n", 13)
	cases := []struct {
		name, text string
		want       []BAR
	}{
		{"root port", own + "0x0000000000004000 0x0000000000004fff 0x0000000000000100\n" +
			"0x00000000fe000000 0x00000000fe1fffff 0x0000000000000200\n" +
			"0x00000000fea00000 0x00000000febfffff 0x0000000000102201\n" +
			"0x0000000000000000 0x0000000000000000 0x0000000000000000\n", []BAR{
			{Index: 0, Start: 0x4000, Size: 0x1000, Flags: 0x100, IO: true},
			{Index: 1, Start: 0xfe000000, Size: 0x200000, Flags: 0x200},
			{Index: 2, Start: 0xfea00000, Size: 0x200000, Flags: 0x102201, Is64Bit: true, Prefetchable: true},
		}},
		{"no windows open", own + strings.Repeat("0x0000000000000000 0x0000000000000000 0x0000000000000000\n", 4), nil},
		{"an endpoint", own, nil},
		{"a kernel without SR-IOV", strings.Repeat("0x0000000000000000 0x0000000000000000 0x0000000000000000\n", 9) +
			"0x0000020000000000 0x00000221ffffffff 0x0000000000102201\n0x0000000000000000 0x0000000000000000 0x0000000000000000\n", []BAR{
			{Index: 2, Start: 0x20000000000, Size: 0x2200000000, Flags: 0x102201, Is64Bit: true, Prefetchable: true},
		}},
		{"garbage", own + "x\ny\nz\nw\n", nil},
	}
	for _, c := range cases {
		if got := ParseWindows(c.text); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
