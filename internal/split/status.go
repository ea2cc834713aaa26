package split

import (
	"fmt"
	"io"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// StatusReport is status -o json (docs/json.md): the drivers' status, with the pools and
// the quarantined GPUs, and the other parts' drift.
type StatusReport struct {
	*health.StatusReport
	*Parts
	plan   *plan.Plan
	change *Change
	// others is the drift of the parts beside the drivers.
	others []PartDrift
}

// Status compares the host with the planned split, part by part: the drivers (with the
// pools a VM holds and the GPUs quarantined) and the change of the other parts (Change,
// for command). next is the command that brings the host in line, given when it is not.
// Quarantine records it cannot read are a warning (pl.Source.Warn) and in the report.
func (pl *Planned) Status(command, next string) (*StatusReport, error) {
	pools := pl.Plan.Pools(pl.Desired)
	// A GPU that came back broken from a VM is kept from its driver and its containers
	// until released: the host is not where it belongs.
	quarantined, err := health.List(pl.H)
	var warnings []string
	if err != nil {
		quarantined = []health.Record{}
		warnings = append(warnings, fmt.Sprintf("quarantined GPUs cannot be seen: %v (the records are root's)", err))
		if pl.Source.Warn != nil {
			pl.Source.Warn(warnings)
		}
	}
	ch, err := pl.Change(command)
	if err != nil {
		return nil, err
	}
	r := &StatusReport{StatusReport: health.NewStatusReport(pl.Inv.Root, pl.Plan, pools, quarantined), plan: pl.Plan, change: ch}
	r.Warnings = append(r.Warnings, warnings...)
	r.others = ch.Drift()
	if len(r.others) > 0 && len(pl.Plan.Moves) > 0 {
		r.others = r.others[1:] // the drivers', which the status report has
	}
	if len(r.others) == 0 && r.InSync {
		next = ""
	}
	r.InSync = r.InSync && len(r.others) == 0
	parts := ch.Parts(next)
	r.Parts = &parts
	return r, nil
}

// WriteText prints the status at most width columns wide where it can: the drivers and
// pools, the parts in sync or drifted, and the command that follows.
func (r *StatusReport) WriteText(w io.Writer, width int) {
	if len(r.others) > 0 && r.plan.Empty() && len(r.Quarantined) == 0 {
		fmt.Fprintf(w, "%s: DRIFT: the drivers are as the split asks, the rest is not:\n", r.Host)
		plan.WritePools(w, r.Pools)
	} else {
		r.StatusReport.WriteText(w, r.plan)
	}
	if r.InSync {
		r.change.WriteInSync(w)
	}
	r.change.WriteDrift(w, width)
	if r.Next != "" {
		fmt.Fprintf(w, "\nnext: %s\n", r.Next)
	}
}
