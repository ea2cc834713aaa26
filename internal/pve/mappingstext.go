package pve

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/table"
)

// WriteText prints pve mappings for a person, root being the host read: a table of the
// entries, at most width columns wide, with this node's devices and Proxmox's check of
// each, then the lines of pci.cfg left out of it.
func (r *MappingsReport) WriteText(w io.Writer, root string, width int) error {
	if r.Missing {
		fmt.Fprintf(w, "%s: no PCI mappings (%s does not exist).\n", root, MappingPath)
		return nil
	}
	fmt.Fprintf(w, "%s: %d PCI mappings; this node is %s.\n\n", root, r.Mappings, r.Node)
	// The device's name is cut before anything else; a failed check wraps whole.
	t := table.New(
		table.Column{Header: "MAPPING"},
		table.Column{Header: "NODE"},
		table.Column{Header: "PATH"},
		table.Column{Header: "DEVICE", Fit: table.Shorten, Min: 12},
		table.Column{Header: "DRIVER"},
		table.Column{Header: "NUMA"},
		table.Column{Header: "PROXMOX CHECK", Fit: table.Wrap, Sep: "; "},
	)
	for _, e := range r.Entries {
		check, dev, drv, numa := "(other node)", "", "", ""
		if e.Checked {
			check = "ok"
			if len(e.Problems) > 0 {
				check = "FAILS: " + strings.Join(e.Problems, "; ")
			}
			dev, drv = dashIfEmpty(e.Device), e.Driver
			if drv == "" {
				drv = "(none)"
			}
			if e.NUMANode != nil {
				numa = fmt.Sprint(*e.NUMANode)
			}
		}
		t.Add(e.Mapping, e.Node, e.Path, dev, drv, numa, check)
	}
	if err := t.Write(w, width); err != nil {
		return err
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "\n%s not listed, which gpusplit pve sync refuses until fixed:\n", plural.S(len(r.Problems), "line"))
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  problem: %s\n", p)
		}
	}
	return nil
}
