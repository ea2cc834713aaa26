package cli

import (
	"fmt"
	"strings"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// hookReleaseDoc is hook release -o json (docs/json.md): the device released, what its
// record said, and what the check found when it was released.
type hookReleaseDoc struct {
	Device string `json:"device"`
	GPU    string `json:"gpu"`
	Guest  int    `json:"guest"` // the VM whose stop quarantined it; 0 for a damaged record
	// Damaged says why its record could not be read; "" when it could.
	Damaged string `json:"damaged"`
	// Forced: released with force while Evidence says it is still broken.
	Forced   bool     `json:"forced"`
	Evidence []string `json:"evidence"` // what the check finds now; [] for a healthy device
	Next     string   `json:"next"`
}

// runHookRelease ends the quarantine of the device at addr (gpusplit hook release
// ADDR): it checks the device again as a VM's stop does, against the link the record
// kept, and refuses while the device is still broken, unless force; then it removes the
// record and says how the device gets back to its driver and containers. It moves no
// device itself.
func runHookRelease(g *globals, addr string, force bool) error {
	a, err := pci.ParseAddress(addr)
	if err != nil {
		return err
	}
	if err := needRoot(g, "hook release", "the quarantine records are root's"); err != nil {
		return err
	}
	h, err := g.host()
	if err != nil {
		return err
	}
	rec, err := health.Read(h, a)
	if err != nil {
		return fmt.Errorf("%w; gpusplit status lists the quarantined devices", err)
	}
	ev := health.Lines(health.CheckReturn(h, a, rec.Baseline))
	if len(ev) > 0 && !force {
		return fmt.Errorf("%s stays quarantined: it is still broken:\n  %s\nReset it with no VM using it (echo 1 > /sys/bus/pci/devices/%s/reset) or reboot the host, then release it again; gpusplit doctor says what else to check. Forcing the release hands it back broken",
			a, strings.Join(ev, "\n  "), a)
	}
	if err := health.Release(h, a); err != nil {
		return err
	}
	to := "its driver"
	if rec.Driver != "" {
		to = rec.Driver
	}
	doc := hookReleaseDoc{
		Device: a.String(), GPU: rec.GPU.String(), Guest: rec.Guest, Damaged: rec.Damaged,
		Forced: len(ev) > 0, Evidence: append([]string{}, ev...),
		Next: fmt.Sprintf("gpusplit apply gives %s back to %s and, with sync_proxmox, its containers their devN entries; so does the next start and stop of a VM that uses it", a, to),
	}
	if g.json() {
		return g.writeJSON(doc)
	}
	w := g.stdout
	switch {
	case rec.Damaged != "":
		fmt.Fprintf(w, "%s released from quarantine (its record was damaged: %s)", a, rec.Damaged)
	default:
		fmt.Fprintf(w, "%s released from quarantine (the %s of VM %d found it broken at %s)", a, rec.Phase, rec.Guest, rec.Time.Format("2006-01-02 15:04:05 MST"))
	}
	if doc.Forced {
		fmt.Fprintf(w, ", forced while it is still broken:\n  %s\n", strings.Join(ev, "\n  "))
	} else {
		fmt.Fprintln(w, "; it answers and its link is up now.")
	}
	fmt.Fprintf(w, "Next: %s.\n", doc.Next)
	return nil
}
