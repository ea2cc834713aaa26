// Package cpuset parses and prints the kernel's CPU list format ("0-27,56-83"), as found
// in local_cpulist and /sys/devices/system/node/node*/cpulist, and its bitmap format
// ("0000,000fffff,ff000000,0fffffff"), as found in local_cpus and node*/cpumap.
package cpuset

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// MaxCPU bounds the CPU numbers accepted, so a corrupt file cannot make the parser
// allocate gigabytes (the kernel's NR_CPUS is at most 8192 on common configurations).
const MaxCPU = 1 << 16

// Set is a set of CPU numbers.
type Set struct{ words []uint64 }

// Parse reads a CPU list: comma-separated numbers and ranges ("0-3,8,10-11"). An empty
// or blank list is the empty set, as sysfs writes it for a node without CPUs.
func Parse(s string) (Set, error) {
	var set Set
	s = strings.TrimSpace(s)
	if s == "" {
		return set, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := cpuNumber(lo)
		if err != nil {
			return Set{}, fmt.Errorf("cpu list %q: %w", s, err)
		}
		last := first
		if isRange {
			if last, err = cpuNumber(hi); err != nil {
				return Set{}, fmt.Errorf("cpu list %q: %w", s, err)
			}
			if last < first {
				return Set{}, fmt.Errorf("cpu list %q: range %s runs backwards", s, part)
			}
		}
		for c := first; c <= last; c++ {
			set.add(c)
		}
	}
	return set, nil
}

// ParseMask reads a CPU bitmap as the kernel prints it with %*pb (see Mask): 32-bit chunks
// of hex digits, most significant first, separated by commas. It is for where only the
// mask exists: hwloc-gather-topology keeps local_cpus and not local_cpulist, and so do
// captures made after its fashion. A chunk may have fewer than 8 digits (the first one
// does whenever the number of possible CPUs is not a multiple of 32), never more. An empty
// mask, or one of zeros only, is the empty set.
func ParseMask(s string) (Set, error) {
	var set Set
	s = strings.TrimSpace(s)
	if s == "" {
		return set, nil
	}
	chunks := strings.Split(s, ",")
	if len(chunks) > MaxCPU/32 {
		return Set{}, fmt.Errorf("cpu mask of %d chunks: more than the %d CPUs gpusplit reads", len(chunks), MaxCPU)
	}
	for i, c := range chunks {
		if c == "" || len(c) > 8 || strings.Trim(c, "0123456789abcdefABCDEF") != "" {
			return Set{}, fmt.Errorf("cpu mask %q: %q is not a chunk of up to 8 hex digits", s, c)
		}
		w, err := strconv.ParseUint(c, 16, 32)
		if err != nil {
			return Set{}, fmt.Errorf("cpu mask %q: %q is not a chunk of up to 8 hex digits", s, c)
		}
		lo := (len(chunks) - 1 - i) * 32
		for w != 0 {
			b := bits.TrailingZeros64(w)
			set.add(lo + b)
			w &^= 1 << b
		}
	}
	return set, nil
}

func cpuNumber(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n >= MaxCPU {
		return 0, fmt.Errorf("CPU number %q is out of range", s)
	}
	return n, nil
}

func (s *Set) add(c int) {
	w := c / 64
	for len(s.words) <= w {
		s.words = append(s.words, 0)
	}
	s.words[w] |= 1 << (c % 64)
}

// Contains reports whether CPU c is in the set.
func (s Set) Contains(c int) bool {
	w := c / 64
	return c >= 0 && w < len(s.words) && s.words[w]&(1<<(c%64)) != 0
}

// Len returns the number of CPUs in the set.
func (s Set) Len() int {
	n := 0
	for _, w := range s.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// Equal reports whether two sets hold the same CPUs.
func (s Set) Equal(o Set) bool { return s.String() == o.String() }

// CPUs returns the CPU numbers in increasing order.
func (s Set) CPUs() []int {
	var out []int
	for i, w := range s.words {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, i*64+b)
			w &^= 1 << b
		}
	}
	return out
}

// String prints the set in the kernel's list format, ranges collapsed: "0-27,56-83".
func (s Set) String() string {
	var b strings.Builder
	cpus := s.CPUs()
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if i == j {
			fmt.Fprintf(&b, "%d", cpus[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", cpus[i], cpus[j])
		}
		i = j + 1
	}
	return b.String()
}

// Mask prints the set as the kernel prints a bitmap of nbits bits with %*pb, as in
// local_cpus, cpuaffinity and a node's cpumap, where nbits is the number of possible
// CPUs (nr_cpu_ids): 32-bit chunks in hex, most significant first, separated by commas.
// The first chunk has only as many digits as its bits need ("3" for 2 CPUs,
// "0000,ffffffff" for 48); the others have 8. CPUs from nbits on are left out, and a
// bitmap of no bits prints as nothing.
func (s Set) Mask(nbits int) string {
	if nbits <= 0 {
		return ""
	}
	var b strings.Builder
	chunk := nbits % 32
	if chunk == 0 {
		chunk = 32
	}
	for lo := (nbits+31)/32*32 - 32; lo >= 0; lo -= 32 {
		var w uint32
		for bit := range chunk {
			if s.Contains(lo + bit) {
				w |= 1 << bit
			}
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%0*x", (chunk+3)/4, w)
		chunk = 32
	}
	return b.String()
}
