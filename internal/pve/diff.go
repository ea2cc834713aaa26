package pve

import (
	"fmt"
	"strings"
)

// Diff returns a unified diff of two texts (three lines of context), as diff -u prints
// it; "" when they are equal.
func Diff(name, old, new string) string {
	if old == new {
		return ""
	}
	a, b := diffLines(old), diffLines(new)
	// The longest common subsequence, by dynamic programming: configs are small.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
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
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i, j})
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			// Deletions before insertions, as diff prints them.
			ops = append(ops, op{'-', a[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', b[j], i, j})
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
