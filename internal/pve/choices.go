package pve

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
)

// Choice is a value a shell completion offers, with what it names. A completion runs
// while the user waits at a prompt, so these read as little as they can and a file that
// cannot be read costs its description, never the whole list.
type Choice struct {
	Value string
	Desc  string
}

// GuestChoices are the ids of this node's guests of one kind (QEMU or LXC) that start
// with prefix, in order, each with its name: a VM's name, a container's hostname. They
// are listed from the node's own directory, the one the commands read (not the other
// nodes' of the cluster); a config that cannot be read is still offered, by its id.
func GuestChoices(h *host.Host, kind, prefix string) ([]Choice, error) {
	node, err := NodeName(h)
	if err != nil {
		return nil, err
	}
	dir := "/etc/pve/nodes/" + node + "/" + kind
	names, err := h.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	// The key that names a guest differs: a VM's config has name, a container's hostname.
	nameKey := "name"
	if kind == LXC {
		nameKey = "hostname"
	}
	var out []Choice
	for _, id := range guestIDs(names) {
		s := strconv.Itoa(id)
		if !strings.HasPrefix(s, prefix) {
			continue // not read: a TAB on a host of many guests reads only those it offers
		}
		desc := ""
		p := dir + "/" + s + ".conf"
		if data, err := h.ReadFile(p); err == nil && len(data) <= MaxFile {
			if g, err := ParseGuest(p, kind, id, string(data)); err == nil {
				desc, _ = g.Get(nameKey)
			}
		}
		out = append(out, Choice{s, desc})
	}
	return out, nil
}

// guestIDs are the ids of a directory's ID.conf files, by number. Only the names Proxmox
// writes count: a positive id, in decimal, without sign or leading zeros.
func guestIDs(names []string) []int {
	var ids []int
	for _, n := range names {
		id, err := strconv.Atoi(strings.TrimSuffix(n, ".conf"))
		if err == nil && id > 0 && n == strconv.Itoa(id)+".conf" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// MappingChoices are the ids of the cluster's PCI mappings, in the file's order, each
// with its description, or how many entries it has where it has none.
func MappingChoices(h *host.Host) ([]Choice, error) {
	f, err := ReadMappings(h)
	if err != nil {
		return nil, err
	}
	var out []Choice
	for _, m := range f.Mappings {
		desc := m.Props["description"]
		if desc == "" {
			desc = strconv.Itoa(len(m.Maps)) + " entries"
			if len(m.Maps) == 1 {
				desc = "1 entry"
			}
		}
		out = append(out, Choice{m.ID, desc})
	}
	return out, nil
}

// MappingSelectorChoices are the mapping:NAME selectors that choose devices of this
// node: each PCI mapping with an entry here, with the devices it holds here. A host
// without pci.cfg has none, and that is no error.
func MappingSelectorChoices(h *host.Host) ([]Choice, error) {
	if !h.Exists(MappingPath) {
		return nil, nil
	}
	choices, err := MappingChoices(h)
	if err != nil {
		return nil, err
	}
	lookup := MappingLookup(h)
	var out []Choice
	for _, c := range choices {
		if paths, err := lookup(c.Value); err == nil {
			out = append(out, Choice{"mapping:" + c.Value, "PCI mapping " + c.Value + ": " + strings.Join(paths, ", ")})
		}
	}
	return out, nil
}

// BackupChoices are the backup ids, oldest first, each with the file it holds, when it
// was replaced (in local time, as the user reads a clock) and by which command.
func BackupChoices(h *host.Host) ([]Choice, error) {
	list, err := ListBackups(h)
	if err != nil {
		return nil, err
	}
	var out []Choice
	for _, b := range list {
		desc := b.Path + ", replaced " + b.Time.Local().Format("2006-01-02 15:04:05")
		if b.Command != "" {
			desc += " by " + b.Command
		}
		out = append(out, Choice{b.ID, desc})
	}
	return out, nil
}
