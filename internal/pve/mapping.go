// Package pve reads and edits Proxmox VE's configuration files without losing anything:
// /etc/pve/mapping/pci.cfg (PCI mappings), /etc/pve/lxc/<id>.conf and
// /etc/pve/qemu-server/<id>.conf. What gpusplit does not change stays byte for byte;
// what it writes has exactly the form Proxmox writes, so Proxmox reads it back unchanged.
// The traps that make Proxmox misread a file are refused with the line, never "fixed".
package pve

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// MappingPath is the cluster-wide file of PCI mappings.
const MappingPath = "/etc/pve/mapping/pci.cfg"

// line is one line of a file, with its end ("\n", "\r\n" or "" for the last).
type line struct {
	text string
	end  string
}

func splitLines(data string) []line {
	var out []line
	for len(data) > 0 {
		i := strings.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, line{text: data})
			break
		}
		t := data[:i]
		end := "\n"
		if strings.HasSuffix(t, "\r") {
			t, end = t[:len(t)-1], "\r\n"
		}
		out = append(out, line{text: t, end: end})
		data = data[i+1:]
	}
	return out
}

func joinLines(ls []line) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.text)
		b.WriteString(l.end)
	}
	return b.String()
}

// notText refuses bytes no Proxmox config holds: NUL and the other control characters
// but TAB (a binary file, or one damaged on disk), and invalid UTF-8 in a key (the line's
// text before sep). Proxmox would skip such a line and go on; gpusplit stops before it
// edits a file it cannot read as Proxmox does.
func notText(name string, lines []line, sep string) error {
	for i, l := range lines {
		for col, r := range l.text {
			if (r < 0x20 && r != '\t') || r == 0x7f {
				return &LineError{File: name, Line: i + 1, Msg: fmt.Sprintf("byte 0x%02x at column %d is not text: this is not a config Proxmox wrote; restore it from a backup", r, col+1)}
			}
		}
		key, _, _ := strings.Cut(strings.TrimLeft(l.text, " \t"), sep)
		if !strings.HasPrefix(key, "#") && !utf8.ValidString(key) {
			return &LineError{File: name, Line: i + 1, Msg: fmt.Sprintf("the key %q is not valid UTF-8: this is not a config Proxmox wrote; restore it from a backup", key)}
		}
	}
	return nil
}

// LineError is a problem on a line of a file.
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// MapEntry is one `map` line of a mapping: a device on a node.
type MapEntry struct {
	Node        string
	Path        string // "0000:81:00.0", "0000:81:00" (all functions), or several joined by ';'
	ID          string // vendor:device
	SubsystemID string
	IOMMUGroup  string // "" when absent
	Description string
	raw         string // the property string as written
	line        int    // 1-based line in the file; 0 for a new entry
}

// String writes the entry as the Proxmox GUI does: keys sorted.
func (m MapEntry) String() string {
	if m.raw != "" {
		return m.raw
	}
	parts := []string{}
	if m.Description != "" {
		parts = append(parts, "description="+m.Description)
	}
	parts = append(parts, "id="+m.ID)
	if m.IOMMUGroup != "" {
		parts = append(parts, "iommugroup="+m.IOMMUGroup)
	}
	parts = append(parts, "node="+m.Node, "path="+m.Path)
	if m.SubsystemID != "" {
		parts = append(parts, "subsystem-id="+m.SubsystemID)
	}
	return strings.Join(parts, ",")
}

// Paths returns the device paths of the entry (split at ';').
func (m MapEntry) Paths() []string { return strings.Split(m.Path, ";") }

// Mapping is one section of pci.cfg.
type Mapping struct {
	ID      string
	Maps    []MapEntry
	Props   map[string]string // description, mdev, live-migration-capable
	start   int               // index of the header line
	end     int               // index after the last property line
	propIdx []int             // line indexes of the property lines
}

// NodeMaps returns the entries of a node.
func (m *Mapping) NodeMaps(node string) []MapEntry {
	var out []MapEntry
	for _, e := range m.Maps {
		if e.Node == node {
			out = append(out, e)
		}
	}
	return out
}

// MappingFile is pci.cfg, parsed without losing a byte.
type MappingFile struct {
	Name     string
	Mappings []*Mapping
	lines    []line
}

var (
	pciPath   = lazyre.New(`^[a-f0-9]{4,}:[a-f0-9]{2}:[a-f0-9]{2}(\.[a-f0-9])?$`)
	hexID     = lazyre.New(`^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}$`)
	nodeName  = lazyre.New(`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$`)
	mapKeys   = []string{"description", "id", "iommugroup", "node", "path", "subsystem-id"}
	boolProps = []string{"mdev", "live-migration-capable"}
)

// ParseMappings reads pci.cfg. It refuses, naming the line, what would make Proxmox read
// the file otherwise than it looks: a blank line holding spaces, tabs or a CR (Proxmox
// merges the next section into the previous one), a section without a valid map line
// (Proxmox then refuses every write of the file), an upper-case or malformed path, a
// duplicate mapping id, an unknown key. Comments are kept.
func ParseMappings(name, data string) (*MappingFile, error) {
	f, problems, err := parseMappings(name, data, false)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, problems[0]
	}
	return f, nil
}

// ParseMappingsLenient is ParseMappings for a reader that lists what the file holds (pve
// mappings): the lines ParseMappings refuses are skipped, with the section they spoil,
// and returned as problems, so that one malformed line does not hide every mapping.
// Only bytes that are not text fail it. What it returns must never be written back.
func ParseMappingsLenient(name, data string) (*MappingFile, []*LineError, error) {
	return parseMappings(name, data, true)
}

// parseMappings reads pci.cfg. Strict, it stops at the first problem; lenient, it
// carries on past each one: a bad line is dropped, a bad header drops its section.
func parseMappings(name, data string, lenient bool) (*MappingFile, []*LineError, error) {
	f := &MappingFile{Name: name, lines: splitLines(data)}
	if err := notText(name, f.lines, " "); err != nil {
		return nil, nil, err
	}
	var problems []*LineError
	// problem records one; it says whether to carry on.
	problem := func(i int, format string, args ...any) bool {
		problems = append(problems, &LineError{File: name, Line: i + 1, Msg: fmt.Sprintf(format, args...)})
		return lenient
	}
	seen := map[string]int{}
	var cur *Mapping
	skipping := false // the lines of a section whose header was refused
	closeSection := func(end int) bool {
		skipping = false
		if cur == nil {
			return true
		}
		m := cur
		cur = nil
		m.end = end
		if len(m.Maps) == 0 {
			return problem(m.start, "mapping %q has no valid map line: Proxmox skips the section and then refuses to write %s until it is fixed", m.ID, MappingPath)
		}
		f.Mappings = append(f.Mappings, m)
		return true
	}
	for i, l := range f.lines {
		t := l.text
		switch {
		case strings.HasPrefix(strings.TrimLeft(t, " \t"), "#"):
			continue
		case t == "" && l.end != "\r\n":
			if !closeSection(i) {
				return nil, problems, nil
			}
			continue
		case strings.TrimSpace(t) == "":
			if !problem(i, "this blank line holds spaces, tabs or a carriage return: Proxmox does not see it as the end of a section and merges the next section into the one above; make it truly empty") {
				return nil, problems, nil
			}
			if !closeSection(i) {
				return nil, problems, nil
			}
		case t[0] != ' ' && t[0] != '\t':
			if cur != nil || skipping {
				if cur != nil && !problem(i, "header %q follows section %q without an empty line: Proxmox reads it as a property of %q", strings.TrimSpace(t), cur.ID, cur.ID) {
					return nil, problems, nil
				}
				if !closeSection(i) {
					return nil, problems, nil
				}
			}
			id := strings.TrimRight(t, " \t")
			if !plan.ValidMappingID(id) {
				if !problem(i, "%q is not a mapping id (a letter, then letters, digits, - or _)", id) {
					return nil, problems, nil
				}
				skipping = true
				continue
			}
			if j, ok := seen[id]; ok {
				if !problem(i, "mapping %q is defined twice (first on line %d): Proxmox silently keeps only the last", id, j+1) {
					return nil, problems, nil
				}
				skipping = true
				continue
			}
			seen[id] = i
			cur = &Mapping{ID: id, Props: map[string]string{}, start: i}
		case skipping:
			continue
		default:
			if cur == nil {
				if !problem(i, "property line outside a section") {
					return nil, problems, nil
				}
				continue
			}
			key, val, _ := strings.Cut(strings.TrimLeft(t, " \t"), " ")
			val = strings.TrimSpace(val)
			cur.propIdx = append(cur.propIdx, i)
			switch {
			case key == "map":
				e, err := parseMapEntry(val)
				if err != nil {
					if !problem(i, "mapping %q: %v", cur.ID, err) {
						return nil, problems, nil
					}
					continue
				}
				e.line = i + 1
				cur.Maps = append(cur.Maps, e)
			case key == "description":
				cur.Props[key] = val
			case slices.Contains(boolProps, key):
				if val != "0" && val != "1" {
					if !problem(i, "mapping %q: %s %q: Proxmox accepts only 0 or 1 here and skips the whole section otherwise", cur.ID, key, val) {
						return nil, problems, nil
					}
					continue
				}
				cur.Props[key] = val
			default:
				if !problem(i, "mapping %q: unknown key %q: Proxmox drops it at its next write", cur.ID, key) {
					return nil, problems, nil
				}
			}
		}
	}
	if !closeSection(len(f.lines)) {
		return nil, problems, nil
	}
	return f, problems, nil
}

// parseMapEntry reads a map property string with Proxmox's rules: comma-separated
// key=value, no empty values, no duplicate or unknown keys, anchored patterns.
func parseMapEntry(s string) (MapEntry, error) {
	e := MapEntry{raw: s}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" || v == "" {
			return e, fmt.Errorf("map %q: %q is not key=value", s, part)
		}
		if seen[k] {
			return e, fmt.Errorf("map %q: key %q twice", s, k)
		}
		seen[k] = true
		switch k {
		case "node":
			if !nodeName.MatchString(v) {
				return e, fmt.Errorf("map %q: node %q is not a node name", s, v)
			}
			e.Node = v
		case "path":
			for _, p := range strings.Split(v, ";") {
				if !pciPath.MatchString(p) {
					if pciPath.MatchString(strings.ToLower(p)) {
						return e, fmt.Errorf("map %q: path %q is upper case; Proxmox rejects it (write %s)", s, p, strings.ToLower(p))
					}
					return e, fmt.Errorf("map %q: path %q is not a PCI address with its domain (0000:81:00.0)", s, p)
				}
			}
			e.Path = v
		case "id", "subsystem-id":
			if !hexID.MatchString(v) {
				return e, fmt.Errorf("map %q: %s %q is not vendor:device", s, k, v)
			}
			if k == "id" {
				e.ID = v
			} else {
				e.SubsystemID = v
			}
		case "iommugroup":
			if strings.Trim(v, "0123456789") != "" {
				return e, fmt.Errorf("map %q: iommugroup %q is not a number", s, v)
			}
			e.IOMMUGroup = v
		case "description":
			e.Description = v
		default:
			return e, fmt.Errorf("map %q: unknown key %q (known: %s)", s, k, strings.Join(mapKeys, ", "))
		}
	}
	for _, k := range []string{"node", "path", "id"} {
		if !seen[k] {
			return e, fmt.Errorf("map %q lacks %s", s, k)
		}
	}
	return e, nil
}

// Mapping returns the mapping with the id, or nil.
func (f *MappingFile) Mapping(id string) *Mapping {
	for _, m := range f.Mappings {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// String writes the file back: unchanged parts byte for byte.
func (f *MappingFile) String() string { return joinLines(f.lines) }

// SetNodeMaps replaces the map lines of one node in a mapping, keeping the other nodes'
// lines where they are; new lines go where this node's first line was, or after the
// mapping's last map line. A mapping that does not exist is added at the end of the file,
// with props (description, live-migration-capable, mdev) where given. A mapping left
// without any map line is removed, since Proxmox cannot keep a mapping without one.
func (f *MappingFile) SetNodeMaps(id, node string, entries []MapEntry, props map[string]string) error {
	m := f.Mapping(id)
	newLines := make([]line, 0, len(entries))
	for _, e := range entries {
		e.raw = ""
		newLines = append(newLines, line{text: "\tmap " + e.String(), end: "\n"})
	}
	if m == nil {
		if len(entries) == 0 {
			return nil
		}
		section := []line{{text: id, end: "\n"}}
		section = append(section, newLines...)
		// Proxmox writes the optional keys after map, in sorted order (SectionConfig's
		// write_config): description, live-migration-capable, mdev.
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if props[k] != "" {
				section = append(section, line{text: "\t" + k + " " + props[k], end: "\n"})
			}
		}
		section = append(section, line{text: "", end: "\n"})
		// The file must end in an empty line before a new section.
		if n := len(f.lines); n > 0 && (f.lines[n-1].text != "" || f.lines[n-1].end == "") {
			if f.lines[n-1].end == "" {
				f.lines[n-1].end = "\n"
			}
			f.lines = append(f.lines, line{text: "", end: "\n"})
		}
		f.lines = append(f.lines, section...)
		return f.reparse()
	}
	var keep []MapEntry
	for _, e := range m.Maps {
		if e.Node != node {
			keep = append(keep, e)
		}
	}
	if len(keep) == 0 && len(entries) == 0 {
		// Remove the whole section with its terminating empty line.
		end := m.end
		if end < len(f.lines) && f.lines[end].text == "" {
			end++
		}
		f.lines = slices.Delete(f.lines, m.start, end)
		return f.reparse()
	}
	// Where this node's lines go: at its first map line, else after the last map line.
	insertAt := -1
	var drop []int
	lastMap := m.start
	for _, idx := range m.propIdx {
		key, val, _ := strings.Cut(strings.TrimLeft(f.lines[idx].text, " \t"), " ")
		if key != "map" {
			continue
		}
		lastMap = idx
		if e, err := parseMapEntry(strings.TrimSpace(val)); err == nil && e.Node == node {
			if insertAt < 0 {
				insertAt = idx
			}
			drop = append(drop, idx)
		}
	}
	if insertAt < 0 {
		insertAt = lastMap + 1
	}
	var out []line
	for i, l := range f.lines {
		if i == insertAt {
			out = append(out, newLines...)
		}
		if !slices.Contains(drop, i) {
			out = append(out, l)
		}
	}
	if insertAt >= len(f.lines) {
		out = append(out, newLines...)
	}
	f.lines = out
	return f.reparse()
}

func (f *MappingFile) reparse() error {
	g, err := ParseMappings(f.Name, f.String())
	if err != nil {
		return fmt.Errorf("the edit of %s would not read back (%v); nothing was written", f.Name, err)
	}
	*f = *g
	return nil
}
