package health

import (
	"fmt"
	"io"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/plural"
)

// StatusReport is status -o json (docs/json.md): whether the host is in the desired
// state, the plan that would bring it there, each pool's GPUs, and the quarantined GPUs,
// which are drift too.
type StatusReport struct {
	InSync bool `json:"in_sync"`
	plan.Report
	Pools       []plan.PoolReport `json:"pools"`
	Quarantined []Record          `json:"quarantined"`
}

// NewStatusReport is the status of the host root: p planned, the pools' GPUs, and the
// GPUs quarantined.
func NewStatusReport(root string, p *plan.Plan, pools []plan.PoolReport, quarantined []Record) *StatusReport {
	return &StatusReport{InSync: p.Empty() && len(quarantined) == 0, Report: p.Report(root), Pools: pools, Quarantined: quarantined}
}

// WriteText writes the status for a person: in sync, or each device of p out of place,
// then the quarantined GPUs with what found them broken, then each pool's GPUs.
func (r *StatusReport) WriteText(w io.Writer, p *plan.Plan) {
	writeStatus(w, r.Host, p, r.Quarantined)
	plan.WritePools(w, r.Pools)
}

func writeStatus(w io.Writer, root string, p *plan.Plan, quarantined []Record) {
	held := map[pci.Address]bool{}
	for _, r := range quarantined {
		held[r.Device], held[r.GPU] = true, true
	}
	switch {
	case p.Empty() && len(quarantined) == 0:
		fmt.Fprintf(w, "%s: in sync, %s.\n", root, plan.WhereTheyBelong(len(p.InPlace), ""))
	case p.Empty():
		fmt.Fprintf(w, "%s: NOT IN SYNC, %s quarantined; otherwise %s.\n", root, plural.N(len(quarantined), "device is", "devices are"), plan.WhereTheyBelong(len(p.InPlace), ""))
	default:
		fmt.Fprintf(w, "%s: DRIFT, %s:\n", root, plan.WhereTheyBelong(len(p.Moves), "not "))
		var free, kept int
		for _, m := range p.Moves {
			role := string(m.Role)
			if m.Device != m.GPU {
				role += " of " + m.GPU.String()
			}
			note := ""
			if held[m.Device] || held[m.GPU] {
				note, kept = ", quarantined", kept+1
			} else {
				free++
			}
			fmt.Fprintf(w, "  %s (%s): on %s, should be on %s%s\n", m.Device, role, cellNone(m.From), plan.TargetText(m.To), note)
		}
		if free > 0 {
			fmt.Fprintln(w, "gpusplit apply brings them there.")
		}
		if kept > 0 {
			fmt.Fprintln(w, "A quarantined GPU moves once released (below).")
		}
	}
	if len(quarantined) == 0 {
		return
	}
	fmt.Fprintf(w, "quarantined, kept from every driver and container (gpusplit doctor says what to check):\n")
	for _, r := range quarantined {
		if r.Damaged != "" {
			fmt.Fprintf(w, "  %s  its record is damaged: %s\n", r.Device, r.Damaged)
		} else {
			gpu := ""
			if r.GPU != r.Device {
				gpu = " (of GPU " + r.GPU.String() + ")"
			}
			fmt.Fprintf(w, "  %s%s  found broken by the %s of VM %d at %s:\n", r.Device, gpu, r.Phase, r.Guest, r.Time.Format("2006-01-02 15:04:05 MST"))
			for _, l := range Lines(r.Evidence) {
				fmt.Fprintf(w, "      %s\n", l)
			}
		}
		fmt.Fprintf(w, "    once it works again: gpusplit hook release %s\n", r.Device)
	}
}

func cellNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
