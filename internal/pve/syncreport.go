package pve

import (
	"fmt"
	"io"

	"github.com/gpusplit/gpusplit/internal/plural"
)

// SyncText says which of a sync's two texts WriteText prints, and what it names.
type SyncText struct {
	// Root names the host read.
	Root string
	// Snapshot says the host is a copy: its locks and permissions are checked on the
	// host itself.
	Snapshot bool
	// DryRun says the check is a dry run's, which ends by saying nothing was written.
	DryRun bool
	// Written prints what the write did to each file, in place of the check.
	Written bool
	// Backups is where the previous versions are, as the user sees the path.
	Backups string
}

// WriteText prints a sync for a person: its check (each diff with its notes and
// refusals, then what stops the write), or, with t.Written, what the write did to each
// file.
func (r *SyncReport) WriteText(w io.Writer, t SyncText) {
	if t.Written {
		r.writeWritten(w, t.Backups)
		return
	}
	if len(r.Changes) == 0 {
		fmt.Fprintf(w, "%s: Proxmox already matches the split.\n", t.Root)
	}
	for _, c := range r.Changes {
		fmt.Fprint(w, c.Diff)
		for _, n := range c.Notes {
			fmt.Fprintf(w, "# %s\n", n)
		}
		// A refusal the write goes past (Forced) is said as such.
		label := "REFUSED"
		if r.Forced {
			label = "FORCED"
		}
		for _, ref := range c.Refusals {
			fmt.Fprintf(w, "# %s: %s\n", label, ref)
		}
		fmt.Fprintln(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	switch {
	case len(r.Problems) > 0:
		fmt.Fprintf(w, "nothing was written; the write would stop (%s):\n", plural.S(len(r.Problems), "problem"))
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	case len(r.Changes) > 0:
		if t.Snapshot {
			fmt.Fprintf(w, "note: %s is a snapshot: the locks and the files' permissions are checked on the host itself.\n", t.Root)
		}
		if t.DryRun {
			fmt.Fprintln(w, "dry run: nothing was written; without --dry-run these changes are written.")
		}
	}
}

// writeWritten says what a write did, file by file, and where the previous versions
// went when it wrote them all.
func (r *SyncReport) writeWritten(w io.Writer, backups string) {
	written := 0
	for _, f := range r.Files {
		fmt.Fprintf(w, "%-13s %s\n", f.Outcome, f.Path)
		if f.Outcome == Written {
			written++
		}
	}
	if r.Applied {
		fmt.Fprintf(w, "wrote %s; the previous versions are in %s.\n", plural.S(written, "file"), backups)
	}
}

// Refused says the sync refuses a result that a forced sync writes.
func (r *SyncReport) Refused() bool {
	for _, c := range r.Changes {
		if len(c.Refusals) > 0 {
			return true
		}
	}
	return false
}
