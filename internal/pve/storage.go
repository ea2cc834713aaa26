package pve

import (
	"fmt"
	"slices"
	"strings"
)

// StoragePath is Proxmox's storage configuration (pve-storage's section config).
const StoragePath = "/etc/pve/storage.cfg"

// Storage is one storage of storage.cfg: "<type>: <id>" and its indented properties.
type Storage struct {
	Type, ID string
	Path     string   // where a file-based storage keeps its files
	Content  []string // "iso", "vztmpl", "backup", "snippets", …
	Nodes    []string // the nodes it is on; none for all
	Disabled bool
	// Shared is the shared property: the storage holds the same files on every node
	// (a directory mounted from elsewhere on each).
	Shared bool
}

// snippetType says whether storage of type typ can hold snippets, and the path of one
// that has no path property: NFS, CIFS and CephFS are mounted at /mnt/pve/<id>
// (pve-storage's NFSPlugin, CIFSPlugin, CephFSPlugin).
func snippetType(typ string) (prefix string, ok bool) {
	switch typ {
	case "dir", "btrfs":
		return "", true
	case "nfs", "cifs", "cephfs":
		return "/mnt/pve/", true
	}
	return "", false
}

// ParseStorage reads storage.cfg. A line that is neither a section header, an
// indented property, a comment nor blank is an error naming its line.
func ParseStorage(data string) ([]Storage, error) {
	var out []Storage
	for i, line := range strings.Split(data, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "" || strings.HasPrefix(t, "#"):
			continue
		case line[0] != ' ' && line[0] != '\t':
			typ, id, ok := strings.Cut(t, ":")
			if !ok || strings.TrimSpace(id) == "" {
				return nil, fmt.Errorf("%s:%d: %q is not a section header (<type>: <id>)", StoragePath, i+1, t)
			}
			out = append(out, Storage{Type: strings.TrimSpace(typ), ID: strings.TrimSpace(id)})
		case len(out) == 0:
			return nil, fmt.Errorf("%s:%d: a property before any storage", StoragePath, i+1)
		default:
			k, v, _ := strings.Cut(t, " ")
			s := &out[len(out)-1]
			v = strings.TrimSpace(v)
			switch k {
			case "path":
				s.Path = v
			case "content":
				s.Content = strings.Split(v, ",")
			case "nodes":
				s.Nodes = strings.Split(v, ",")
			case "disable":
				s.Disabled = v != "0"
			case "shared":
				s.Shared = v != "0"
			}
		}
	}
	for i := range out {
		if prefix, ok := snippetType(out[i].Type); ok && out[i].Path == "" && prefix != "" {
			out[i].Path = prefix + out[i].ID
		}
	}
	return out, nil
}

// SnippetsDir returns where a storage keeps snippets, and whether it can hold them on
// node: a file-based type, enabled, on that node, with snippets in its content
// (Proxmox's GUI and pvesm only offer such storages).
func (s Storage) SnippetsDir(node string) (string, bool) {
	if _, ok := snippetType(s.Type); !ok || s.Disabled || s.Path == "" || !slices.Contains(s.Content, "snippets") {
		return "", false
	}
	if len(s.Nodes) > 0 && !slices.Contains(s.Nodes, node) {
		return "", false
	}
	return s.Path + "/snippets", true
}

// IsShared reports whether every node sees the same files in the storage: one marked
// shared, or of a network type, which pve-storage always takes as shared. A snippet on
// any other (dir: local) is on this node alone.
func (s Storage) IsShared() bool {
	if s.Shared {
		return true
	}
	switch s.Type {
	case "nfs", "cifs", "cephfs", "glusterfs", "rbd", "iscsi", "iscsidirect", "pbs":
		return true
	}
	return false
}
