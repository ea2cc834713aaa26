package bootcfg

import (
	"fmt"
	"strings"
)

// This file splits a shell-sourced defaults file into words and operators, as sh reads
// it, closely enough to find its variable assignments: quoting, escapes, $VAR and ${VAR},
// comments, line continuations and here-documents. Whatever it does not evaluate (command
// substitution, arithmetic, other parameter expansions) is kept as an opaque part, so
// that the word it is in is known to be unknown.

type partKind uint8

const (
	litPart    partKind = iota // literal text
	refPart                    // $NAME or ${NAME}
	opaquePart                 // $(...), `...`, $((...)), ${NAME:-...}, $1, $@ ...: not evaluated
)

type part struct {
	kind partKind
	s    string // the text of a literal, the name of a reference
}

// word is one shell word.
type word struct {
	raw   string // as written
	parts []part
	// lead is the word's leading unquoted, unescaped text ("NAME=" of an assignment
	// word must be that), without line continuations.
	lead string
}

// keyword returns the word when it is written without quoting, for reserved words.
func (w word) keyword() string {
	if w.lead == w.raw {
		return w.raw
	}
	return ""
}

// assignment splits an assignment word ("NAME=value") into the name and the parts of
// the value; ok=false for any other word.
func (w word) assignment() (name string, value []part, ok bool) {
	eq := strings.IndexByte(w.lead, '=')
	if eq <= 0 || !isName(w.lead[:eq]) {
		return "", nil, false
	}
	// The leading text is the start of the first literal part.
	value = append([]part(nil), w.parts...)
	value[0].s = value[0].s[eq+1:]
	if value[0].s == "" {
		value = value[1:]
	}
	return w.lead[:eq], value, true
}

func isNameStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isNameChar(c byte) bool  { return isNameStart(c) || '0' <= c && c <= '9' }

func isName(s string) bool {
	if s == "" || !isNameStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isNameChar(s[i]) {
			return false
		}
	}
	return true
}

type tokKind uint8

const (
	tWord tokKind = iota
	tOp
	tNewline
	tEOF
)

type token struct {
	kind       tokKind
	op         string // the operator, for tOp
	w          word   // the word, for tWord; a redirection's target, for tOp
	start, end int    // byte offsets in the source
}

// isRedirection reports whether op redirects (its token carries the target).
func isRedirection(op string) bool {
	switch op {
	case "<", ">", ">>", "<<", "<<-", "<&", ">&", "<>", ">|":
		return true
	}
	return false
}

// syntaxError is a place where sh would stop reading the file.
type syntaxError struct {
	pos int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

type heredoc struct {
	delim     string
	stripTabs bool
}

type lexer struct {
	src     string
	pos     int
	pending []heredoc // here-documents whose text starts after the next newline
}

// next returns the next token.
func (l *lexer) next() (token, error) {
	for {
		l.skipBlanks()
		if l.pos >= len(l.src) {
			return token{kind: tEOF, start: l.pos, end: l.pos}, nil
		}
		start := l.pos
		switch c := l.src[l.pos]; c {
		case '#':
			if i := strings.IndexByte(l.src[l.pos:], '\n'); i >= 0 {
				l.pos += i
			} else {
				l.pos = len(l.src)
			}
			continue
		case '\n':
			l.pos++
			l.readHeredocs()
			return token{kind: tNewline, start: start, end: start + 1}, nil
		case ';', '&', '|', '(', ')', '<', '>':
			return l.operator()
		}
		w, err := l.word()
		if err != nil {
			return token{}, err
		}
		return token{kind: tWord, w: w, start: start, end: l.pos}, nil
	}
}

// skipBlanks skips spaces, tabs and line continuations.
func (l *lexer) skipBlanks() {
	for l.pos < len(l.src) {
		switch {
		case l.src[l.pos] == ' ' || l.src[l.pos] == '\t':
			l.pos++
		case strings.HasPrefix(l.src[l.pos:], "\\\n"):
			l.pos += 2
		default:
			return
		}
	}
}

var operators = []string{";;", "&&", "||", "<<-", "<<", ">>", "<&", ">&", "<>", ">|", ";", "&", "|", "(", ")", "<", ">"}

func (l *lexer) operator() (token, error) {
	start := l.pos
	op := ""
	for _, o := range operators {
		if strings.HasPrefix(l.src[l.pos:], o) {
			op = o
			break
		}
	}
	l.pos += len(op)
	t := token{kind: tOp, op: op, start: start}
	if isRedirection(op) {
		l.skipBlanks()
		if l.pos < len(l.src) && !strings.ContainsRune(" \t\n;&|()<>#", rune(l.src[l.pos])) {
			w, err := l.word()
			if err != nil {
				return token{}, err
			}
			t.w = w
			if op == "<<" || op == "<<-" {
				l.pending = append(l.pending, heredoc{delim: heredocDelim(w.raw), stripTabs: op == "<<-"})
			}
		}
	}
	t.end = l.pos
	return t, nil
}

// heredocDelim is the delimiter a here-document ends at: the word with its quoting removed.
func heredocDelim(raw string) string {
	return strings.NewReplacer(`\`, "", `'`, "", `"`, "").Replace(raw)
}

// readHeredocs skips the text of the pending here-documents, which starts at l.pos.
func (l *lexer) readHeredocs() {
	for _, h := range l.pending {
		for l.pos < len(l.src) {
			line := l.src[l.pos:]
			if i := strings.IndexByte(line, '\n'); i >= 0 {
				line = line[:i]
				l.pos += i + 1
			} else {
				l.pos = len(l.src)
			}
			if h.stripTabs {
				line = strings.TrimLeft(line, "\t")
			}
			if line == h.delim {
				break
			}
		}
	}
	l.pending = l.pending[:0]
}

// wordBuilder collects a word's parts, merging adjacent literal text.
type wordBuilder struct {
	parts []part
	cur   []byte
}

func (b *wordBuilder) lit(s string)   { b.cur = append(b.cur, s...) }
func (b *wordBuilder) litByte(c byte) { b.cur = append(b.cur, c) }
func (b *wordBuilder) add(p part)     { b.flush(); b.parts = append(b.parts, p) }
func (b *wordBuilder) result() []part { b.flush(); return b.parts }
func (b *wordBuilder) flush() {
	if len(b.cur) > 0 {
		b.parts = append(b.parts, part{kind: litPart, s: string(b.cur)})
		b.cur = b.cur[:0]
	}
}

// word reads one word starting at l.pos.
func (l *lexer) word() (word, error) {
	start := l.pos
	var b wordBuilder
	var lead []byte
	inLead := true
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch c {
		case ' ', '\t', '\n', ';', '&', '|', '(', ')', '<', '>':
			return word{raw: l.src[start:l.pos], parts: b.result(), lead: string(lead)}, nil
		case '\\':
			if l.pos+1 >= len(l.src) {
				// A backslash at the very end stands for itself.
				inLead = false
				b.litByte('\\')
				l.pos++
				continue
			}
			if l.src[l.pos+1] == '\n' { // line continuation: removed
				l.pos += 2
				continue
			}
			inLead = false
			b.litByte(l.src[l.pos+1])
			l.pos += 2
		case '\'':
			inLead = false
			end := strings.IndexByte(l.src[l.pos+1:], '\'')
			if end < 0 {
				return word{}, &syntaxError{l.pos, "unterminated single quote"}
			}
			b.lit(l.src[l.pos+1 : l.pos+1+end])
			l.pos += end + 2
		case '"':
			inLead = false
			if err := l.doubleQuoted(&b); err != nil {
				return word{}, err
			}
		case '$':
			inLead = false
			if err := l.dollar(&b); err != nil {
				return word{}, err
			}
		case '`':
			inLead = false
			if err := l.backquoted(); err != nil {
				return word{}, err
			}
			b.add(part{kind: opaquePart})
		default:
			if inLead {
				lead = append(lead, c)
			}
			b.litByte(c)
			l.pos++
		}
	}
	return word{raw: l.src[start:l.pos], parts: b.result(), lead: string(lead)}, nil
}

// doubleQuoted reads "..." starting at the opening quote.
func (l *lexer) doubleQuoted(b *wordBuilder) error {
	open := l.pos
	l.pos++
	for l.pos < len(l.src) {
		switch c := l.src[l.pos]; c {
		case '"':
			l.pos++
			return nil
		case '\\':
			if l.pos+1 >= len(l.src) {
				l.pos++
				continue // and fail below
			}
			switch n := l.src[l.pos+1]; n {
			case '$', '`', '"', '\\':
				b.litByte(n)
				l.pos += 2
			case '\n':
				l.pos += 2
			default:
				b.litByte('\\')
				l.pos++
			}
		case '$':
			if err := l.dollar(b); err != nil {
				return err
			}
		case '`':
			if err := l.backquoted(); err != nil {
				return err
			}
			b.add(part{kind: opaquePart})
		default:
			b.litByte(c)
			l.pos++
		}
	}
	return &syntaxError{open, "unterminated double quote"}
}

// dollar reads an expansion starting at the '$'.
func (l *lexer) dollar(b *wordBuilder) error {
	at := l.pos
	l.pos++
	if l.pos >= len(l.src) {
		b.litByte('$')
		return nil
	}
	switch c := l.src[l.pos]; {
	case c == '{':
		j := l.pos + 1
		for j < len(l.src) && isNameChar(l.src[j]) {
			j++
		}
		if name := l.src[l.pos+1 : j]; isName(name) && j < len(l.src) && l.src[j] == '}' {
			b.add(part{kind: refPart, s: name})
			l.pos = j + 1
			return nil
		}
		end, ok := skipNested(l.src, l.pos, '{', '}')
		if !ok {
			return &syntaxError{at, "unterminated ${"}
		}
		l.pos = end
		b.add(part{kind: opaquePart})
	case c == '(':
		end, ok := skipNested(l.src, l.pos, '(', ')')
		if !ok {
			return &syntaxError{at, "unterminated $("}
		}
		l.pos = end
		b.add(part{kind: opaquePart})
	case isNameStart(c):
		j := l.pos
		for j < len(l.src) && isNameChar(l.src[j]) {
			j++
		}
		b.add(part{kind: refPart, s: l.src[l.pos:j]})
		l.pos = j
	case '0' <= c && c <= '9' || strings.IndexByte("@*#?-$!", c) >= 0:
		l.pos++
		b.add(part{kind: opaquePart})
	default:
		b.litByte('$') // a dollar sign that starts no expansion stands for itself
	}
	return nil
}

// backquoted skips `...` starting at the opening backquote.
func (l *lexer) backquoted() error {
	open := l.pos
	for i := l.pos + 1; i < len(l.src); i++ {
		switch l.src[i] {
		case '\\':
			i++
		case '`':
			l.pos = i + 1
			return nil
		}
	}
	return &syntaxError{open, "unterminated backquote"}
}

// skipNested returns the offset after the bracket that closes the one at src[i], skipping
// quoted text and escapes on the way; ok=false when none does.
func skipNested(src string, i int, open, close byte) (end int, ok bool) {
	depth := 0
	for ; i < len(src); i++ {
		switch c := src[i]; c {
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case '\\':
			i++
		case '\'':
			j := strings.IndexByte(src[i+1:], '\'')
			if j < 0 {
				return 0, false
			}
			i += j + 1
		case '"', '`':
			j := i + 1
			for ; j < len(src) && src[j] != c; j++ {
				if src[j] == '\\' {
					j++
				}
			}
			if j >= len(src) {
				return 0, false
			}
			i = j
		}
	}
	return 0, false
}

// lineIndex finds the line of a byte offset.
type lineIndex []int // the offset each line starts at

func newLineIndex(src string) lineIndex {
	idx := lineIndex{0}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			idx = append(idx, i+1)
		}
	}
	return idx
}

// line returns the 1-based line holding offset pos.
func (x lineIndex) line(pos int) int {
	lo, hi := 0, len(x) // x[lo] <= pos < x[hi]
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if x[mid] <= pos {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + 1
}

// text returns lines first..last (1-based) of src as written, without line ends.
func (x lineIndex) text(src string, first, last int) string {
	var lines []string
	for n := first; n <= last && n <= len(x); n++ {
		s := src[x[n-1]:]
		if n < len(x) {
			s = src[x[n-1] : x[n]-1]
		}
		lines = append(lines, strings.TrimSuffix(s, "\r"))
	}
	return strings.Join(lines, "\n")
}

func (e *syntaxError) at(file string, x lineIndex) string {
	return fmt.Sprintf("%s:%d: %s", file, x.line(e.pos), e.msg)
}
