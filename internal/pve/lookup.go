package pve

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// MappingLookup resolves the mapping:NAME selectors on h: the paths of the mapping's
// entries for this node, which are the devices a VM of this node gets through it
// (Proxmox's get_node_mapping). pci.cfg is read once, when a mapping is first asked
// for, so that commands given no mapping: selector read nothing more.
func MappingLookup(h *host.Host) pci.MappingLookup {
	var (
		read bool
		node string
		file *MappingFile
		err  error
	)
	return func(name string) ([]string, error) {
		if !read {
			read = true
			if node, err = NodeName(h); err == nil {
				if !h.Exists(MappingPath) {
					err = fmt.Errorf("this host has no %s, so no Proxmox PCI mapping", MappingPath)
				} else {
					file, err = ReadMappings(h)
				}
			}
		}
		if err != nil {
			return nil, err
		}
		m := file.Mapping(name)
		if m == nil {
			return nil, fmt.Errorf("no PCI mapping %q in %s (%s)", name, MappingPath, nodeMappings(file, node))
		}
		entries := m.NodeMaps(node)
		if len(entries) == 0 {
			var others []string
			for _, e := range m.Maps {
				if !slices.Contains(others, e.Node) {
					others = append(others, e.Node)
				}
			}
			return nil, fmt.Errorf("PCI mapping %q has no device on this node %s, only on %s (%s)", name, node, strings.Join(others, ", "), nodeMappings(file, node))
		}
		var paths []string
		for _, e := range entries {
			paths = append(paths, e.Paths()...)
		}
		return paths, nil
	}
}

// nodeMappings names the mappings that hold devices of node, for an error that must
// say what there is to choose from.
func nodeMappings(f *MappingFile, node string) string {
	var ids []string
	for _, m := range f.Mappings {
		if len(m.NodeMaps(node)) > 0 {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return "no mapping holds a device of this node " + node
	}
	return fmt.Sprintf("the mappings of this node %s: %s", node, strings.Join(ids, ", "))
}
