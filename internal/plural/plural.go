// Package plural words counts in messages: "1 GPU", "2 GPUs", never "1 GPUs".
package plural

import "fmt"

// N is n with the noun that fits it: one for 1, many otherwise ("0 GPUs").
func N(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// S is N for nouns whose plural only adds an s.
func S(n int, noun string) string { return N(n, noun, noun+"s") }
