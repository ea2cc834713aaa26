package persist

import (
	"fmt"
	"io"

	"github.com/gpusplit/gpusplit/internal/host"
)

// InstallStops are the reasons install stops before it writes a file: a root it cannot
// write, a binary the unit may not run. All of them are known before the first write.
func (bf *Boot) InstallStops(h *host.Host) []error {
	var stops []error
	if !h.Writable() {
		stops = append(stops, fmt.Errorf("cannot install into %s: %w", h.Root(), host.ErrReadOnly))
	}
	if bf.Refused != nil {
		stops = append(stops, bf.Refused)
	}
	return stops
}

// InstallReport is install's report before it writes: the files (with their states on
// h), the binary and the problems that stop it; its lists are empty rather than null.
func (bf *Boot) InstallReport(h *host.Host, files []File, dryRun bool, stops []error) ChangeReport {
	bin := bf.Report()
	doc := ChangeReport{DryRun: dryRun, Binary: &bin, Files: FileStates(h, files), Problems: []string{}, Changes: []Change{}, Commands: []Command{}, Notes: []string{}}
	for _, e := range stops {
		doc.Problems = append(doc.Problems, e.Error())
	}
	return doc
}

// WriteText prints persist show for a person: the binary the unit runs, then each file
// with whether it is installed.
func (r *ShowReport) WriteText(w io.Writer, bf *Boot) {
	fmt.Fprintln(w, bf.DescribeBinary())
	words := map[string]string{"absent": "not installed", "different": "installed, different", "installed": "installed"}
	for _, file := range r.Files {
		fmt.Fprintf(w, "==> %s (%s) <==\n%s\n", file.Path, words[file.State], file.Content)
	}
}

// WriteDryRun prints the files install would write, and the binary the unit would run.
func (bf *Boot) WriteDryRun(w io.Writer, files []File) {
	for _, file := range files {
		fmt.Fprintf(w, "==> %s <==\n%s\n", file.Path, file.Content)
	}
	fmt.Fprint(w, bf.DescribeBinary())
}

// DescribeBinary says which binary the unit runs and what the check found.
func (bf *Boot) DescribeBinary() string {
	b := bf.Binary
	name := b.Path
	if b.Resolved != b.Path {
		name += " (-> " + b.Resolved + ")"
	}
	var s string
	switch {
	case !bf.Checked:
		s = fmt.Sprintf("The unit runs %s (not checked: a snapshot holds no binaries).\n", name)
	case bf.Refused != nil:
		s = fmt.Sprintf("The unit would run %s, which install refuses: %v\n", name, bf.Refused)
	default:
		s = fmt.Sprintf("The unit runs %s: root's, and only root can change it.\n", name)
	}
	for _, n := range b.Notes {
		s += "note: " + n + "\n"
	}
	return s
}

// StepWriter tells a person what install or remove does as it does it, the steps to out
// and the warnings to errs, where they do not spoil JSON or tables: with quiet (JSON,
// whose report has it all) the warnings alone. A system command that failed is a
// warning: the files are in place, and it can be run by hand. root names the host.
func StepWriter(out, errs io.Writer, root string, quiet bool) func(Step) {
	return func(s Step) {
		switch {
		case s.Warnings != nil:
			for _, w := range s.Warnings {
				fmt.Fprintf(errs, "warning: %s\n", w)
			}
		case s.Command != nil && s.Command.Error != "":
			fmt.Fprintf(errs, "warning: %s: %s\n", s.Command.Command, s.Command.Error)
		case quiet:
		case s.Change != nil:
			fmt.Fprintf(out, "%-10s %s\n", s.Change.Action, s.Change.Path)
		case s.Runs != "":
			fmt.Fprintf(out, "The unit runs %s.\n", s.Runs)
		case s.Command != nil && !s.Command.Ran:
			fmt.Fprintf(out, "not run under --root %s: %s\n", root, s.Command.Command)
		}
	}
}

// WriteRemoval prints the check of a remove: the files that go, or that none is
// installed.
func (r *ChangeReport) WriteRemoval(w io.Writer) {
	for _, f := range r.Files {
		fmt.Fprintf(w, "remove     %s\n", f.Path)
	}
	if len(r.Files) == 0 {
		fmt.Fprintln(w, "none of persist's files is installed: nothing to remove.")
	}
}
