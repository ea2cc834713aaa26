package pci

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Selector picks devices: "numa:N", "group:N" (IOMMU group), "count:N" (any N, packed by
// NUMA node), a PCI address ("0000:81:00.0" or "81:00.0"), "vendor:device" ("10de:2bb1"),
// or "class:0x0300" (a class prefix of 2, 4 or 6 hex digits).
type Selector struct {
	text      string
	kind      selectorKind
	n         int
	addr      Address
	vendor    uint16
	device    uint16
	class     uint32
	classBits int
}

type selectorKind int

const (
	byNUMA selectorKind = iota
	byGroup
	byCount
	byAddress
	byID
	byClass
)

// SelectorHelp is the one-line summary used in flag help and errors.
const SelectorHelp = "numa:N, group:N, count:N, a PCI address (0000:81:00.0), vendor:device (10de:2bb1) or class:0x0300"

// ParseSelector parses one selector.
func ParseSelector(s string) (Selector, error) {
	s = strings.TrimSpace(s)
	sel := Selector{text: s}
	bad := func(why string) (Selector, error) {
		return Selector{}, fmt.Errorf("invalid selector %q: %s (use %s)", s, why, SelectorHelp)
	}
	key, val, hasColon := strings.Cut(s, ":")
	switch strings.ToLower(key) {
	case "numa", "group", "count":
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return bad(key + " needs a number")
		}
		switch strings.ToLower(key) {
		case "numa":
			sel.kind = byNUMA
		case "group":
			sel.kind = byGroup
		case "count":
			if n == 0 {
				return bad("count must be at least 1")
			}
			sel.kind = byCount
		}
		sel.n = n
		return sel, nil
	case "class":
		hex := strings.TrimPrefix(strings.ToLower(val), "0x")
		if len(hex) != 2 && len(hex) != 4 && len(hex) != 6 {
			return bad("class needs 2, 4 or 6 hex digits")
		}
		c, err := strconv.ParseUint(hex, 16, 32)
		if err != nil {
			return bad("class is not hexadecimal")
		}
		sel.kind, sel.class, sel.classBits = byClass, uint32(c), len(hex)*4
		return sel, nil
	}
	if !hasColon {
		return bad("unknown form")
	}
	if strings.Contains(s, ".") {
		a, err := ParseAddress(s)
		if err != nil {
			return bad(err.Error())
		}
		sel.kind, sel.addr = byAddress, a
		return sel, nil
	}
	if len(key) == 4 && len(val) == 4 {
		v, err1 := strconv.ParseUint(key, 16, 16)
		d, err2 := strconv.ParseUint(val, 16, 16)
		if err1 == nil && err2 == nil {
			sel.kind, sel.vendor, sel.device = byID, uint16(v), uint16(d)
			return sel, nil
		}
	}
	return bad("unknown form")
}

// ParseSelectors parses a comma-separated list of selectors.
func ParseSelectors(list string) ([]Selector, error) {
	var out []Selector
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		sel, err := ParseSelector(s)
		if err != nil {
			return nil, err
		}
		out = append(out, sel)
	}
	return out, nil
}

func (s Selector) String() string { return s.text }

// Narrows reports whether the selector keeps part of a choice (numa:, group:, count:)
// rather than naming devices (an address, vendor:device, class:).
func (s Selector) Narrows() bool { return s.kind == byNUMA || s.kind == byGroup || s.kind == byCount }

// Select returns the candidates that any selector picks, in address order. A selector
// that picks nothing is an error, which names the selector and what there was to pick
// from; noun names the candidates in that message ("GPU", "PCI device").
func Select(cands []*Device, sels []Selector, noun string) ([]*Device, error) {
	picked := map[Address]bool{}
	for _, s := range sels {
		got, err := s.pick(cands, noun)
		if err != nil {
			return nil, err
		}
		for _, d := range got {
			picked[d.Address] = true
		}
	}
	var out []*Device
	for _, d := range cands {
		if picked[d.Address] {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(x, y *Device) int { return x.Address.Compare(y.Address) })
	return out, nil
}

func (s Selector) pick(cands []*Device, noun string) ([]*Device, error) {
	if s.kind == byCount {
		return packByNUMA(cands, s.n, noun)
	}
	var out []*Device
	for _, d := range cands {
		if s.matches(d) {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, &NoMatchError{Selector: s, msg: fmt.Sprintf("selector %s matches no %s (%s)", s, noun, describe(cands, s.kind, noun))}
	}
	return out, nil
}

// NoMatchError is a selector that picked nothing, so that a caller that knows more
// devices than the candidates can say what the selector names.
type NoMatchError struct {
	Selector Selector
	msg      string
}

func (e *NoMatchError) Error() string { return e.msg }

// Address is the function an address selector names.
func (s Selector) Address() (Address, bool) { return s.addr, s.kind == byAddress }

func (s Selector) matches(d *Device) bool {
	switch s.kind {
	case byNUMA:
		return d.NUMANode == s.n
	case byGroup:
		return d.IOMMUGroup == s.n
	case byAddress:
		return d.Address == s.addr
	case byID:
		return d.VendorID == s.vendor && d.DeviceID == s.device
	case byClass:
		return d.Class>>(24-s.classBits) == s.class
	}
	return false
}

// describe says what the candidates offer, for the error of a selector that matched none.
func describe(cands []*Device, kind selectorKind, noun string) string {
	if len(cands) == 0 {
		return "there is no " + noun
	}
	seen := map[string]bool{}
	var vals []string
	for _, d := range cands {
		var v string
		switch kind {
		case byNUMA:
			v = strconv.Itoa(d.NUMANode)
		case byGroup:
			v = strconv.Itoa(d.IOMMUGroup)
		case byID:
			v = d.ID()
		case byClass:
			v = fmt.Sprintf("0x%06x", d.Class)
		default:
			v = d.Address.String()
		}
		if !seen[v] {
			seen[v] = true
			vals = append(vals, v)
		}
	}
	what := map[selectorKind]string{byNUMA: "NUMA nodes", byGroup: "IOMMU groups", byID: "ids", byClass: "classes"}[kind]
	if what == "" {
		what = "addresses"
	}
	return fmt.Sprintf("the %d %ss have %s %s", len(cands), noun, what, strings.Join(vals, ", "))
}

// packByNUMA picks n candidates on as few NUMA nodes as possible: the lowest node that
// has n on its own, else the fullest nodes first. Within a node, lowest addresses first.
func packByNUMA(cands []*Device, n int, noun string) ([]*Device, error) {
	if n > len(cands) {
		return nil, fmt.Errorf("count:%d asks for more than the %d %ss there are", n, len(cands), noun)
	}
	cands = slices.SortedFunc(slices.Values(cands), func(x, y *Device) int { return x.Address.Compare(y.Address) })
	byNode := map[int][]*Device{}
	var nodes []int
	for _, d := range cands {
		if _, ok := byNode[d.NUMANode]; !ok {
			nodes = append(nodes, d.NUMANode)
		}
		byNode[d.NUMANode] = append(byNode[d.NUMANode], d)
	}
	// Known nodes first, in order; devices whose node is unknown (-1) last.
	slices.SortFunc(nodes, func(a, b int) int {
		if (a < 0) != (b < 0) {
			return boolInt(a < 0) - boolInt(b < 0)
		}
		return a - b
	})
	for _, node := range nodes {
		if len(byNode[node]) >= n {
			return byNode[node][:n], nil
		}
	}
	slices.SortStableFunc(nodes, func(a, b int) int {
		if (a < 0) != (b < 0) {
			return boolInt(a < 0) - boolInt(b < 0)
		}
		return len(byNode[b]) - len(byNode[a])
	})
	var out []*Device
	for _, node := range nodes {
		for _, d := range byNode[node] {
			if len(out) == n {
				return out, nil
			}
			out = append(out, d)
		}
	}
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
