package pve

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/plan"
)

// lcsLength is the textbook dynamic-programming oracle: quadratic, for small inputs.
func lcsLength(a, b []string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				cur[j] = prev[j+1] + 1
			} else {
				cur[j] = max(prev[j], cur[j+1])
			}
		}
		prev, cur = cur, prev
	}
	return prev[0]
}

// The edit script is a shortest one, and applying it to a gives b: checked against the
// quadratic oracle on many random pairs of texts over a small alphabet, where lines
// repeat and ties abound.
func TestDifferIsShortest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	text := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = string(rune('a' + r.IntN(4)))
		}
		return out
	}
	for round := range 3000 {
		a, b := text(r.IntN(25)), text(r.IntN(25))
		if round%3 == 0 { // b an edit of a: the usual case
			b = append(append(append([]string{}, a[:len(a)/2]...), text(r.IntN(4))...), a[len(a)/2:]...)
		}
		d := newDiffer(a, b)
		d.compare(0, len(a), 0, len(b))
		edits := 0
		var got []string
		i, j := 0, 0
		for i < len(a) || j < len(b) {
			switch {
			case i < len(a) && d.del[i]:
				edits++
				i++
			case j < len(b) && d.ins[j]:
				got = append(got, b[j])
				edits++
				j++
			default:
				if i >= len(a) || j >= len(b) || a[i] != b[j] {
					t.Fatalf("%q → %q: line %d of a kept against line %d of b", a, b, i, j)
				}
				got = append(got, a[i])
				i++
				j++
			}
		}
		if strings.Join(got, "") != strings.Join(b, "") {
			t.Fatalf("%q → %q: the script gives %q", a, b, got)
		}
		if want := len(a) + len(b) - 2*lcsLength(a, b); edits != want {
			t.Fatalf("%q → %q: %d edits, the shortest has %d", a, b, edits, want)
		}
	}
}

// Past maxEdits a region is replaced whole: still a correct diff, in bounded time.
func TestDiffBoundsHostileInput(t *testing.T) {
	var a, b strings.Builder
	for i := range 3 * maxEdits {
		a.WriteString("a" + string(rune('0'+i%10)) + "\n")
		b.WriteString("b" + string(rune('0'+i%10)) + "\n")
	}
	diff := Diff("f", a.String(), b.String())
	if strings.Count(diff, "\n-") != 3*maxEdits || strings.Count(diff, "\n+") != 3*maxEdits+1 {
		t.Fatalf("not a whole replacement: %d lines", strings.Count(diff, "\n"))
	}
}

// A pci.cfg larger than pmxcfs holds is refused when read, before it is parsed or diffed.
func TestSyncRefusesOversizedMappings(t *testing.T) {
	big := "x1\n" + strings.Repeat("\tmap id=10de:2bb1,node=kpro9,path=0000:01:00.0\n", MaxFile/40) + "\n"
	h, inv := demoWith(t, map[string]string{"etc/pve/mapping/pci.cfg": big})
	d := vfio(t, "numa:1")
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Sync(h, inv, p, d, SyncOptions{}); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Fatalf("error %v", err)
	}
}
