package doctor

import (
	"fmt"
	"slices"
	"strings"
)

// unknownCheck refuses an --only id that is no check and no group, with the nearest ids
// as a guess: the list of all 33 ran to a line of 600 characters that hid the typo.
func unknownCheck(id string) error {
	msg := fmt.Sprintf("no check %q", id)
	if near := nearest(id, append(IDs(), Groups()...)); len(near) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(near, " or "))
	}
	return fmt.Errorf("%s; gpusplit doctor --help lists the checks and groups", msg)
}

// nearest are the names closest to s by edit distance, when close enough to be a typo:
// at most 2 edits, or a third of the name's length for long names.
func nearest(s string, names []string) []string {
	best, out := max(2, len(s)/3)+1, []string(nil)
	for _, n := range names {
		d := distance(s, n)
		if strings.HasPrefix(n, s) && len(s) >= 3 {
			d = min(d, 1) // a prefix of a name, as iommu for iommu-off: a likely abbreviation
		}
		switch {
		case d < best:
			best, out = d, []string{n}
		case d == best:
			out = append(out, n)
		}
	}
	slices.Sort(out)
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

// distance is the Levenshtein distance between a and b, in bytes (check ids are ASCII).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
