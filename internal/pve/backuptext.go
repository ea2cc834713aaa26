package pve

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/table"
)

// BackupsReport is pve backups' list, as -o json gives it (docs/json.md): where the
// backups are, as the user sees the path, and each, oldest first.
type BackupsReport struct {
	Dir     string   `json:"dir"`
	Backups []Backup `json:"backups"`
}

// ReportBackups lists h's backups; dir is where they are, as the user sees the path.
func ReportBackups(h *host.Host, dir string) (*BackupsReport, error) {
	list, err := ListBackups(h)
	if err != nil {
		return nil, err
	}
	return &BackupsReport{Dir: dir, Backups: list}, nil
}

// WriteText prints the backups as a table at most width columns wide, or says there are
// none.
func (r *BackupsReport) WriteText(w io.Writer, width int) error {
	if len(r.Backups) == 0 {
		fmt.Fprintf(w, "No backups in %s: gpusplit has not replaced a Proxmox file here.\n", r.Dir)
		return nil
	}
	fmt.Fprintf(w, "%s in %s:\n\n", plural.S(len(r.Backups), "backup"), r.Dir)
	// SIZE goes first, then FILE, which the ID names too; the command wraps.
	t := table.New(
		table.Column{Header: "ID"},
		table.Column{Header: "FILE", Drop: 2},
		table.Column{Header: "REPLACED"},
		table.Column{Header: "SIZE", Drop: 1},
		table.Column{Header: "BY", Fit: table.Wrap},
	)
	for _, b := range r.Backups {
		t.Add(b.ID, b.Path, b.Time.Local().Format("2006-01-02 15:04:05"), strconv.FormatInt(b.Size, 10), dashIfEmpty(b.Command))
	}
	return t.Write(w, width)
}

// WriteText prints a restore: its check (the diff, and what would stop it; dryRun: a dry
// run's), or, once applied (written), what it did to each file and where the version it
// replaced is (backups, as the user sees the path).
func (r *RestoreReport) WriteText(w io.Writer, dryRun, written bool, backups string) {
	if written {
		for _, f := range r.Files {
			fmt.Fprintf(w, "%-13s %s\n", f.Outcome, f.Path)
		}
		if r.Applied {
			fmt.Fprintf(w, "restored %s; the version it replaced is in %s.\n", r.ID, backups)
		}
		return
	}
	switch {
	case r.Diff == "":
		fmt.Fprintf(w, "the file already holds backup %s: nothing to restore.\n", r.ID)
	case len(r.Problems) > 0:
		fmt.Fprint(w, r.Diff)
		fmt.Fprintf(w, "nothing was written; the restore would stop:\n  %s\n", strings.Join(r.Problems, "\n  "))
	default:
		fmt.Fprint(w, r.Diff)
		if dryRun {
			fmt.Fprintln(w, "dry run: nothing was written; without --dry-run the backup is put back.")
		}
	}
}

// PruneReport is pve backups prune, as -o json gives it (docs/json.md): the backups it
// removes, or, with DryRun, would remove, keeping the last Keep of each file.
type PruneReport struct {
	Keep    int      `json:"keep"`
	DryRun  bool     `json:"dry_run"`
	Removed []string `json:"removed"`
}

// CheckPrune is the prune of h's backups down to the last keep of each file that a
// dry run shows, removing nothing.
func CheckPrune(h *host.Host, keep int) (*PruneReport, error) {
	gone, err := Prunable(h, keep)
	if err != nil {
		return nil, err
	}
	return &PruneReport{Keep: keep, DryRun: true, Removed: nonNil(gone)}, nil
}

// PruneBackups removes h's backups but the last keep of each file.
func PruneBackups(h *host.Host, keep int) (*PruneReport, error) {
	gone, err := Prune(h, keep)
	if err != nil {
		return nil, err
	}
	return &PruneReport{Keep: keep, Removed: nonNil(gone)}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// WriteText prints a prune: the backups a check would remove and what stays (backups is
// where, as the user sees the path), or how many were removed.
func (r *PruneReport) WriteText(w io.Writer, backups string) {
	if !r.DryRun {
		fmt.Fprintf(w, "removed %s.\n", plural.S(len(r.Removed), "backup"))
		return
	}
	for _, id := range r.Removed {
		fmt.Fprintf(w, "remove %s\n", id)
	}
	fmt.Fprintf(w, "%s to remove; the last %d of each file stay in %s.\n", plural.S(len(r.Removed), "backup"), r.Keep, backups)
}
