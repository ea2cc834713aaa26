package split

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpusplit/gpusplit/internal/bind"

	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/table"
)

// Parts are the parts of a change beside the drivers, in plan, apply --dry-run and
// status -o json (docs/json.md). A part the desired state leaves out is absent.
type Parts struct {
	Proxmox *pve.SyncReport   `json:"proxmox,omitempty"`
	Hooks   []*pve.HookReport `json:"hooks,omitempty"`
	Boot    *BootReport       `json:"boot,omitempty"`
	Drift   []PartDrift       `json:"drift"`
	Notes   []string          `json:"notes"`
	// Stops are every reason apply would stop, "part: reason".
	Stops []string `json:"stops"`
	// Next is the one command that follows, "" when none does.
	Next string `json:"next,omitempty"`
}

// BootReport is the boot files' part: the binary the unit runs and each file's state.
type BootReport struct {
	Binary persist.BinaryReport `json:"binary"`
	Files  []persist.FileReport `json:"files"`
}

// Parts is the report of the change's parts beside the drivers; next is the command
// that follows.
func (c *Change) Parts(next string) Parts {
	r := Parts{Proxmox: c.Proxmox, Hooks: c.Hooks, Drift: c.Drift(), Notes: append([]string{}, c.Notes...), Stops: []string{}, Next: next}
	if r.Drift == nil {
		r.Drift = []PartDrift{}
	}
	if c.Boot != nil {
		r.Boot = &BootReport{Binary: c.Boot.Report(), Files: c.BootState}
	}
	for _, s := range c.Stops {
		r.Stops = append(r.Stops, s.Error())
	}
	return r
}

// wrap prints text at most width columns wide, the first line starting with first and
// the others with indent. Lines of text stay lines.
func wrap(w io.Writer, width int, text, first, indent string) {
	for i, l := range strings.Split(text, "\n") {
		f := first
		if i > 0 {
			f = indent
		}
		for _, out := range table.WrapText(strings.TrimSpace(l), width, f, indent) {
			fmt.Fprintln(w, out)
		}
	}
}

// WriteText prints the parts beside the drivers, for plan and apply, at most width
// columns wide but for the diffs' own lines: Proxmox's diffs, the hookscripts, the boot
// files with what each needs, and the reasons apply would stop. The drivers' part is
// plan.Plan's own text.
func (c *Change) WriteText(w io.Writer, width int) {
	if c.Proxmox != nil {
		if len(c.Proxmox.Changes) == 0 {
			fmt.Fprintln(w, "\nProxmox: the mappings, containers and VMs already match the split.")
		} else {
			fmt.Fprintf(w, "\nProxmox: %s change:\n", plural.S(len(c.Proxmox.Changes), "file"))
			for _, ch := range c.Proxmox.Changes {
				fmt.Fprint(w, ch.Diff)
				for _, n := range ch.Notes {
					wrap(w, width, n, "# ", "#   ")
				}
			}
		}
	}
	if len(c.Hooks) > 0 {
		fmt.Fprintf(w, "\nHookscripts: %s of the pools get gpusplit's, so the GPUs follow them:\n", plural.S(len(c.Hooks), "VM"))
		for _, r := range c.Hooks {
			fmt.Fprint(w, r.Diff)
		}
	}
	if len(c.BootState) > 0 {
		fmt.Fprintln(w, "\nBoot files, which keep the split across reboots (gpusplit persist show prints them):")
		words := map[string]string{"absent": "new", "different": "changes", "installed": "unchanged"}
		for _, f := range c.BootState {
			fmt.Fprintf(w, "  %-9s  %s\n", words[f.State], f.Path)
		}
	}
	for _, n := range c.Notes {
		wrap(w, width, n, "note: ", "  ")
	}
	if len(c.Stops) > 0 {
		fmt.Fprintln(w, "\napply would stop, changing nothing:")
		for _, s := range c.Stops {
			wrap(w, width, s.Error(), "  ", "      ")
		}
	}
}

// WriteInSync says which parts beside the drivers status checked and found in sync.
func (c *Change) WriteInSync(w io.Writer) {
	var parts []string
	if c.Proxmox != nil {
		parts = append(parts, "Proxmox's mappings, containers and VMs")
	}
	if c.Boot != nil {
		parts = append(parts, "the boot files")
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "%s: as the split asks.\n", strings.Join(parts, " and "))
	}
}

// WriteDrift prints status's lines, at most width columns wide, for the parts beside
// the drivers that are not in sync: the drivers' drift is health.StatusReport's.
func (c *Change) WriteDrift(w io.Writer, width int) {
	for _, d := range c.Drift() {
		switch d.Part {
		case "proxmox":
			wrap(w, width, fmt.Sprintf("Proxmox: %s differ from the split: %s", plural.S(len(d.Items), "file"), strings.Join(d.Items, ", ")), "", "  ")
		case "hooks":
			wrap(w, width, fmt.Sprintf("Hookscripts: %s lack gpusplit's hookscript, so their pool's GPUs do not follow them", strings.Join(d.Items, ", ")), "", "  ")
		case "boot":
			wrap(w, width, fmt.Sprintf("Boot files: %s missing or different: %s", plural.S(len(d.Items), "file"), strings.Join(d.Items, ", ")), "", "  ")
		}
	}
}

// WriteText says what apply did, part by part; root names the host, backups is where
// Proxmox's backups are as the user sees them.
func (r *Result) WriteText(w io.Writer, root, backups string) {
	if r.Drivers != nil && len(r.Drivers.Moved) > 0 {
		fmt.Fprintf(w, "moved %s; the prior state is in %s (gpusplit rollback undoes it).\n", plural.S(len(r.Drivers.Moved), "device"), bind.JournalPath)
	}
	if r.Proxmox != nil {
		written := 0
		for _, f := range r.Proxmox.Files {
			fmt.Fprintf(w, "%-13s %s\n", f.Outcome, f.Path)
			if f.Outcome == pve.Written {
				written++
			}
		}
		if written > 0 {
			fmt.Fprintf(w, "wrote %s; the previous versions are in %s.\n", plural.S(written, "file"), backups)
		}
	}
	for _, h := range r.Hooks {
		fmt.Fprintf(w, "hookscript of VM %d: %s\n", h.Guest, h.Hookscript)
	}
	for _, c := range r.Boot {
		fmt.Fprintf(w, "%-13s %s\n", c.Action, c.Path)
	}
	for _, c := range r.Commands {
		if !c.Ran {
			fmt.Fprintf(w, "not run under --root %s: %s\n", root, c.Command)
		} else if c.Error != "" {
			fmt.Fprintf(w, "warning: %s: %s\n", c.Command, c.Error)
		}
	}
}
