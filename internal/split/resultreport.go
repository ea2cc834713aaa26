package split

import (
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// ResultReport is apply -o json (docs/json.md): what Run's Apply did, part by part, and
// the error that ended it.
type ResultReport struct {
	Seconds    float64           `json:"seconds"` // from the first change to the end
	Moved      []string          `json:"moved"`
	Restored   []string          `json:"restored"`
	Unrestored map[string]string `json:"unrestored"`
	Error      string            `json:"error"`
	// Proxmox is the sync of Proxmox's files, when the split includes them.
	Proxmox *pve.SyncReport `json:"proxmox,omitempty"`
	// Hooks are the hookscripts installed on the pools' VMs.
	Hooks []*pve.HookReport `json:"hooks,omitempty"`
	// Boot is what was done to each boot file, when the split includes them.
	Boot     []persist.Change  `json:"boot,omitempty"`
	Commands []persist.Command `json:"commands,omitempty"`
	// RolledBack: a part after the drivers failed, and the parts before it were put
	// back (or that was tried: the error says whether it worked).
	RolledBack bool `json:"rolled_back,omitempty"`
}

// Report is the result as apply -o json gives it, err being what ended the apply.
func (r *Result) Report(err error) ResultReport {
	doc := ResultReport{Moved: []string{}, Restored: []string{}, Unrestored: map[string]string{}}
	if r != nil {
		doc.Proxmox, doc.Hooks, doc.Boot, doc.Commands, doc.RolledBack = r.Proxmox, r.Hooks, r.Boot, r.Commands, r.Undone
	}
	if r != nil && r.Drivers != nil {
		res := r.Drivers
		doc.Seconds = res.Elapsed.Seconds()
		for _, m := range res.Moved {
			doc.Moved = append(doc.Moved, m.Device.String())
		}
		for _, a := range res.Restored {
			doc.Restored = append(doc.Restored, a.String())
		}
		for a, e := range res.Unrestored {
			doc.Unrestored[a.String()] = e.Error()
		}
	}
	if err != nil {
		doc.Error = err.Error()
	}
	return doc
}
