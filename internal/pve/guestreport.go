package pve

import (
	"fmt"
	"io"
)

// GuestWrite is what the write of one guest config did (WriteGuest), in the JSON of the
// commands that make one (docs/json.md).
type GuestWrite struct {
	Applied  bool         `json:"applied"`
	Problems []string     `json:"problems"`
	Files    []FileResult `json:"files"`
}

// WriteDiff prints a guest config's diff, each note as a comment after it.
func WriteDiff(w io.Writer, diff string, notes []string) {
	fmt.Fprint(w, diff)
	for _, n := range notes {
		fmt.Fprintf(w, "# %s\n", n)
	}
}
