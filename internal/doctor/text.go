package doctor

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/plural"
)

// WriteText prints the report for a person, the machine read being root: the counts,
// then each finding with its evidence and fix, then the checks that saw less.
func (r *Report) WriteText(w io.Writer, root string) {
	counts := map[Severity]int{}
	for _, f := range r.Findings {
		counts[f.Severity]++
	}
	fmt.Fprintf(w, "%s: %s, %s, %s, %s\n", root, plural.S(len(r.Ran), "check"), plural.S(counts[Error], "error"), plural.S(counts[Warning], "warning"), plural.S(counts[Info], "note"))
	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "\nNothing found.")
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "\n%s  %s: %s\n", strings.ToUpper(f.Severity.String()), f.ID, f.Title)
		for _, ev := range f.Evidence {
			fmt.Fprintf(w, "    %s\n", ev)
		}
		for i, line := range wrap(f.Remedy, 92) {
			if i == 0 {
				fmt.Fprintf(w, "  fix: %s\n", line)
			} else {
				fmt.Fprintf(w, "       %s\n", line)
			}
		}
	}
	if len(r.Partial) > 0 {
		fmt.Fprintln(w)
	}
	for _, p := range r.partialNotes() {
		subject := p.ids[0] + " saw less than it needs"
		if len(p.ids) > 1 {
			subject = fmt.Sprintf("%d checks saw less than they need (%s)", len(p.ids), strings.Join(p.ids, ", "))
		}
		for i, line := range wrap(subject+": "+p.why, 92) {
			if i == 0 {
				fmt.Fprintf(w, "partial: %s\n", line)
			} else {
				fmt.Fprintf(w, "         %s\n", line)
			}
		}
	}
}

// partialNote is one reason checks saw less, with the checks it held back.
type partialNote struct {
	why string
	ids []string
}

// partialNotes groups the checks that saw less by their reason: without root, or
// without the kernel log, a dozen checks share one, and a line each said it a dozen
// times.
func (r *Report) partialNotes() []partialNote {
	var out []partialNote
	for _, id := range slices.Sorted(maps.Keys(r.Partial)) {
		why := r.Partial[id]
		i := slices.IndexFunc(out, func(p partialNote) bool { return p.why == why })
		if i < 0 {
			out = append(out, partialNote{why: why})
			i = len(out) - 1
		}
		out[i].ids = append(out[i].ids, id)
	}
	return out
}

// wrap breaks text into lines of at most width characters at spaces.
func wrap(text string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, word := range strings.Fields(text) {
		if cur.Len() > 0 && cur.Len()+1+len(word) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}
