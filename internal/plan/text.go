package plan

import (
	"fmt"
	"io"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/plural"
	layout "github.com/gpusplit/gpusplit/internal/table"
)

// WriteText prints the plan for a person, root being the machine planned on: the moves
// by IOMMU group, or that there is nothing to do, and the warnings. The table is at most
// width columns wide (layout.Wide: every column): ROLE goes first, then names are cut
// and holders wrapped.
func (p *Plan) WriteText(w io.Writer, root string, width int) error {
	if p.Empty() {
		fmt.Fprintf(w, "%s: nothing to do, %s.\n", root, WhereTheyBelong(len(p.InPlace), ""))
		for _, warn := range p.Warnings {
			fmt.Fprintf(w, "warning: %s\n", warn)
		}
		return nil
	}
	fmt.Fprintf(w, "%s: %s in %s; %s already in place.\n\n", root, plural.S(len(p.Moves), "move"), plural.S(len(p.Groups()), "IOMMU group"), plural.S(len(p.InPlace), "device"))
	t := layout.New(
		layout.Column{Header: "IOMMU"},
		layout.Column{Header: "DEVICE"},
		layout.Column{Header: "ROLE", Drop: 1},
		layout.Column{Header: "NAME", Fit: layout.Shorten, Min: 12},
		layout.Column{Header: "NUMA"},
		layout.Column{Header: "FROM"},
		layout.Column{Header: "TO"},
		layout.Column{Header: "HELD BY", Fit: layout.Wrap, Sep: "; "},
	)
	for _, m := range p.Moves {
		t.Add(group(m.IOMMUGroup), m.Device.String(), string(m.Role), inventory.ShortName(m.Name),
			fmt.Sprint(m.NUMANode), cellNone(m.From), TargetText(m.To), inventory.HeldBy(m.Holders))
	}
	if err := t.Write(w, width); err != nil {
		return err
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "\nwarning: %s\n", warn)
	}
	return nil
}

// TargetText is a move's target driver in a table: Default as "(default)".
func TargetText(to string) string {
	if to == Default {
		return "(default)"
	}
	return to
}

// WhereTheyBelong words how many devices are (or, with not, are not) where they belong.
func WhereTheyBelong(n int, not string) string {
	if n == 1 {
		return "1 device is " + not + "where it belongs"
	}
	if not == "" {
		return fmt.Sprintf("all %d devices are where they belong", n)
	}
	return fmt.Sprintf("%d devices are %swhere they belong", n, not)
}

func group(g int) string {
	if g < 0 {
		return "-"
	}
	return fmt.Sprint(g)
}

// cellNone is a table's cell of a driver: "(none)" for no driver.
func cellNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// WritePools lists each pool's GPUs for a person: on which driver, and whether at rest
// or held by a VM.
func WritePools(w io.Writer, pools []PoolReport) {
	for _, pj := range pools {
		resting := pj.Resting
		if resting == "" {
			resting = "its vendor's driver"
		}
		fmt.Fprintf(w, "pool %s (rests on %s):\n", pj.Name, resting)
		for _, gp := range pj.GPUs {
			var state string
			switch {
			case gp.HeldBy != 0:
				state = fmt.Sprintf("held by VM %d", gp.HeldBy)
			case gp.InPlace:
				state = "at rest"
			default:
				state = "no VM holds it: it belongs on " + resting
			}
			fmt.Fprintf(w, "  %s  on %s, %s\n", gp.Device, cellNone(gp.Driver), state)
		}
	}
}
