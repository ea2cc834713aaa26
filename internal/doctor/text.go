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
		for _, id := range slices.Sorted(maps.Keys(r.Partial)) {
			fmt.Fprintf(w, "partial: %s saw less than it needs: %s\n", id, r.Partial[id])
		}
	}
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
