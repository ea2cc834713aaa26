package pve

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
)

// Guest kinds, and where their configs live (links to this node's directories).
const (
	QEMU = "qemu-server"
	LXC  = "lxc"
)

// GuestPath returns the config file of a VM or container on this node.
func GuestPath(kind string, id int) string { return fmt.Sprintf("/etc/pve/%s/%d.conf", kind, id) }

// Guest is a VM or container config, parsed without losing a byte. Only its main section
// (before the first [pending] or [snapshot] header) is ever edited: pending changes and
// snapshots stay as they are.
type Guest struct {
	Name  string
	Kind  string
	ID    int
	lines []line
	// main is the index of the first section header, or len(lines).
	main int
}

var (
	guestKey    = lazyre.New(`^([a-z][a-z_\-]*\d*):\s*(.*?)\s*$`)
	rawLXC      = lazyre.New(`^(lxc\.[a-z0-9_\-.]+)(:|\s*=)\s*(.*?)\s*$`)
	sectionHead = lazyre.New(`^\[[^\]]+\]\s*$`)
)

// ParseGuest reads a VM (kind QEMU) or container (kind LXC) config.
// It refuses bytes that are not text, and CR LF line ends, which Proxmox never writes.
func ParseGuest(name, kind string, id int, data string) (*Guest, error) {
	g := &Guest{Name: name, Kind: kind, ID: id, lines: splitLines(data)}
	if err := notText(name, g.lines, ":"); err != nil {
		return nil, err
	}
	for i, l := range g.lines {
		if l.end == "\r\n" {
			return nil, &LineError{File: name, Line: i + 1, Msg: "the line ends in CR LF (a Windows editor?): Proxmox writes LF only; convert the file (sed -i 's/\\r$//' " + name + ") and run again"}
		}
	}
	g.main = len(g.lines)
	for i, l := range g.lines {
		if sectionHead.MatchString(l.text) {
			g.main = i
			break
		}
	}
	return g, nil
}

// String writes the config back: unchanged parts byte for byte.
func (g *Guest) String() string { return joinLines(g.lines) }

// Key is one key of the main section, with its value and line.
type Key struct {
	Name  string
	Value string
	line  int // index
}

// Keys returns the keys of the main section in file order (raw lxc.* keys included).
func (g *Guest) Keys() []Key {
	var out []Key
	for i := range g.main {
		t := g.lines[i].text
		if m := rawLXC.FindStringSubmatch(t); m != nil {
			out = append(out, Key{Name: m[1], Value: m[3], line: i})
		} else if m := guestKey.FindStringSubmatch(t); m != nil {
			out = append(out, Key{Name: m[1], Value: m[2], line: i})
		}
	}
	return out
}

// Get returns the value of a key of the main section.
func (g *Guest) Get(key string) (string, bool) {
	for _, k := range g.Keys() {
		if k.Name == key {
			return k.Value, true
		}
	}
	return "", false
}

// Set gives a key of the main section a value: in place when it exists, else where
// Proxmox's sorted order puts it (before the raw lxc.* keys, which Proxmox writes last).
func (g *Guest) Set(key, value string) {
	text := key + ": " + value
	var insertAt = -1
	for _, k := range g.Keys() {
		if k.Name == key {
			g.lines[k.line].text = text
			return
		}
		if insertAt < 0 && (strings.HasPrefix(k.Name, "lxc.") || k.Name > key) {
			insertAt = k.line
		}
	}
	if insertAt < 0 {
		// After the last key line of the main section (or at its start).
		insertAt = 0
		for i := range g.main {
			if guestKey.MatchString(g.lines[i].text) || rawLXC.MatchString(g.lines[i].text) {
				insertAt = i + 1
			}
		}
	}
	g.insert(insertAt, line{text: text, end: "\n"})
}

// AddRaw adds a raw lxc.* key line after the last one of the main section (Proxmox keeps
// their order and writes them after the other keys).
func (g *Guest) AddRaw(key, value string) {
	at := -1
	for _, k := range g.Keys() {
		if strings.HasPrefix(k.Name, "lxc.") {
			at = k.line + 1
		}
	}
	if at < 0 {
		for i := range g.main {
			if guestKey.MatchString(g.lines[i].text) {
				at = i + 1
			}
		}
	}
	g.insert(max(at, 0), line{text: key + ": " + value, end: "\n"})
}

// Delete removes every line of a key from the main section; it reports whether any was.
func (g *Guest) Delete(key string) bool {
	return g.DeleteWhere(func(k Key) bool { return k.Name == key }) > 0
}

// DeleteWhere removes the main-section keys for which pred holds, and says how many.
func (g *Guest) DeleteWhere(pred func(Key) bool) int {
	var drop []int
	for _, k := range g.Keys() {
		if pred(k) {
			drop = append(drop, k.line)
		}
	}
	for i := len(drop) - 1; i >= 0; i-- {
		g.lines = slices.Delete(g.lines, drop[i], drop[i]+1)
		g.main--
	}
	return len(drop)
}

func (g *Guest) insert(at int, l line) {
	if at > 0 && g.lines[at-1].end == "" {
		g.lines[at-1].end = "\n" // the file did not end in a newline
	}
	g.lines = slices.Insert(g.lines, at, l)
	g.main++
}

// Locked returns the value of the lock: key; Proxmox refuses most changes while it is set.
func (g *Guest) Locked() (string, bool) { return g.Get("lock") }

// Numbered returns the keys prefix<N> (dev0, hostpci3, numa1) of the main section by N.
func (g *Guest) Numbered(prefix string) map[int]Key {
	out := map[int]Key{}
	for _, k := range g.Keys() {
		if n, ok := strings.CutPrefix(k.Name, prefix); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			i, _ := strconv.Atoi(n)
			out[i] = k
		}
	}
	return out
}

// NumberedInOrder returns the keys prefix<N> of the main section in the order of N.
func (g *Guest) NumberedInOrder(prefix string) []Key {
	m := g.Numbered(prefix)
	out := make([]Key, 0, len(m))
	for _, i := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[i])
	}
	return out
}

// FreeIndex returns the lowest N for which prefix<N> is not set.
func (g *Guest) FreeIndex(prefix string) int {
	used := g.Numbered(prefix)
	for i := 0; ; i++ {
		if _, ok := used[i]; !ok {
			return i
		}
	}
}

// DevPath returns the device path of a devN value: "/dev/nvidia0,gid=44" → "/dev/nvidia0".
func DevPath(value string) string {
	first, _, _ := strings.Cut(value, ",")
	return strings.TrimPrefix(first, "path=")
}
