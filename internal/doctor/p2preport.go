package doctor

import (
	"fmt"
	"io"

	"github.com/gpusplit/gpusplit/internal/p2p"
)

// P2PReport is gpusplit p2p's result, as -o json gives it and p2p --save keeps it
// (docs/json.md): the copies' report, the doctor's findings on peer-to-peer beside it,
// and the error that ended the run early.
type P2PReport struct {
	*p2p.Report
	Doctor []Finding `json:"doctor"`
	Error  string    `json:"error,omitempty"`
}

// NewP2PReport is the report of a run that ended with runErr (nil when it ran to the end).
func NewP2PReport(rep *p2p.Report, findings []Finding, runErr error) *P2PReport {
	r := &P2PReport{Report: rep, Doctor: findings}
	if runErr != nil {
		r.Error = runErr.Error()
	}
	return r
}

// WriteText writes the copies' report, then the doctor's findings on peer-to-peer.
func (r *P2PReport) WriteText(w io.Writer) {
	r.Report.WriteText(w)
	for _, f := range r.Doctor {
		fmt.Fprintf(w, "  the doctor: %s: %s\n", f.ID, f.Title)
	}
}
