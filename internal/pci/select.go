package pci

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Selector picks devices: "numa:N", "group:N" (IOMMU group), "count:N" (any N, packed by
// NUMA node), a PCI address ("0000:81:00.0", "81:00.0", or nvidia-smi's
// "00000000:81:00.0"), a slot as Proxmox writes it ("0000:81:00" or "81:00": all its
// functions), a GPU number as inventory and topo print it ("GPU4" or "gpu:4"),
// "vendor:device" ("10de:2bb1"), "class:0x0300" (a class prefix of 2, 4 or 6 hex
// digits), or a Proxmox PCI mapping ("mapping:pro6000", once ResolveMappings has read it).
type Selector struct {
	text      string
	kind      selectorKind
	n         int     // the node, group, count or GPU number
	addr      Address // the address; for a slot, its function 0
	vendor    uint16
	device    uint16
	class     uint32
	classBits int
	mapping   string // the mapping's name
	// paths are the address and slot selectors of the mapping's entries for this node,
	// set by ResolveMappings; nil before. A pointer keeps Selector comparable.
	paths *[]Selector
}

type selectorKind int

const (
	byNUMA selectorKind = iota
	byGroup
	byCount
	byAddress
	byID
	byClass
	bySlot
	byNumber
	byMapping
)

// SelectorHelp is the one-line summary used in flag help and errors.
const SelectorHelp = "numa:N, group:N, count:N, GPU4 or gpu:4 (as inventory numbers them), a PCI address (0000:81:00.0) or slot (0000:81:00), vendor:device (10de:2bb1), class:0x0300 or mapping:NAME"

// ParseSelector parses one selector.
func ParseSelector(s string) (Selector, error) {
	s = strings.TrimSpace(s)
	sel := Selector{text: s}
	bad := func(why string) (Selector, error) {
		return Selector{}, fmt.Errorf("invalid selector %q: %s (use %s)", s, why, SelectorHelp)
	}
	// nvidia-smi and its tables name GPUs GPU0, GPU1, …: the same numbers as ours.
	if rest, ok := cutPrefixFold(s, "gpu"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
		n, err := strconv.Atoi(rest)
		if err != nil {
			return bad("the GPU number is too large")
		}
		sel.kind, sel.n = byNumber, n
		return sel, nil
	}
	key, val, hasColon := strings.Cut(s, ":")
	switch strings.ToLower(key) {
	case "numa", "group", "count", "gpu":
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return bad(strings.ToLower(key) + " needs a number")
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
		case "gpu":
			sel.kind = byNumber
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
	case "mapping":
		if !isMappingID(val) {
			return bad("a mapping name is a letter, then letters, digits, '-' or '_'")
		}
		sel.kind, sel.mapping = byMapping, val
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
	// A slot without its function, as Proxmox's pci.cfg and hostpci lines write it
	// (0000:81:00, or 81:00 in domain 0): all the functions of the device.
	if parts := strings.Split(s, ":"); len(parts) >= 2 && len(parts) <= 3 && len(parts[len(parts)-2]) == 2 && len(parts[len(parts)-1]) == 2 {
		a, err := ParseAddress(s + ".0")
		if err != nil {
			return bad(strings.Replace(err.Error(), fmt.Sprintf("%q", s+".0"), fmt.Sprintf("%q", s), 1))
		}
		sel.kind, sel.addr = bySlot, a
		return sel, nil
	}
	return bad("unknown form")
}

// cutPrefixFold is strings.CutPrefix without regard to case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// isMappingID is Proxmox's rule for a mapping id (pve-common's $CONFIGID_RE,
// [a-z][a-z0-9_-]+ without regard to case).
func isMappingID(s string) bool {
	if len(s) < 2 {
		return false
	}
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '-' || c == '_')) {
			return false
		}
	}
	return true
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
// rather than naming devices (an address, a slot, a GPU number, vendor:device, class:,
// mapping:).
func (s Selector) Narrows() bool { return s.kind == byNUMA || s.kind == byGroup || s.kind == byCount }

// Select returns the candidates that any selector picks, in address order. A selector
// that picks nothing is an error, which names the selector and what there was to pick
// from; noun names the candidates in that message ("GPU", "PCI device"). GPU numbers
// count the candidates in address order.
func Select(cands []*Device, sels []Selector, noun string) ([]*Device, error) {
	return selectFrom(cands, cands, sels, noun)
}

// selectFrom is Select where numbered are the GPUs as inventory and topo number them:
// GPU4 is the fifth of them in address order, and a slot's functions are first looked
// for among them (see slotPick).
func selectFrom(cands, numbered []*Device, sels []Selector, noun string) ([]*Device, error) {
	numbered = slices.SortedFunc(slices.Values(numbered), func(x, y *Device) int { return x.Address.Compare(y.Address) })
	picked := map[Address]bool{}
	for _, s := range sels {
		got, err := s.pick(cands, numbered, noun)
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

func (s Selector) pick(cands, numbered []*Device, noun string) ([]*Device, error) {
	var out []*Device
	switch s.kind {
	case byCount:
		return packByNUMA(cands, s.n, noun)
	case byNumber:
		if s.n < len(numbered) {
			return numbered[s.n : s.n+1], nil
		}
		return nil, &NoMatchError{Selector: s, msg: fmt.Sprintf("selector %s matches no GPU (%s)", s, numbers(numbered))}
	case bySlot:
		out = slotPick(cands, numbered, s.addr)
	case byMapping:
		if s.paths == nil {
			return nil, fmt.Errorf("selector %s names a Proxmox mapping, which is not read here: name its GPUs by address", s)
		}
		var held []string
		for _, p := range *s.paths {
			held = append(held, p.text)
			// Like its path given alone; one that is not there is no error, as long as
			// another is (a mapping may hold more than the GPUs).
			got, _ := p.pick(cands, numbered, noun)
			out = append(out, got...)
		}
		if len(out) == 0 {
			return nil, &NoMatchError{Selector: s, msg: fmt.Sprintf("selector %s matches no %s: on this node it holds %s (%s)", s, noun, strings.Join(held, ", "), describe(cands, s.kind, noun))}
		}
		return out, nil
	default:
		for _, d := range cands {
			if s.matches(d) {
				out = append(out, d)
			}
		}
	}
	if len(out) == 0 {
		return nil, &NoMatchError{Selector: s, msg: fmt.Sprintf("selector %s matches no %s (%s)", s, noun, describe(cands, s.kind, noun))}
	}
	return out, nil
}

// slotPick is what a slot picks among cands: its functions that are numbered GPUs (so
// that --vfio 0000:81:00 takes every GPU of the slot), else the lowest of its functions,
// whose other functions follow it as companions (so that --devices 0000:81:00 makes the
// slot one GPU, not its audio function another).
func slotPick(cands, numbered []*Device, slot Address) []*Device {
	var in, gpus []*Device
	for _, d := range cands {
		if d.Address.Slot() == slot {
			in = append(in, d)
			if slices.Contains(numbered, d) {
				gpus = append(gpus, d)
			}
		}
	}
	if len(gpus) > 0 || len(in) == 0 {
		return gpus
	}
	return []*Device{slices.MinFunc(in, func(x, y *Device) int { return x.Address.Compare(y.Address) })}
}

// numbers says which GPU numbers there are, for the error of one that is not.
func numbers(numbered []*Device) string {
	switch len(numbered) {
	case 0:
		return "there is no GPU"
	case 1:
		return fmt.Sprintf("there is 1 GPU, GPU0 (%s)", numbered[0].Address)
	}
	return fmt.Sprintf("there are %d GPUs, GPU0 (%s) to GPU%d (%s), numbered in address order as inventory and topo show them",
		len(numbered), numbered[0].Address, len(numbered)-1, numbered[len(numbered)-1].Address)
}

// MappingLookup returns the devices a Proxmox PCI mapping holds on this node, as
// pci.cfg writes their paths ("0000:81:00.0", or "0000:81:00" for all the functions of
// a slot); its error says why there are none (no such mapping, none for this node).
// The package pve makes one from the host's pci.cfg.
type MappingLookup func(name string) ([]string, error)

// ResolveMappings returns sels with the devices of each mapping: selector looked up;
// the other selectors are unchanged. lookup is asked only for a mapping: selector, and
// may be nil where there are no mappings to read.
func ResolveMappings(sels []Selector, lookup MappingLookup) ([]Selector, error) {
	out := slices.Clone(sels)
	for i, s := range out {
		if s.kind != byMapping {
			continue
		}
		if lookup == nil {
			return nil, fmt.Errorf("selector %s names a Proxmox mapping, which is not read here: name its GPUs by address", s)
		}
		paths, err := lookup(s.mapping)
		if err != nil {
			return nil, fmt.Errorf("selector %s: %w", s, err)
		}
		parts := make([]Selector, 0, len(paths))
		for _, p := range paths {
			ps, err := ParseSelector(p)
			if err != nil || ps.kind != byAddress && ps.kind != bySlot {
				return nil, fmt.Errorf("selector %s: the mapping's path %q is not a PCI address", s, p)
			}
			parts = append(parts, ps)
		}
		out[i].paths = &parts
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

// Address is the function an address selector names; for a slot, its function 0.
func (s Selector) Address() (Address, bool) { return s.addr, s.kind == byAddress || s.kind == bySlot }

func (s Selector) matches(d *Device) bool {
	switch s.kind {
	case byNUMA:
		return d.NUMANode == s.n
	case byGroup:
		return d.IOMMUGroup == s.n
	case byAddress:
		return d.Address == s.addr
	case bySlot:
		return d.Address.Slot() == s.addr
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
