package pve

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
)

// HookSnippet is the name of gpusplit's hookscript snippet; a guest's own is
// HookSnippet-<id>. Both names are gpusplit's whether or not the file exists on this
// node: a guest's config is the cluster's, its snippets are each node's.
const HookSnippet = "gpusplit-hook"

// hookMark is in every snippet gpusplit writes.
const hookMark = "# gpusplit pve hook install"

// The comment lines of a snippet that say what it is.
const (
	guestMark = "# guest: "
	chainMark = "# chained: "
)

// IsHookSnippetName reports whether a snippet file name is gpusplit's.
func IsHookSnippetName(name string) bool {
	if name == HookSnippet {
		return true
	}
	id, ok := strings.CutPrefix(name, HookSnippet+"-")
	n, err := strconv.Atoi(id)
	return ok && err == nil && n > 0 && strconv.Itoa(n) == id
}

// SnippetName is the snippet a guest's hookscript is gpusplit's from: the shared one
// when it only runs gpusplit hook, the guest's own when it chains a script or passes
// options of its own.
func SnippetName(guest int, own bool) string {
	if !own {
		return HookSnippet
	}
	return fmt.Sprintf("%s-%d", HookSnippet, guest)
}

// SnippetVolume splits a hookscript volume, "<storage>:snippets/<file>".
func SnippetVolume(vol string) (storage, file string, err error) {
	storage, rest, ok := strings.Cut(vol, ":")
	file, isSnippet := strings.CutPrefix(rest, "snippets/")
	if !ok || storage == "" || !isSnippet || file == "" || strings.Contains(file, "/") || file == "." || file == ".." {
		return "", "", fmt.Errorf("%q is not a snippet volume (<storage>:snippets/<file>)", vol)
	}
	return storage, file, nil
}

// HookScript is what a snippet of gpusplit's runs.
type HookScript struct {
	// Guest is the guest the snippet was made for; 0 for the shared one.
	Guest int
	// Binary is the gpusplit it runs, as the host sees it.
	Binary string
	// Deadline is passed to gpusplit hook --deadline; "" passes none.
	Deadline string
	// Chained is the hookscript it runs after gpusplit hook (a volume), and ChainedPath
	// that volume's file on this node; "" for none.
	Chained, ChainedPath string
}

// Render is the snippet's text. A chained script runs in every phase but a pre-start
// that gpusplit refused (Proxmox refuses the start then anyway, and the script must not
// prepare a guest that does not start); gpusplit's non-zero status wins over the
// script's, so a failure of either is seen.
func (s HookScript) Render() string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	run := shellQuote(s.Binary) + " hook"
	if s.Deadline != "" {
		run += " --deadline " + shellQuote(s.Deadline)
	}
	run += ` "$@"`
	if s.Chained == "" {
		b.WriteString(hookMark + ": the guest's GPUs follow it (gpusplit hook --help).\n")
		if s.Guest != 0 {
			fmt.Fprintf(&b, "%s%d\n", guestMark, s.Guest)
		}
		b.WriteString("exec " + run + "\n")
		return b.String()
	}
	b.WriteString(hookMark + ": the guest's GPUs follow it, then its own hookscript runs.\n")
	if s.Guest != 0 {
		fmt.Fprintf(&b, "%s%d\n", guestMark, s.Guest)
	}
	b.WriteString(chainMark + s.Chained + "\n")
	b.WriteString(run + "\n")
	b.WriteString("rc=$?\n")
	b.WriteString("# A refused start is refused anyway: the guest's script does not prepare it.\n")
	b.WriteString(`if [ "$rc" -ne 0 ] && [ "$2" = pre-start ]; then exit "$rc"; fi` + "\n")
	b.WriteString(shellQuote(s.ChainedPath) + ` "$@"` + "\n")
	b.WriteString("own=$?\n")
	b.WriteString(`if [ "$rc" -ne 0 ]; then exit "$rc"; fi` + "\n")
	b.WriteString(`exit "$own"` + "\n")
	return b.String()
}

// ParseHookScript reads a snippet: ok is false for a file gpusplit did not write.
func ParseHookScript(body string) (HookScript, bool) {
	var s HookScript
	if !strings.Contains(body, hookMark) {
		return s, false
	}
	for _, line := range strings.Split(body, "\n") {
		switch {
		case strings.HasPrefix(line, guestMark):
			s.Guest, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, guestMark)))
		case strings.HasPrefix(line, chainMark):
			s.Chained = strings.TrimSpace(strings.TrimPrefix(line, chainMark))
		case strings.HasPrefix(line, "#"), strings.HasPrefix(line, "if "), strings.HasPrefix(line, "rc="),
			strings.HasPrefix(line, "own="), strings.HasPrefix(line, "exit "):
		case s.Binary == "":
			words := shellWords(strings.TrimPrefix(line, "exec "))
			if len(words) >= 2 && words[1] == "hook" {
				s.Binary = words[0]
				if len(words) >= 4 && words[2] == "--deadline" {
					s.Deadline = words[3]
				}
			}
		case s.Chained != "" && s.ChainedPath == "":
			if words := shellWords(line); len(words) > 0 {
				s.ChainedPath = words[0]
			}
		}
	}
	return s, true
}

// shellQuote quotes a word for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shellWords splits a line as sh would for the forms Render writes: words of plain
// letters, single-quoted parts, backslash escapes, and "$@".
func shellWords(line string) []string {
	var out []string
	var cur strings.Builder
	in, quoted, dq, esc := false, false, false, false
	for _, r := range line {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case quoted:
			if r == '\'' {
				quoted = false
			} else {
				cur.WriteRune(r)
			}
		case dq:
			if r == '"' {
				dq = false
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			esc, in = true, true
		case r == '\'':
			quoted, in = true, true
		case r == '"':
			dq, in = true, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// SnippetUser is a guest config that names a snippet as its hookscript.
type SnippetUser struct {
	ID   int
	Kind string // QEMU or LXC
	Node string
	// Section is "" for the config itself, else the snapshot (or pending section) that
	// names it: a rollback sets it again.
	Section string
}

// Label is "VM 131", "CT 129", with the snapshot where it is one.
func (u SnippetUser) Label() string {
	l := fmt.Sprintf("VM %d", u.ID)
	if u.Kind == LXC {
		l = fmt.Sprintf("CT %d", u.ID)
	}
	if u.Section != "" {
		l += " (snapshot " + u.Section + ")"
	}
	return l
}

// SnippetUsers are the guests, on every node, whose config names the snippet volume
// vol as their hookscript, in their main section or a snapshot's. Guest ids are the
// cluster's, VMs and containers together, so a snippet named by any of them is in use.
// A config that cannot be read is counted as a user (with a note): better a file kept
// than a guest that cannot start.
func SnippetUsers(h *host.Host, vol string) ([]SnippetUser, []string, error) {
	storage, file, err := SnippetVolume(vol)
	if err != nil {
		return nil, nil, err
	}
	nodes, err := h.ReadDir(NodesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var users []SnippetUser
	var notes []string
	for _, node := range nodes {
		if !nodeName.MatchString(node) || !h.IsDir(NodesDir+"/"+node) {
			continue
		}
		for _, kind := range []string{QEMU, LXC} {
			dir := NodesDir + "/" + node + "/" + kind
			names, err := h.ReadDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			for _, n := range names {
				id, err := strconv.Atoi(strings.TrimSuffix(n, ".conf"))
				if err != nil || !strings.HasSuffix(n, ".conf") || id < 100 {
					continue
				}
				data, err := readSmall(h, dir+"/"+n)
				if err != nil {
					notes = append(notes, fmt.Sprintf("%s/%s: not read (%v): taken as naming %s", dir, n, err, vol))
					users = append(users, SnippetUser{ID: id, Kind: kind, Node: node})
					continue
				}
				for _, sec := range hookscriptsOf(string(data)) {
					if s, f, err := SnippetVolume(sec[1]); err == nil && s == storage && f == file {
						users = append(users, SnippetUser{ID: id, Kind: kind, Node: node, Section: sec[0]})
					}
				}
			}
		}
	}
	return users, notes, nil
}

// hookscriptsOf returns the hookscript lines of a guest config: {section, value}, the
// main section's section "".
func hookscriptsOf(data string) [][2]string {
	var out [][2]string
	section := ""
	for _, line := range strings.Split(data, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
			section = strings.TrimSuffix(strings.TrimPrefix(t, "["), "]")
			continue
		}
		if v, ok := strings.CutPrefix(t, "hookscript:"); ok {
			out = append(out, [2]string{section, strings.TrimSpace(v)})
		}
	}
	return out
}

// OthersThan are the users but guest id's own config (its snapshots stay users).
func OthersThan(users []SnippetUser, id int) []SnippetUser {
	var out []SnippetUser
	for _, u := range users {
		if u.ID != id || u.Section != "" {
			out = append(out, u)
		}
	}
	return out
}

// NodeWhy is a node a guest may start on, and why.
type NodeWhy struct {
	Node string
	Why  []string
}

// GuestNodes are the nodes besides its own where a guest may start, as far as /etc/pve
// tells: where HA may recover it (the nodes of its strict node-affinity rule, or every
// node), the targets of its replication, and, unless a strict HA rule keeps it on its
// nodes, every other member, where a migration may take it. own is the node whose
// directory holds its config ("" when none does). Without .members the members are the
// nodes that have guest directories, with a note.
func GuestNodes(h *host.Host, kind string, id int) (own string, others []NodeWhy, notes []string, err error) {
	c := &Cluster{}
	data, err := readSmall(h, MembersPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		notes = append(notes, MembersPath+" is missing: the cluster's nodes are taken from "+NodesDir)
	case err != nil:
		return "", nil, nil, err
	default:
		if c.Members, err = ParseMembers(data); err != nil {
			return "", nil, nil, err
		}
		c.Node = c.Members.Node
	}
	if c.Node == "" {
		if c.Node, err = NodeName(h); err != nil {
			return "", nil, nil, err
		}
	}
	dirs, err := h.ReadDir(NodesDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil, err
	}
	for _, node := range dirs {
		if !nodeName.MatchString(node) || !h.IsDir(NodesDir+"/"+node) {
			continue
		}
		c.dirs = append(c.dirs, node)
		if own == "" && h.Exists(fmt.Sprintf("%s/%s/%s/%d.conf", NodesDir, node, kind, id)) {
			own = node
		}
	}
	ha, _, err := c.readHA(h)
	if err != nil {
		return "", nil, nil, err
	}
	reps, err := c.readReplication(h)
	if err != nil {
		return "", nil, nil, err
	}
	notes = append(notes, c.Notes...)
	sid := "vm:" + strconv.Itoa(id)
	if kind == LXC {
		sid = "ct:" + strconv.Itoa(id)
	}
	g := ClusterGuest{ID: id, Kind: kind, Node: own, HA: ha[sid], Replication: reps[id]}
	if own == "" {
		g.Node = c.Node
	}
	for _, t := range c.targets(g) {
		others = append(others, NodeWhy{Node: t.node, Why: t.why})
	}
	if g.HA == nil || g.HA.Affinity == nil || !g.HA.Affinity.Strict {
		for _, n := range c.clusterNodes() {
			if n == g.Node || slices.ContainsFunc(others, func(o NodeWhy) bool { return o.Node == n }) {
				continue
			}
			others = append(others, NodeWhy{Node: n, Why: []string{"a migration may move it there"}})
		}
	}
	slices.SortFunc(others, func(a, b NodeWhy) int { return strings.Compare(a.Node, b.Node) })
	return own, others, notes, nil
}

// SnippetNodes says, for the nodes besides this one where a guest may start, where its
// snippet on storage s must be installed too (s is local to each node: it is not
// shared), and where s is not at all (the storage is limited to other nodes: the guest
// does not start there with this hookscript).
func SnippetNodes(s Storage, others []NodeWhy) (install, missing []NodeWhy) {
	for _, o := range others {
		switch {
		case len(s.Nodes) > 0 && !slices.Contains(s.Nodes, o.Node):
			missing = append(missing, o)
		case !s.IsShared():
			install = append(install, o)
		}
	}
	return install, missing
}
