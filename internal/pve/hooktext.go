package pve

import (
	"fmt"
	"io"
	"strings"
)

// HookText says which of an install's or a remove's texts WriteText prints.
type HookText struct {
	// Install says the change is an install, which names the nodes the snippet must be
	// on too; otherwise a remove.
	Install bool
	// DryRun says the check is a dry run's, which ends by saying nothing was written.
	DryRun bool
	// Written prints what the write did, in place of the check.
	Written bool
	// Backups is where the previous version is, as the user sees the path.
	Backups string
}

// kind is the guest's kind as a config path has it: LXC or QEMU.
func (r *HookReport) kind() string {
	if r.Kind == KindName(LXC) {
		return LXC
	}
	return QEMU
}

// guestFlag is the option of gpusplit pve hook that names the report's guest.
func (r *HookReport) guestFlag() string {
	if r.kind() == LXC {
		return "--ct"
	}
	return "--vm"
}

// WriteText prints an install or a remove for a person: its check (the diff, and what
// stops the write), or, with t.Written, what it wrote; then the snippet kept for other
// guests, and, for an install, where else the snippet must be.
func (r *HookReport) WriteText(w io.Writer, t HookText) {
	id := r.Guest
	switch {
	case r.Diff == "" && r.Removed == "" && len(r.Problems) == 0:
		hookscript := r.Hookscript
		if hookscript == "" {
			hookscript = "(none)"
		}
		fmt.Fprintf(w, "%s %d: nothing to change (hookscript: %s)\n", r.Kind, id, hookscript)
	case t.Written:
		if r.Removed != "" {
			fmt.Fprintf(w, "removed %s: no guest names it any more.\n", r.Removed)
		}
		fmt.Fprintf(w, "wrote %s; the previous version is in %s.\n", GuestPath(r.kind(), id), t.Backups)
	default:
		fmt.Fprint(w, r.Diff)
		if r.Removed != "" {
			fmt.Fprintf(w, "the change removes %s: no guest names it any more.\n", r.Removed)
		}
		WriteGuestCheck(w, r.Problems, t.DryRun)
	}
	if r.Kept != "" {
		verb := "name"
		if len(r.UsedBy) == 1 {
			verb = "names"
		}
		fmt.Fprintf(w, "%s is kept: %s still %s it.\n", r.Kept, strings.Join(r.UsedBy, ", "), verb)
	}
	if !t.Install {
		r.writeNotes(w)
		return
	}
	if t.Written && r.kind() == QEMU {
		fmt.Fprintf(w, "VM %d's GPUs follow it from its next start on this node (gpusplit hook %d pre-start).\n", id, id)
	}
	r.writeNodes(w)
}

// WriteGuestCheck ends the diff of a guest config's edit: what would stop the write, or
// that a dry run wrote nothing.
func WriteGuestCheck(w io.Writer, problems []string, dryRun bool) {
	switch {
	case len(problems) > 0:
		fmt.Fprintf(w, "nothing was written; the write would stop:\n  %s\n", strings.Join(problems, "\n  "))
	case dryRun:
		fmt.Fprintln(w, "dry run: nothing was written; without --dry-run this change is written.")
	}
}

// WriteShow prints pve hook show for a person: whose hookscript the guest runs, what it
// chains, the binary it runs and its deadline, and where else the snippet must be.
func (r *HookReport) WriteShow(w io.Writer) {
	id, flag := r.Guest, r.guestFlag()
	switch {
	case r.Hookscript == "":
		fmt.Fprintf(w, "%s %d has no hookscript: its GPUs do not follow it (gpusplit pve hook install)\n", r.Kind, id)
	case r.Snippet == "" && IsHookVolume(r.Hookscript):
		fmt.Fprintf(w, "%s %d runs %s, gpusplit's snippet, whose storage %s holds no snippets on this node: the guest does not start here\n", r.Kind, id, r.Hookscript, r.Storage)
	case !IsHookVolume(r.Hookscript):
		fmt.Fprintf(w, "%s %d runs %s, which is not gpusplit's\n", r.Kind, id, r.Hookscript)
	case r.SnippetState == "missing":
		fmt.Fprintf(w, "%s %d runs %s, gpusplit's snippet, which is missing on this node (%s; snippets are per node): the guest does not start here until gpusplit pve hook install %s %d --yes writes it\n",
			r.Kind, id, r.Hookscript, r.Snippet, flag, id)
	case r.SnippetState != "present":
		fmt.Fprintf(w, "%s %d runs %s, which is named like gpusplit's snippet but was not written by gpusplit\n", r.Kind, id, r.Snippet)
	case r.Chained != "":
		fmt.Fprintf(w, "%s %d runs gpusplit hook (%s), then %s\n", r.Kind, id, r.Hookscript, r.Chained)
	default:
		fmt.Fprintf(w, "%s %d runs gpusplit hook (%s)\n", r.Kind, id, r.Hookscript)
	}
	if r.MadeFor != 0 {
		fmt.Fprintf(w, "The snippet was made for guest %d (this one's config names it, as a clone's does): gpusplit pve hook install %s %d --yes gives it one of its own.\n", r.MadeFor, flag, id)
	}
	if b := r.Binary; b != nil {
		switch {
		case !b.Checked:
			fmt.Fprintf(w, "It runs %s (not checked: a snapshot holds no binaries).\n", b.Path)
		case !b.OK:
			fmt.Fprintf(w, "It runs %s, which fails the check: %s\n", b.Path, strings.Join(b.Problems, "; "))
		default:
			fmt.Fprintf(w, "It runs %s.\n", b.Path)
		}
	}
	if r.Deadline != "" {
		fmt.Fprintf(w, "It bounds each phase to %s (gpusplit hook --deadline).\n", r.Deadline)
	}
	r.writeNodes(w)
}

// writeNodes says whether the snippet's storage serves other nodes, and where else the
// guest may start and the snippet must be; then the notes.
func (r *HookReport) writeNodes(w io.Writer) {
	if r.Storage == "" {
		return
	}
	label := func(ns []HookNode) string {
		var parts []string
		for _, n := range ns {
			parts = append(parts, n.Node+" ("+strings.Join(n.Why, "; ")+")")
		}
		return strings.Join(parts, ", ")
	}
	if r.Shared {
		fmt.Fprintf(w, "Storage %s is shared: its snippet serves every node it is on.\n", r.Storage)
	} else {
		fmt.Fprintf(w, "Snippets are per node: storage %s is this node's own, so the snippet serves this node only.\n", r.Storage)
	}
	if len(r.InstallOn) > 0 {
		fmt.Fprintf(w, "note: %s %d may also start on %s: install the snippet there too (gpusplit pve hook install %s %d --yes on each), or use a shared storage (--storage).\n",
			r.Kind, r.Guest, label(r.InstallOn), r.guestFlag(), r.Guest)
	}
	if len(r.StorageMissingOn) > 0 {
		fmt.Fprintf(w, "note: %s %d may also start on %s, where storage %s is not: it does not start there with this hookscript.\n", r.Kind, r.Guest, label(r.StorageMissingOn), r.Storage)
	}
	r.writeNotes(w)
}

func (r *HookReport) writeNotes(w io.Writer) {
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
