// Package table lays out the tables gpusplit prints for a person so that they fit the
// terminal: the columns a user needs to act keep their place, the others are dropped
// first, and long cells are shortened or wrapped only when that is not enough.
package table

import (
	"io"
	"strings"
	"unicode/utf8"
)

// Wide is the width that shows every column at its full width (-o wide).
const Wide = 0

// Gap is the space between two columns.
const Gap = 2

// Fit says what a column may do to its cells when the table is too wide.
type Fit int

const (
	// Keep prints every cell whole.
	Keep Fit = iota
	// Shorten cuts a cell at a word and ends it with "…", down to the column's Min.
	Shorten
	// Wrap puts a cell on several lines, breaking after the column's Sep (else at
	// spaces); the column is never narrower than its longest part.
	Wrap
)

// Column is one column of a table.
type Column struct {
	Header string
	// Drop is the order in which optional columns go when the table does not fit: 1
	// first, then 2…; 0 is a column that always stays.
	Drop int
	Fit  Fit
	// Min is the narrowest a Shorten column gets (at least its header).
	Min int
	// Sep is where a Wrap column prefers to break, such as "; " between holders.
	Sep string
}

// Table is a header and rows, laid out by Write.
type Table struct {
	Columns []Column
	// Indent starts every line, as for a table inside a section.
	Indent string
	rows   [][]string
}

// New returns a table of these columns.
func New(cols ...Column) *Table { return &Table{Columns: cols} }

// Add appends a row, one cell per column; missing cells are empty.
func (t *Table) Add(cells ...string) {
	row := make([]string, len(t.Columns))
	copy(row, cells)
	t.rows = append(t.rows, row)
}

// Layout returns the index of each column shown at width and the width each gets. The
// rule: every column whole if they fit (or width is Wide); else the optional columns go
// in their Drop order until the rest fits whole; then the Shorten and Wrap columns
// narrow, the widest first, down to their minimum. When even that is too wide the
// table is printed at its minimum, wider than asked.
func (t *Table) Layout(width int) (shown []int, widths []int) {
	n := len(t.Columns)
	natural := make([]int, n)
	least := make([]int, n)
	for i, c := range t.Columns {
		natural[i] = Len(c.Header)
		for _, r := range t.rows {
			natural[i] = max(natural[i], Len(r[i]))
		}
		least[i] = natural[i]
		switch c.Fit {
		case Shorten:
			least[i] = min(natural[i], max(c.Min, Len(c.Header), 2))
		case Wrap:
			least[i] = Len(c.Header)
			for _, r := range t.rows {
				for _, p := range parts(r[i], c.Sep) {
					least[i] = max(least[i], Len(p))
				}
			}
		}
	}
	for i := range n {
		shown = append(shown, i)
	}
	total := func(w []int) int {
		s := Len(t.Indent) + Gap*(len(shown)-1)
		for _, i := range shown {
			s += w[i]
		}
		return s
	}
	if width <= Wide {
		return shown, pick(natural, shown)
	}
	for total(natural) > width {
		drop := -1
		for k, i := range shown {
			if d := t.Columns[i].Drop; d > 0 && (drop < 0 || d < t.Columns[shown[drop]].Drop) {
				drop = k
			}
		}
		if drop < 0 {
			break
		}
		shown = append(shown[:drop], shown[drop+1:]...)
	}
	cur := append([]int(nil), natural...)
	for total(cur) > width {
		widest := -1
		for _, i := range shown {
			if cur[i] > least[i] && (widest < 0 || cur[i] > cur[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break
		}
		cur[widest]--
	}
	return shown, pick(cur, shown)
}

func pick(w []int, shown []int) []int {
	out := make([]int, len(shown))
	for k, i := range shown {
		out[k] = w[i]
	}
	return out
}

// Write prints the table at most width columns wide (Wide: every column whole), with
// no space at the end of a line.
func (t *Table) Write(w io.Writer, width int) error {
	shown, widths := t.Layout(width)
	var b strings.Builder
	line := func(cells [][]string) {
		height := 1
		for _, c := range cells {
			height = max(height, len(c))
		}
		for l := range height {
			var s strings.Builder
			s.WriteString(t.Indent)
			for k, c := range cells {
				cell := ""
				if l < len(c) {
					cell = c[l]
				}
				if k > 0 {
					s.WriteString(strings.Repeat(" ", Gap))
				}
				s.WriteString(cell)
				if k < len(cells)-1 {
					s.WriteString(strings.Repeat(" ", widths[k]-Len(cell)))
				}
			}
			b.WriteString(strings.TrimRight(s.String(), " ") + "\n")
		}
	}
	// Cells are fitted first, so that a column cut at a word is no wider than its cells.
	header := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		header[i] = c.Header
	}
	var rows [][][]string
	for _, r := range append([][]string{header}, t.rows...) {
		cells := make([][]string, len(shown))
		for k, i := range shown {
			cells[k] = fit(r[i], widths[k], t.Columns[i])
		}
		rows = append(rows, cells)
	}
	for k := range widths {
		widths[k] = 0
		for _, cells := range rows {
			for _, l := range cells[k] {
				widths[k] = max(widths[k], Len(l))
			}
		}
	}
	for _, cells := range rows {
		line(cells)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fit makes a cell at most n columns wide as its column allows, as lines.
func fit(s string, n int, c Column) []string {
	if Len(s) <= n {
		return []string{s}
	}
	switch c.Fit {
	case Shorten:
		return []string{Cut(s, n)}
	case Wrap:
		return wrapParts(parts(s, c.Sep), n)
	}
	return []string{s}
}

// Cut shortens s to at most n columns, at the end of a word when one ends in the last
// quarter, and marks the cut with "…".
func Cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n < 2 {
		return string(r[:max(n, 0)])
	}
	cut := n - 1
	// A word ends at cut when the rune there is a space; else go back to the last space
	// when that loses at most a quarter of the room, else cut inside the word.
	if r[cut] != ' ' {
		for i := cut - 1; i >= n-n/4; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
	}
	return strings.TrimRight(string(r[:cut]), " ,;:") + "…"
}

// WrapText breaks text into lines of at most width columns at spaces, the first starting
// with first and the others with indent (a word longer than a line stays whole). It
// is for the sentences printed beside tables, such as problems and notes.
func WrapText(text string, width int, first, indent string) []string {
	if width <= Wide || Len(first)+Len(text) <= width {
		return []string{first + text}
	}
	var lines []string
	cur := first
	empty := true
	for _, word := range strings.Fields(text) {
		if !empty && Len(cur)+1+Len(word) > width {
			lines = append(lines, cur)
			cur, empty = indent, true
		}
		if !empty {
			cur += " "
		}
		cur += word
		empty = false
	}
	return append(lines, cur)
}

// parts splits a cell where a Wrap column may break: after each sep (kept, without its
// trailing space), else at spaces.
func parts(s, sep string) []string {
	if sep == "" {
		return strings.Fields(s)
	}
	var out []string
	keep := strings.TrimRight(sep, " ")
	for p := range strings.SplitSeq(s, sep) {
		out = append(out, p+keep)
	}
	out[len(out)-1] = strings.TrimSuffix(out[len(out)-1], keep)
	return out
}

// wrapParts joins parts into lines of at most n columns, a space between two parts.
func wrapParts(ps []string, n int) []string {
	var lines []string
	cur := ""
	for _, p := range ps {
		switch {
		case cur == "":
			cur = p
		case Len(cur)+1+Len(p) <= n:
			cur += " " + p
		default:
			lines = append(lines, cur)
			cur = p
		}
	}
	return append(lines, cur)
}

// Len is how many columns s takes on a terminal: one per rune, as every character
// gpusplit prints (addresses, names, "└", "…", "×") is one column wide.
func Len(s string) int { return utf8.RuneCountInString(s) }

// TabLen is how many columns s takes on a terminal whose TAB stops are every 8
// columns, as for nvidia-smi's TAB-separated matrix.
func TabLen(s string) int {
	n := 0
	for _, r := range s {
		if r == '\t' {
			n += 8 - n%8
		} else {
			n++
		}
	}
	return n
}
