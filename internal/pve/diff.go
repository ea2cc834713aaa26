package pve

import (
	"fmt"
	"strings"
)

// Diff returns a unified diff of two texts (three lines of context), as diff -u prints
// it; "" when they are equal. Its memory is linear in the texts, and its time grows with
// their size times the number of lines that differ (Myers' algorithm in linear space),
// up to a bound past which a region is shown as replaced whole.
func Diff(name, old, new string) string {
	if old == new {
		return ""
	}
	a, b := diffLines(old), diffLines(new)
	d := newDiffer(a, b)
	d.compare(0, len(a), 0, len(b))
	type op struct {
		kind byte // ' ', '-', '+'
		text string
		ai   int // line in a (for ' ' and '-')
		bi   int // line in b (for ' ' and '+')
	}
	var ops []op
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && d.del[i]:
			// Deletions before insertions, as diff prints them.
			ops = append(ops, op{'-', a[i], i, j})
			i++
		case j < len(b) && d.ins[j]:
			ops = append(ops, op{'+', b[j], i, j})
			j++
		default:
			ops = append(ops, op{' ', a[i], i, j})
			i++
			j++
		}
	}
	const context = 3
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", name, name)
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		// A hunk: from context lines before the change to context lines after the last
		// change that is within 2*context of the next.
		start := max(k-context, 0)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		var as, bs, an, bn int
		as, bs = ops[start].ai+1, ops[start].bi+1
		var body strings.Builder
		for _, o := range ops[start:end] {
			switch o.kind {
			case ' ':
				an++
				bn++
			case '-':
				an++
			case '+':
				bn++
			}
			body.WriteByte(o.kind)
			body.WriteString(o.text)
			body.WriteByte('\n')
		}
		if an == 0 {
			as--
		}
		if bn == 0 {
			bs--
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n%s", span(as, an), span(bs, bn), body.String())
		k = end
	}
	return out.String()
}

func span(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// diffLines splits a text into lines; a missing final newline is shown as diff does.
func diffLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if lines[len(lines)-1] == "" {
		return lines[:len(lines)-1]
	}
	lines[len(lines)-1] += "\n\\ No newline at end of file"
	return lines
}

// differ finds a shortest edit script between two line lists, marking the lines of a
// that are deleted and those of b that are inserted.
type differ struct {
	a, b     []int // lines as numbers: equal lines, equal numbers
	del, ins []bool
	vf, vb   []int // furthest x of the forward paths, furthest-back y of the reverse ones, by diagonal
}

// maxEdits bounds the edit distance searched in one region: past it the region is
// replaced whole, which keeps a hostile input's cost at (N+M)·maxEdits.
const maxEdits = 4096

func newDiffer(a, b []string) *differ {
	ids := map[string]int{}
	num := func(lines []string) []int {
		out := make([]int, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	n := len(a) + len(b)
	v := min(n, 2*maxEdits) + 3
	return &differ{a: num(a), b: num(b), del: make([]bool, len(a)), ins: make([]bool, len(b)), vf: make([]int, 2*v+1), vb: make([]int, 2*v+1)}
}

// compare marks the edits that turn a[alo:ahi] into b[blo:bhi].
func (d *differ) compare(alo, ahi, blo, bhi int) {
	for alo < ahi && blo < bhi && d.a[alo] == d.b[blo] {
		alo, blo = alo+1, blo+1
	}
	for alo < ahi && blo < bhi && d.a[ahi-1] == d.b[bhi-1] {
		ahi, bhi = ahi-1, bhi-1
	}
	switch {
	case alo == ahi:
		for j := blo; j < bhi; j++ {
			d.ins[j] = true
		}
		return
	case blo == bhi:
		for i := alo; i < ahi; i++ {
			d.del[i] = true
		}
		return
	}
	sx, sy, ex, ey, ok := d.middle(alo, ahi, blo, bhi)
	if !ok {
		d.compare(alo, ahi, blo, blo) // too many edits: all of a out, all of b in
		d.compare(ahi, ahi, blo, bhi)
		return
	}
	d.compare(alo, sx, blo, sy)
	d.compare(sx, ex, sy, ey)
	d.compare(ex, ahi, ey, bhi)
}

// middle finds the middle snake of the region: a diagonal run with one edit at an end,
// that lies on a shortest edit path, from (sx, sy) to (ex, ey) (Myers 1986, section 4b).
// The first and last lines of the region differ.
func (d *differ) middle(left, right, top, bottom int) (sx, sy, ex, ey int, ok bool) {
	n, m := right-left, bottom-top
	delta := n - m
	odd := delta%2 != 0
	limit := min((n+m+1)/2, maxEdits)
	off := len(d.vf) / 2
	d.vf[off+1] = left
	d.vb[off+1] = bottom
	for e := 0; e <= limit; e++ {
		for k := e; k >= -e; k -= 2 {
			var px, x int
			if k == -e || (k != e && d.vf[off+k-1] < d.vf[off+k+1]) {
				px = d.vf[off+k+1]
				x = px
			} else {
				px = d.vf[off+k-1]
				x = px + 1
			}
			y := top + (x - left) - k
			py := y
			if e != 0 && x == px {
				py = y - 1
			}
			for x < right && y < bottom && d.a[x] == d.b[y] {
				x, y = x+1, y+1
			}
			d.vf[off+k] = x
			if c := k - delta; odd && c >= -(e-1) && c <= e-1 && y >= d.vb[off+c] {
				return px, py, x, y, true
			}
		}
		for c := e; c >= -e; c -= 2 {
			var py, y int
			if c == -e || (c != e && d.vb[off+c-1] > d.vb[off+c+1]) {
				py = d.vb[off+c+1]
				y = py
			} else {
				py = d.vb[off+c-1]
				y = py - 1
			}
			k := c + delta
			x := left + (y - top) + k
			px := x
			if e != 0 && y == py {
				px = x + 1
			}
			for x > left && y > top && d.a[x-1] == d.b[y-1] {
				x, y = x-1, y-1
			}
			d.vb[off+c] = y
			if !odd && k >= -e && k <= e && x <= d.vf[off+k] {
				return x, y, px, py, true
			}
		}
	}
	return 0, 0, 0, 0, false
}
