package pve

import (
	"errors"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// SyncReport is a sync as pve sync -o json shows it (docs/json.md): each changed file's
// diff, with its notes and refusals; what stops (or stopped) the write; and what the
// write did to each file.
type SyncReport struct {
	Applied  bool         `json:"applied"`
	Forced   bool         `json:"forced"`
	Changes  []SyncChange `json:"changes"`
	Notes    []string     `json:"notes"`
	Problems []string     `json:"problems"`
	Files    []FileResult `json:"files"`

	// edits are the changes as written, for Undo.
	edits []Edit
	// command names what wrote them.
	command string
}

// Undo puts back the files an applied sync wrote, as one transaction under Proxmox's
// locks: each file must still hold what the sync wrote (a file changed since is
// refused, and nothing is written). It is how a larger change undoes its Proxmox part
// when a later part fails.
func (r *SyncReport) Undo(h *host.Host) ([]FileResult, error) {
	if !r.Applied {
		return nil, nil
	}
	back := make([]Edit, 0, len(r.edits))
	for _, e := range r.edits {
		back = append(back, Edit{Path: e.Path, Old: e.New, New: e.Old})
	}
	w := &Writer{H: h, Command: r.command + " (undone)"}
	return w.Commit(back)
}

// SyncChange is one file a sync changes.
type SyncChange struct {
	Path     string   `json:"path"`
	Diff     string   `json:"diff"`
	Notes    []string `json:"notes"`
	Refusals []string `json:"refusals"`
	// old is the file as it was read, so that a write can tell a change outside the
	// diff's context from none.
	old string
}

// SyncMode is how a sync runs: a check, or Apply; Force writes past refusals. Command
// names what writes, for the backups.
type SyncMode struct {
	Apply, Force bool
	Command      string
	// Shown are the changes a person saw and confirmed: with Apply, a sync that works
	// out other changes now (a file changed meanwhile) writes nothing (*ShownError).
	// nil writes whatever the sync works out.
	Shown []SyncChange
}

// ShownError is a write refused because what it would write now is not what was shown
// and confirmed: a file changed between the question and the write.
type ShownError struct {
	Paths []string
}

func (e *ShownError) Error() string {
	return "nothing was written: " + strings.Join(e.Paths, ", ") + " changed since the change was shown; run the command again to see it as it is now"
}

// shownDiffers lists the paths whose change differs from the one shown.
func shownDiffers(shown, now []SyncChange) []string {
	was := map[string]SyncChange{}
	for _, c := range shown {
		was[c.Path] = c
	}
	var out []string
	for _, c := range now {
		if s, ok := was[c.Path]; !ok || s.Diff != c.Diff || s.old != c.old {
			out = append(out, c.Path)
		}
		delete(was, c.Path)
	}
	for p := range was {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// RefusedError is a sync that wrote nothing because its checks refuse the result: it
// could not work or would lose entries. Forcing writes it all the same.
type RefusedError struct {
	Problems []string
}

func (e *RefusedError) Error() string {
	return "nothing was written: the result could not work or would lose entries:\n  " + strings.Join(e.Problems, "\n  ")
}

// RunSync computes the Proxmox changes of a planned split and checks them: the refusals
// of the sync (results that cannot work, unless forced) and every condition the writer
// would stop at. A check that finds any returns ErrWouldStop. With mode.Apply it then
// writes them as one transaction, unless refused (a *RefusedError). A nil report comes
// with an error that stopped the sync before any change was worked out.
func RunSync(h *host.Host, inv *inventory.Inventory, p *plan.Plan, d plan.Desired, o SyncOptions, mode SyncMode) (*SyncReport, error) {
	changes, notes, err := Sync(h, inv, p, d, o)
	if err != nil {
		return nil, err
	}
	rep := &SyncReport{Forced: mode.Force, Changes: []SyncChange{}, Notes: append([]string{}, notes...), Problems: []string{}, Files: []FileResult{}}
	var edits []Edit
	for _, c := range changes {
		rep.Changes = append(rep.Changes, SyncChange{Path: c.Path, Diff: c.Diff(), Notes: append([]string{}, c.Notes...), Refusals: append([]string{}, c.Refusals...), old: c.Old})
		for _, r := range c.Refusals {
			if mode.Force {
				rep.Notes = append(rep.Notes, "forced past: "+r)
			} else {
				rep.Problems = append(rep.Problems, c.Path+": "+r)
			}
		}
		edits = append(edits, Edit{Path: c.Path, Old: c.Old, New: c.New})
	}
	if mode.Apply && mode.Shown != nil {
		if differ := shownDiffers(mode.Shown, rep.Changes); len(differ) > 0 {
			return rep, &ShownError{Paths: differ}
		}
	}
	w := &Writer{H: h, Command: mode.Command}
	if !mode.Apply {
		for _, p := range w.Check(edits) {
			rep.Problems = append(rep.Problems, p.String())
		}
		if len(rep.Problems) > 0 {
			return rep, ErrWouldStop
		}
		return rep, nil
	}
	if len(rep.Problems) > 0 {
		for _, e := range edits {
			if e.Old != e.New {
				rep.Files = append(rep.Files, FileResult{Path: e.Path, Outcome: Untouched})
			}
		}
		return rep, &RefusedError{Problems: rep.Problems}
	}
	res, err := w.Commit(edits)
	rep.Files = append(rep.Files, res...)
	rep.edits, rep.command = edits, mode.Command
	var tx *TxError
	if errors.As(err, &tx) {
		for _, p := range tx.Problems {
			rep.Problems = append(rep.Problems, p.String())
		}
	}
	rep.Applied = err == nil
	return rep, err
}
