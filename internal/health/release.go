package health

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// ReleaseReport is what hook release did, as -o json gives it (docs/json.md): the
// device released, what its record said, what the check found when it was released,
// and how the device gets back to its driver and containers.
type ReleaseReport struct {
	Device string `json:"device"`
	GPU    string `json:"gpu"`
	Guest  int    `json:"guest"` // the VM whose stop quarantined it; 0 for a damaged record
	// Damaged says why its record could not be read; "" when it could.
	Damaged string `json:"damaged"`
	// Forced: released with force while Evidence says it is still broken.
	Forced   bool     `json:"forced"`
	Evidence []string `json:"evidence"` // what the check finds now; [] for a healthy device
	Next     string   `json:"next"`
	// rec is the record released, for the text.
	rec Record
}

// FreeReport ends the quarantine of device a (Free) and reports it.
func FreeReport(h *host.Host, a pci.Address, force bool) (*ReleaseReport, error) {
	rec, now, err := Free(h, a, force)
	if err != nil {
		return nil, err
	}
	ev := Lines(now)
	to := "its driver"
	if rec.Driver != "" {
		to = rec.Driver
	}
	r := &ReleaseReport{
		Device: a.String(), GPU: rec.GPU.String(), Guest: rec.Guest, Damaged: rec.Damaged,
		Forced: len(ev) > 0, Evidence: append([]string{}, ev...), rec: rec,
		Next: fmt.Sprintf("gpusplit apply gives %s back to %s and, with sync_proxmox, its containers their devN entries; so does the next start and stop of a VM that uses it", a, to),
	}
	if rec.Guest != 0 {
		r.Next = fmt.Sprintf("gpusplit hook %d post-stop gives %s back to %s, with the containers' devN entries (VM %d's journal keeps it), once VM %d is stopped; or gpusplit apply", rec.Guest, a, to, rec.Guest, rec.Guest)
	}
	return r, nil
}

// WriteText says what was released, whether it was still broken, and what comes next.
func (r *ReleaseReport) WriteText(w io.Writer) {
	if r.Damaged != "" {
		fmt.Fprintf(w, "%s released from quarantine (its record was damaged: %s)", r.Device, r.Damaged)
	} else {
		fmt.Fprintf(w, "%s released from quarantine (the %s of VM %d found it broken at %s)", r.Device, r.rec.Phase, r.Guest, r.rec.Time.Format("2006-01-02 15:04:05 MST"))
	}
	if r.Forced {
		fmt.Fprintf(w, ", forced while it is still broken:\n  %s\n", strings.Join(r.Evidence, "\n  "))
	} else {
		fmt.Fprintln(w, "; it answers and its link is up now.")
	}
	fmt.Fprintf(w, "Next: %s.\n", r.Next)
}
