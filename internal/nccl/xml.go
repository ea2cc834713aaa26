// Package nccl writes and checks NCCL topology files (NCCL_TOPO_FILE): the XML that tells
// NCCL where its GPUs sit when it cannot see that itself, as inside a VM.
//
// The writer produces exactly the format of NCCL's own dumps (NCCL_TOPO_DUMP_FILE), and
// Parse reads a file the way NCCL's parser does, refusing what that parser would refuse
// and what it would silently misread.
package nccl

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Limits of NCCL's XML parser (src/graph/xml.h, src/graph/topo.h).
const (
	// MaxNodes is the most elements a topology file may hold.
	MaxNodes = 256
	// MaxAttrs is the most attributes NCCL keeps on an element; it ignores the others.
	MaxAttrs = 16
	// MaxChildren is the most children an element may have.
	MaxChildren = 640
	// MaxString is the longest name or value NCCL reads (its buffers hold 255 bytes,
	// the closing quote and the NUL included).
	MaxString = 253
	// Version is the only <system version> NCCL accepts, in every release since 2.6.
	Version = "1"
)

// Node is an element of a topology file, with its attributes in order.
type Node struct {
	Name     string
	Attrs    []Attr
	Children []*Node
}

// Attr is one attribute.
type Attr struct{ Key, Value string }

// Elem returns a new element with the attributes given as key, value pairs.
func Elem(name string, kv ...string) *Node {
	n := &Node{Name: name}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Set(kv[i], kv[i+1])
	}
	return n
}

// Get returns the value of an attribute.
func (n *Node) Get(key string) (string, bool) {
	for _, a := range n.Attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// Set gives an attribute a value, in place when it exists, else at the end, as NCCL's
// xmlSetAttr does.
func (n *Node) Set(key, value string) {
	for i := range n.Attrs {
		if n.Attrs[i].Key == key {
			n.Attrs[i].Value = value
			return
		}
	}
	n.Attrs = append(n.Attrs, Attr{key, value})
}

// Walk calls fn for n and every element below it, parents first.
func (n *Node) Walk(fn func(*Node)) {
	fn(n)
	for _, c := range n.Children {
		c.Walk(fn)
	}
}

// Count is the number of elements in the tree under n, n included.
func (n *Node) Count() int {
	c := 0
	n.Walk(func(*Node) { c++ })
	return c
}

// Marshal returns the tree as NCCL dumps it: two spaces of indent per level, attributes
// in order as key="value", an element without children closed with "/>", no XML prolog.
func Marshal(n *Node) []byte {
	var b bytes.Buffer
	write(&b, n, 0)
	return b.Bytes()
}

func write(b *bytes.Buffer, n *Node, indent int) {
	b.WriteString(strings.Repeat(" ", indent))
	b.WriteByte('<')
	b.WriteString(n.Name)
	for _, a := range n.Attrs {
		fmt.Fprintf(b, " %s=\"%s\"", a.Key, a.Value)
	}
	if len(n.Children) == 0 {
		b.WriteString("/>\n")
		return
	}
	b.WriteString(">\n")
	for _, c := range n.Children {
		write(b, c, indent+2)
	}
	b.WriteString(strings.Repeat(" ", indent))
	b.WriteString("</")
	b.WriteString(n.Name)
	b.WriteString(">\n")
}

// ParseError is a place in a file that NCCL would refuse or misread.
type ParseError struct {
	Line, Col int
	Msg       string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// children lists the elements NCCL's topology parser loads under each element
// (src/graph/xml.cc, the ncclTopoXmlLoad* handlers); anything else it skips with
// "Ignoring element".
var children = []struct {
	name    string
	allowed []string
}{
	{"", []string{"system"}},
	{"system", []string{"cpu"}},
	{"cpu", []string{"pci", "nic"}},
	{"pci", []string{"pci", "gpu", "nic", "pcilink"}},
	{"gpu", []string{"nvlink", "c2c"}},
	{"nic", []string{"net"}},
	{"nvlink", nil},
	{"c2c", nil},
	{"net", nil},
	{"pcilink", nil},
}

// childrenOf returns the elements NCCL loads under an element of name.
func childrenOf(name string) []string {
	for _, c := range children {
		if c.name == name {
			return c.allowed
		}
	}
	return nil
}

// Parse reads a topology file as NCCL's parser does (src/graph/xml.cc) and returns its
// <system> element. It refuses, with the line and column, what NCCL refuses: an XML
// prolog, tabs, a newline inside a tag, an unquoted value, a name or value over
// MaxString bytes, more than MaxNodes elements or MaxChildren children, a mismatched
// closing tag, a <system> whose version is not 1. It also refuses what NCCL accepts but
// misreads: an element NCCL ignores (with everything under it), a doubled space or
// " />" (an attribute with an empty name), more than MaxAttrs attributes (NCCL drops
// the rest), a repeated attribute, single quotes (NCCL before 2.27.3 reads a value up
// to the next double quote), and text that is not an element.
func Parse(data []byte) (*Node, error) {
	p := &parser{data: data, line: 1, col: 1}
	root := &Node{}
	if err := p.load(root, ""); err != nil {
		return nil, err
	}
	var sys *Node
	for _, c := range root.Children {
		if sys != nil {
			return nil, &ParseError{1, 1, "more than one <system> element: NCCL reads only the first"}
		}
		sys = c
	}
	if sys == nil {
		return nil, &ParseError{p.line, p.col, "no <system> element"}
	}
	return sys, nil
}

type parser struct {
	data      []byte
	off       int
	line, col int
	nodes     int
}

func (p *parser) errf(format string, args ...any) error {
	return &ParseError{p.line, p.col, fmt.Sprintf(format, args...)}
}

// next returns the next byte, or false at the end.
func (p *parser) next() (byte, bool) {
	if p.off >= len(p.data) {
		return 0, false
	}
	c := p.data[p.off]
	p.off++
	if c == '\n' {
		p.line, p.col = p.line+1, 1
	} else {
		p.col++
	}
	return c, true
}

func (p *parser) mustNext() (byte, error) {
	c, ok := p.next()
	if !ok {
		return 0, p.errf("unexpected end of file")
	}
	if c == '\t' {
		return 0, p.errf("a tab: NCCL's parser only skips spaces and newlines")
	}
	return c, nil
}

// tag kinds
const (
	tagNone = iota
	tagOpen
	tagClose
	tagSingle
)

type tag struct {
	kind      int
	name      string
	attrs     []Attr
	line, col int
}

// token reads a name up to '=', ' ', '>', '/', '\n' or '\r'; with '=' it reads the value
// too. It returns the name, the value, whether there was one, and the byte after.
func (p *parser) token(allowValue bool) (name, value string, hasValue bool, last byte, err error) {
	var b []byte
	for {
		c, err := p.mustNext()
		if err != nil {
			return "", "", false, 0, err
		}
		if c == '=' {
			if !allowValue {
				return "", "", false, 0, p.errf("unexpected value after %q", b)
			}
			v, last, err := p.value()
			return string(b), v, true, last, err
		}
		if c == ' ' || c == '>' || c == '/' || c == '\n' || c == '\r' {
			return string(b), "", false, c, nil
		}
		b = append(b, c)
		if len(b) > MaxString {
			return "", "", false, 0, p.errf("name %.20q… is longer than %d bytes", b, MaxString)
		}
	}
}

func (p *parser) value() (string, byte, error) {
	q, err := p.mustNext()
	if err != nil {
		return "", 0, err
	}
	if q == '\'' {
		return "", 0, p.errf("a single-quoted value: NCCL before 2.27.3 reads it up to the next double quote")
	}
	if q != '"' {
		return "", 0, p.errf("expected a double quote, got %q", q)
	}
	var b []byte
	for {
		c, ok := p.next()
		if !ok {
			return "", 0, p.errf("unexpected end of file in a value")
		}
		if c == '"' {
			break
		}
		if c == '\n' || c == '\r' || c == '\t' {
			return "", 0, p.errf("a tab or newline in a value")
		}
		b = append(b, c)
		if len(b) > MaxString {
			return "", 0, p.errf("value %.20q… is longer than %d bytes", b, MaxString)
		}
	}
	last, err := p.mustNext()
	return string(b), last, err
}

// tag reads the next tag, skipping blanks and comments; tagNone at the end of the file.
func (p *parser) tag() (tag, error) {
	for {
		c, ok := p.next()
		for ok && (c == ' ' || c == '\n' || c == '\r') {
			c, ok = p.next()
		}
		if !ok {
			return tag{kind: tagNone}, nil
		}
		t := tag{line: p.line, col: p.col - 1}
		switch {
		case c == '\t':
			return t, p.errf("a tab: NCCL's parser only skips spaces and newlines (\"expecting '<'\")")
		case c != '<':
			return t, p.errf("expected '<', got %q: NCCL's parser takes no text between elements", c)
		}
		if bytes.HasPrefix(p.data[p.off:], []byte("?")) {
			return t, &ParseError{t.line, t.col, "an XML declaration (<?xml …?>): NCCL's parser stops at it (\"expected >, got '?'\")"}
		}
		if bytes.HasPrefix(p.data[p.off:], []byte("!--")) {
			end := bytes.Index(p.data[p.off+3:], []byte("-->"))
			if end < 0 {
				return t, p.errf("unterminated comment")
			}
			for range end + 6 {
				p.next()
			}
			continue
		}
		name, _, _, last, err := p.token(false)
		if err != nil {
			return t, err
		}
		if name == "" && last == '/' {
			t.kind = tagClose
			if t.name, _, _, last, err = p.token(false); err != nil {
				return t, err
			}
			if last != '>' {
				return t, p.errf("unexpected %q in closing tag </%s>", last, t.name)
			}
			return t, nil
		}
		if name == "" {
			return t, p.errf("an element without a name")
		}
		t.kind, t.name = tagOpen, name
		for last == ' ' {
			k, v, hasValue, l, err := p.token(true)
			if err != nil {
				return t, err
			}
			last = l
			if k == "" && !hasValue {
				if last == '/' {
					return t, p.errf("a space before \"/>\": NCCL reads an attribute with an empty name")
				}
				return t, p.errf("two spaces in a row: NCCL reads an attribute with an empty name")
			}
			if !hasValue {
				return t, p.errf("attribute %q has no value", k)
			}
			for _, a := range t.attrs {
				if a.Key == k {
					return t, p.errf("attribute %q is repeated: NCCL uses the first", k)
				}
			}
			t.attrs = append(t.attrs, Attr{k, v})
			if len(t.attrs) > MaxAttrs {
				return t, p.errf("more than %d attributes: NCCL ignores the others", MaxAttrs)
			}
		}
		if last == '/' {
			t.kind = tagSingle
			c, err := p.mustNext()
			if err != nil {
				return t, err
			}
			last = c
		}
		switch last {
		case '>':
			return t, nil
		case '\n', '\r':
			return t, p.errf("a newline inside a tag: NCCL's parser expects '>'")
		}
		return t, p.errf("expected '>', got %q", last)
	}
}

// load reads the children of head until its closing tag (or the end, for the top).
func (p *parser) load(head *Node, name string) error {
	allowed := childrenOf(name)
	for {
		t, err := p.tag()
		if err != nil {
			return err
		}
		switch t.kind {
		case tagNone:
			if name != "" {
				return p.errf("<%s> is not closed", name)
			}
			return nil
		case tagClose:
			if name == "" {
				return &ParseError{t.line, t.col, fmt.Sprintf("closing tag </%s> without an element", t.name)}
			}
			if t.name != name {
				return &ParseError{t.line, t.col, fmt.Sprintf("</%s> closes <%s>", t.name, name)}
			}
			return nil
		}
		known := false
		for _, a := range allowed {
			known = known || a == t.name
		}
		if !known {
			where := "here"
			if name != "" {
				where = "in <" + name + ">"
			}
			return &ParseError{t.line, t.col, fmt.Sprintf("NCCL ignores <%s> %s, with everything in it", t.name, where)}
		}
		p.nodes++
		if p.nodes > MaxNodes {
			return &ParseError{t.line, t.col, fmt.Sprintf("more than %d elements: NCCL's parser is limited to %d nodes", MaxNodes, MaxNodes)}
		}
		if len(head.Children) == MaxChildren {
			return &ParseError{t.line, t.col, fmt.Sprintf("more than %d children in <%s>", MaxChildren, name)}
		}
		n := &Node{Name: t.name, Attrs: t.attrs}
		head.Children = append(head.Children, n)
		if t.name == "system" {
			v, _ := n.Get("version")
			if ver, err := strconv.ParseInt(v, 10, 64); err != nil || strconv.FormatInt(ver, 10) != Version {
				return &ParseError{t.line, t.col, fmt.Sprintf("<system version=%q>: NCCL accepts only version %s", v, Version)}
			}
		}
		if err := checkAttrs(n); err != nil {
			return &ParseError{t.line, t.col, err.Error()}
		}
		if t.kind == tagOpen {
			if err := p.load(n, t.name); err != nil {
				return err
			}
		}
	}
}

// checkAttrs checks the attributes NCCL reads from a file: those it cannot do without,
// and the form of those it parses.
func checkAttrs(n *Node) error {
	need := map[string][]string{"cpu": {"numaid"}, "pci": {"busid"}, "nvlink": {"count"}, "pcilink": {"target"}}
	for _, k := range need[n.Name] {
		if _, ok := n.Get(k); !ok {
			return fmt.Errorf("<%s> without %s", n.Name, k)
		}
	}
	for _, a := range n.Attrs {
		var ok bool
		switch n.Name + "." + a.Key {
		case "cpu.numaid":
			_, err := strconv.Atoi(a.Value)
			ok = err == nil
		case "cpu.familyid", "cpu.modelid", "gpu.dev", "gpu.sm", "nvlink.count":
			_, err := strconv.ParseUint(a.Value, 10, 32)
			ok = err == nil
		case "cpu.arch":
			ok = a.Value == "x86_64" || a.Value == "arm64" || a.Value == "ppc64"
		case "cpu.affinity":
			ok = isCPUMap(a.Value)
		case "pci.busid", "nvlink.target", "pcilink.target":
			ok = IsBusID(a.Value)
		case "pci.class", "nvlink.tclass":
			ok = len(a.Value) == 8 && strings.HasPrefix(a.Value, "0x") && isHex(a.Value[2:])
		case "pci.vendor", "pci.device", "pci.subsystem_vendor", "pci.subsystem_device":
			ok = len(a.Value) > 2 && len(a.Value) <= 6 && strings.HasPrefix(a.Value, "0x") && isHex(a.Value[2:])
		case "pci.link_width":
			_, err := strconv.ParseUint(a.Value, 10, 8)
			ok = a.Value == "" || err == nil
		case "pci.link_speed":
			ok = a.Value == "" || LinkSpeedKnown(a.Value)
		default:
			ok = true
		}
		if !ok {
			return fmt.Errorf("<%s %s=%q>: %s", n.Name, a.Key, a.Value, formOf(n.Name+"."+a.Key))
		}
	}
	return nil
}

// attrForm says what form each attribute that checkAttrs checks must have.
var attrForm = []struct{ key, form string }{
	{"cpu.numaid", "a decimal NUMA node number (-1 for none)"},
	{"cpu.familyid", "a decimal number"},
	{"cpu.modelid", "a decimal number"},
	{"gpu.dev", "a decimal device index"},
	{"gpu.sm", "a decimal compute capability (90 for 9.0)"},
	{"nvlink.count", "a decimal number"},
	{"cpu.arch", "x86_64, arm64 or ppc64"},
	{"cpu.affinity", "a cpumap: comma-separated groups of 8 hex digits"},
	{"pci.busid", "a lower-case PCI address 0000:5e:00.0: NCCL finds devices by exact string"},
	{"nvlink.target", "a lower-case PCI address 0000:5e:00.0"},
	{"pcilink.target", "a lower-case PCI address 0000:5e:00.0"},
	{"pci.class", "a class as sysfs writes it (0x030200)"},
	{"nvlink.tclass", "a class as sysfs writes it (0x068000)"},
	{"pci.vendor", "a hex id (0x10de)"},
	{"pci.device", "a hex id"},
	{"pci.subsystem_vendor", "a hex id"},
	{"pci.subsystem_device", "a hex id"},
	{"pci.link_width", "a decimal number of lanes"},
	{"pci.link_speed", "a speed NCCL knows (\"32.0 GT/s PCIe\", \"16 GT/s\"); NCCL takes any other for 8 GT/s"},
}

// formOf returns attrForm's form for key, element.attribute.
func formOf(key string) string {
	for _, a := range attrForm {
		if a.key == key {
			return a.form
		}
	}
	return ""
}

// IsBusID says whether s is a bus id in the form NCCL compares against: %04x:%02x:%02x.%x.
func IsBusID(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i, c := range []byte(s) {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s[11] <= '7' && s[8] <= '1'
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// isCPUMap checks the kernel's cpumap form: groups of eight hex digits, the first one
// shorter when the number of CPUs is not a multiple of 32 ("ff" for eight).
func isCPUMap(s string) bool {
	for i, w := range strings.Split(s, ",") {
		if len(w) > 8 || (i > 0 && len(w) != 8) || !isHex(w) {
			return false
		}
	}
	return true
}

// linkSpeeds are the entries of NCCL's kvDictPciGen, in its order, with their speed in
// units of 100 Mb/s per lane (src/graph/topo.cc). NCCL takes the first entry that starts
// the string, so "2.5 GT/s PCIe" matches "2.5 GT/s"; a string no entry starts (NVML's
// fallback "16.0 GT/s", a kernel's "Unknown", "") counts as 60, Gen3.
var linkSpeeds = []struct {
	s     string
	speed int
}{
	{"2.5 GT/s", 15}, {"5 GT/s", 30}, {"8 GT/s", 60}, {"16 GT/s", 120}, {"32 GT/s", 240},
	{"2.5 GT/s PCIe", 15}, {"5.0 GT/s PCIe", 30}, {"8.0 GT/s PCIe", 60}, {"16.0 GT/s PCIe", 120},
	{"32.0 GT/s PCIe", 240}, {"64.0 GT/s PCIe", 480},
}

// LinkSpeed returns the per-lane speed NCCL gives a link_speed string, in 100 Mb/s, and
// whether it knows the string.
func LinkSpeed(s string) (int, bool) {
	for _, e := range linkSpeeds {
		if strings.HasPrefix(s, e.s) {
			return e.speed, true
		}
	}
	return 60, false
}

// LinkSpeedKnown says whether NCCL knows a link_speed string.
func LinkSpeedKnown(s string) bool { _, ok := LinkSpeed(s); return ok }

// CheckReport is what a topology file holds, as NCCL's parser reads it: nccl-topo
// --check's result. The fields are in the order of their JSON names.
type CheckReport struct {
	CPUs     int    `json:"cpus"`
	Elements int    `json:"elements"`
	File     string `json:"file"`
	GPUs     int    `json:"gpus"`
	OK       bool   `json:"ok"`
	PCIs     int    `json:"pcis"`
}

// CheckError is a topology file NCCL's parser refuses, in nccl-topo --check's JSON.
type CheckError struct {
	Error string `json:"error"`
	File  string `json:"file"`
	OK    bool   `json:"ok"`
}

// Check reads file's data as NCCL's parser does and counts its elements; an error is
// what NCCL would refuse.
func Check(file string, data []byte) (CheckReport, error) {
	x, err := Parse(data)
	if err != nil {
		return CheckReport{}, err
	}
	r := CheckReport{File: file, OK: true, Elements: x.Count()}
	x.Walk(func(n *Node) {
		switch n.Name {
		case "cpu":
			r.CPUs++
		case "pci":
			r.PCIs++
		case "gpu":
			r.GPUs++
		}
	})
	return r, nil
}
