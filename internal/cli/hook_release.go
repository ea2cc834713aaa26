package cli

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/pci"
)

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
	doc, err := health.FreeReport(h, a, force)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w; gpusplit status lists the quarantined devices", err)
	}
	if err != nil {
		return err
	}
	if g.json() {
		return g.writeJSON(doc)
	}
	doc.WriteText(g.stdout)
	return nil
}
