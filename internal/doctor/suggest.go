package doctor

import (
	"fmt"
	"slices"
	"strings"
)

// UnknownCheckError is an id to run that is no check and no group, with the nearest ids
// as a guess: the list of all 33 ran to a line of 600 characters that hid the typo. The
// command line says where the list is.
type UnknownCheckError struct {
	ID   string
	Near []string
}

func (e *UnknownCheckError) Error() string {
	msg := fmt.Sprintf("no check %q", e.ID)
	if len(e.Near) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(e.Near, " or "))
	}
	return msg
}

func unknownCheck(id string) error {
	return &UnknownCheckError{ID: id, Near: nearest(id, append(IDs(), Groups()...))}
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
