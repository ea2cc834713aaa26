package cpuset

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    string
		n       int
		wantErr bool
	}{
		{"0-27,56-83", "0-27,56-83", 56, false},
		{"0-63\n", "0-63", 64, false},
		{"", "", 0, false},
		{"5", "5", 1, false},
		{"3,1,2", "1-3", 3, false},
		{"0-3,2-5", "0-5", 6, false},
		{"8-15,24-31", "8-15,24-31", 16, false},
		{"1-", "", 0, true},
		{"-1", "", 0, true},
		{"a-b", "", 0, true},
		{"3-1", "", 0, true},
		{"0,,1", "", 0, true},
		{"+1", "", 0, true},
		{"0-4294967295", "", 0, true},
		{"99999999999999999999", "", 0, true},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if c.wantErr {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got.String() != c.want || got.Len() != c.n {
			t.Errorf("Parse(%q) = %q (%d CPUs), want %q (%d)", c.in, got, got.Len(), c.want, c.n)
		}
	}
}

func TestContainsAndCPUs(t *testing.T) {
	s, err := Parse("1,63-65,128")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 63, 64, 65, 128}; !reflect.DeepEqual(s.CPUs(), want) {
		t.Errorf("CPUs = %v, want %v", s.CPUs(), want)
	}
	for c, want := range map[int]bool{0: false, 1: true, 64: true, 66: false, 128: true, 129: false, 100000: false, -1: false} {
		if s.Contains(c) != want {
			t.Errorf("Contains(%d) = %v", c, !want)
		}
	}
	o, _ := Parse("128,1,63-65")
	if !s.Equal(o) {
		t.Error("Equal: same CPUs in another order differ")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-27,56-83", "", "0", "1-", "0-3,8-11\n", "65535", "0-65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		if err != nil {
			return
		}
		// Printing and parsing again must give the same set.
		again, err := Parse(set.String())
		if err != nil {
			t.Fatalf("Parse(%q) ok, but its String %q does not parse: %v", s, set.String(), err)
		}
		if !again.Equal(set) || again.Len() != set.Len() {
			t.Fatalf("round trip of %q changed the set", s)
		}
	})
}

// Mask prints what the kernel's %*pb prints (lib/vsprintf.c, bitmap_string): the first
// chunk only as wide as the bits left over need.
func TestMask(t *testing.T) {
	cases := []struct {
		list  string
		nbits int
		want  string
	}{
		// What a one- and a two-CPU QEMU guest show in local_cpus and node*/cpumap.
		{"0", 1, "1"},
		{"0-1", 2, "3"},
		{"1", 2, "2"},
		{"0-3", 6, "0f"},
		{"0-7", 8, "ff"},
		{"0-15", 16, "ffff"},
		{"0-31", 32, "ffffffff"},
		{"0-32", 33, "1,ffffffff"},
		{"0-23", 48, "0000,00ffffff"},
		{"0-27,56-83", 112, "0000,000fffff,ff000000,0fffffff"},
		{"28-55,84-111", 112, "ffff,fff00000,00ffffff,f0000000"},
		{"0-47,96-143", 192, "00000000,0000ffff,ffffffff,00000000,0000ffff,ffffffff"},
		{"0-63,128-191", 256, "00000000,00000000,ffffffff,ffffffff,00000000,00000000,ffffffff,ffffffff"},
		{"", 64, "00000000,00000000"},
		{"", 1, "0"},
		// CPUs past nbits are not part of the bitmap.
		{"0-9", 4, "f"},
		{"0-3", 0, ""},
	}
	for _, c := range cases {
		s, err := Parse(c.list)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Mask(c.nbits); got != c.want {
			t.Errorf("Mask(%q, %d) = %s, want %s", c.list, c.nbits, got, c.want)
		}
	}
}

func TestParseMask(t *testing.T) {
	cases := []struct {
		in      string
		want    string
		wantErr bool
	}{
		// local_cpus of the GPUs of an IBM POWER9 AC922 (PowerNV 8335-GTW, 176 possible
		// CPUs), as hwloc keeps them in its test suite (open-mpi/hwloc,
		// tests/hwloc/linux/nvidiagpunumanodes.tar.bz2).
		{"0000,00000000,00000000,00000000,00000000,0000ffff\n", "0-15", false},
		{"0000,00000000,000000ff,ff000000,00000000,00000000\n", "88-103", false},
		// What Mask prints for the fixture hosts and a small guest.
		{"0000,000fffff,ff000000,0fffffff", "0-27,56-83", false},
		{"ffff,fff00000,00ffffff,f0000000", "28-55,84-111", false},
		{"00000000,00000000,ffffffff,ffffffff", "0-63", false},
		{"3", "0-1", false},
		{"1,ffffffff", "0-32", false},
		{"FFFF", "0-15", false},
		{"00000000,00000000", "", false},
		{"", "", false},
		{"1,,1", "", true},
		{",1", "", true},
		{"1,", "", true},
		{"123456789", "", true},
		// The kernel refuses a chunk of more than 8 digits, even of leading zeros.
		{"000000001", "", true},
		{"0x1", "", true},
		{"fg", "", true},
		{"-1", "", true},
		{"1 ,2", "", true},
		{strings.Repeat("0,", MaxCPU/32) + "1", "", true},
	}
	for _, c := range cases {
		got, err := ParseMask(c.in)
		if c.wantErr {
			if err == nil {
				t.Errorf("ParseMask(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseMask(%q): %v", c.in, err)
			continue
		}
		if got.String() != c.want {
			t.Errorf("ParseMask(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A mask of the most chunks accepted reaches the last CPU number there is.
func TestParseMaskLargest(t *testing.T) {
	s, err := ParseMask("80000000" + strings.Repeat(",00000000", MaxCPU/32-1))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != strconv.Itoa(MaxCPU-1) {
		t.Errorf("ParseMask of the top bit = %q, want %d", got, MaxCPU-1)
	}
}

func FuzzParseMask(f *testing.F) {
	for _, s := range []string{"0000,000fffff,ff000000,0fffffff", "", "3", "1,ffffffff", "0,0", "fg"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseMask(s)
		if err != nil {
			return
		}
		// Printed as the kernel would with as many bits as s has, it reads back the same.
		nbits := (strings.Count(strings.TrimSpace(s), ",") + 1) * 32
		again, err := ParseMask(set.Mask(nbits))
		if err != nil {
			t.Fatalf("ParseMask(%q) ok, but its Mask %q does not parse: %v", s, set.Mask(nbits), err)
		}
		if !again.Equal(set) {
			t.Fatalf("round trip of %q changed the set: %q, then %q", s, set, again)
		}
	})
}
