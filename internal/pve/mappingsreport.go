package pve

import (
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// MappingsReport is pve mappings -o json (docs/json.md): every entry of every PCI
// mapping, with what this node's entries point to and whether Proxmox's check passes.
type MappingsReport struct {
	Node    string       `json:"node"`
	Entries []MappingRow `json:"entries"`
	// Missing: there is no pci.cfg, and so no entries.
	Missing bool `json:"-"`
	// Mappings is how many mappings pci.cfg holds.
	Mappings int `json:"-"`
	// Problems are the lines of pci.cfg that Proxmox would refuse or read otherwise
	// ("FILE:LINE: why"): each is left out of Entries, with the section it spoils,
	// and the others are listed.
	Problems []string `json:"problems"`
}

// MappingRow is one entry of a mapping. Checked is true for this node's entries, whose
// device, driver and NUMA node are this host's and whose Problems are what Proxmox's
// check at a VM's start finds.
type MappingRow struct {
	Mapping  string   `json:"mapping"`
	Node     string   `json:"node"`
	Path     string   `json:"path"`
	ID       string   `json:"id"`
	Device   string   `json:"device"`
	Driver   string   `json:"driver"`
	NUMANode *int     `json:"numa_node"`
	Checked  bool     `json:"checked"`
	Problems []string `json:"problems"`
}

// ReportMappings reads pci.cfg and checks this node's entries against the devices of
// t; model names a device.
func ReportMappings(h *host.Host, t *pci.Tree, model func(*pci.Device) string) (*MappingsReport, error) {
	node, err := NodeName(h)
	if err != nil {
		return nil, err
	}
	rep := &MappingsReport{Node: node, Entries: []MappingRow{}, Problems: []string{}}
	if !h.Exists(MappingPath) {
		rep.Missing = true
		return rep, nil
	}
	data, err := readMappings(h)
	if err != nil {
		return nil, err
	}
	f, problems, err := ParseMappingsLenient(MappingPath, data)
	if err != nil {
		return nil, err
	}
	for _, p := range problems {
		rep.Problems = append(rep.Problems, p.Error())
	}
	rep.Mappings = len(f.Mappings)
	for _, m := range f.Mappings {
		for _, e := range m.Maps {
			r := MappingRow{Mapping: m.ID, Node: e.Node, Path: e.Path, ID: e.ID, Problems: []string{}}
			if e.Node == node {
				r.Checked = true
				r.Problems = append(r.Problems, Check(t, e)...)
				first, _, _ := strings.Cut(e.Path, ";")
				if !strings.Contains(first, ".") {
					first += ".0"
				}
				if a, err := pci.ParseAddress(first); err == nil {
					if d := t.Lookup(a); d != nil {
						r.Device, r.Driver = model(d), d.Driver
						n := d.NUMANode
						r.NUMANode = &n
					}
				}
			}
			rep.Entries = append(rep.Entries, r)
		}
	}
	return rep, nil
}
