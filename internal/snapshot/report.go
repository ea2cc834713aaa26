package snapshot

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/plural"
)

// Report is what snapshot wrote: the archive's name and its Summary, and its JSON form
// (docs/json.md).
type Report struct {
	Archive string `json:"archive"`
	*Summary
}

// NewReport is the report of sum, written to file ("-" for standard output); its lists
// are empty rather than null in JSON.
func NewReport(file string, sum *Summary) *Report {
	for _, l := range []*[]string{&sum.Unreadable, &sum.FilesLeftOut} {
		if *l == nil {
			*l = []string{}
		}
	}
	if sum.Redacted == nil {
		sum.Redacted = []Redaction{}
	}
	return &Report{file, sum}
}

// WriteText says for a person what was captured, and what the files captured lost.
func (r *Report) WriteText(w io.Writer) {
	sum := r.Summary
	fmt.Fprintf(w, "captured %s: %d files, %d links, %d directories, %s of contents, %s compressed, into %s\n",
		sum.Root, sum.Files, sum.Links, sum.Directories, byteSize(sum.Bytes), byteSize(sum.ArchiveBytes), r.Archive)
	writeRedactions(w, sum)
}

// WriteWarnings says what could not be captured: files root could read, and files left
// out for what they are.
func (r *Report) WriteWarnings(w io.Writer) {
	if len(r.Unreadable) > 0 {
		fmt.Fprintf(w, "warning: %s could not be read (run as root to capture them): %s\n",
			plural.N(len(r.Unreadable), "file", "files"), strings.Join(first(r.Unreadable, 5), ", "))
	}
	if len(r.Refused) > 0 {
		fmt.Fprintf(w, "warning: %s left out for what they are: %s\n",
			plural.N(len(r.Refused), "file", "files"), strings.Join(first(r.Refused, 5), "; "))
	}
}

// writeRedactions says, file by file, which keys' lines were left out and which values
// were replaced, with their numbers: what the archive lacks, without saying what it was.
func writeRedactions(w io.Writer, sum *Summary) {
	if len(sum.Redacted) > 0 {
		fmt.Fprintf(w, "left out of %d captured files (keys and counts; the values are nowhere in the archive):\n", len(sum.Redacted))
	}
	for _, r := range sum.Redacted {
		var parts []string
		if len(r.Replaced) > 0 {
			parts = append(parts, "replaced: "+countedKeys(r.Replaced))
		}
		if len(r.LeftOut) > 0 {
			parts = append(parts, "left out: "+countedKeys(r.LeftOut))
		}
		fmt.Fprintf(w, "  %s: %s\n", r.File, strings.Join(parts, "; "))
	}
	if len(sum.FilesLeftOut) > 0 {
		fmt.Fprintf(w, "not captured, as gpusplit does not read them: %s\n", strings.Join(sum.FilesLeftOut, ", "))
	}
}

// countedKeys is "args ×2, description, net0": the keys in order, with their counts above one.
func countedKeys(m map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 1 {
			out = append(out, fmt.Sprintf("%s ×%d", k, m[k]))
		} else {
			out = append(out, k)
		}
	}
	return strings.Join(out, ", ")
}

func byteSize(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}
