package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gpusplit/gpusplit/internal/bind"
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
	if err := needRoot(g, "hook release", "the quarantine records are root's", health.Dir, bind.LockDir); err != nil {
		return err
	}
	// Under the driver lock: a VM's stop may be checking the same GPU.
	h, lock, err := g.lockedHost()
	if err != nil {
		return err
	}
	defer lock.Unlock()
	rec, now, err := health.Free(h, a, force)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w; gpusplit status lists the quarantined devices", err)
		}
		return err
	}
	ev := health.Lines(now)
	to := "its driver"
	if rec.Driver != "" {
		to = rec.Driver
	}
	doc := hookReleaseDoc{
		Device: a.String(), GPU: rec.GPU.String(), Guest: rec.Guest, Damaged: rec.Damaged,
		Forced: len(ev) > 0, Evidence: append([]string{}, ev...),
		Next: fmt.Sprintf("gpusplit apply gives %s back to %s and, with sync_proxmox, its containers their devN entries; so does the next start and stop of a VM that uses it", a, to),
	}
	if rec.Guest != 0 {
		doc.Next = fmt.Sprintf("gpusplit hook %d post-stop gives %s back to %s, with the containers' devN entries (VM %d's journal keeps it), once VM %d is stopped; or gpusplit apply", rec.Guest, a, to, rec.Guest, rec.Guest)
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
