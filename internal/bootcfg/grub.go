package bootcfg

import (
	"errors"
	"io/fs"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
)

// The GRUB defaults files, and the two variables of the kernel command line.
const (
	GrubFile   = "/etc/default/grub"
	GrubDropIn = "/etc/default/grub.d"

	VarDefault = "GRUB_CMDLINE_LINUX_DEFAULT"
	VarLinux   = "GRUB_CMDLINE_LINUX"
)

// maxValue bounds what expansions add to a variable's value, and expandBudget what all
// of a reading's expansions copy: far above any real file's needs, they keep a file that
// doubles a variable line after line from taking the memory and the time.
const (
	maxValue     = 64 << 10
	expandBudget = 64 << 20
)

// Assignment is one assignment of a GRUB variable in a shell-sourced defaults file.
type Assignment struct {
	File  string // "/etc/default/grub", "/etc/default/grub.d/50-cloudimg-settings.cfg"
	Line  int    // 1-based
	Text  string // the line as written
	Var   string // "GRUB_CMDLINE_LINUX_DEFAULT" or "GRUB_CMDLINE_LINUX"
	Value string // the value after expansion of earlier variables
	Keeps bool   // the value refers to the variable itself ("$GRUB_CMDLINE_LINUX_DEFAULT foo"): it appends, not replaces
}

// Override is a parameter set by one assignment and discarded by a later one that replaced the variable.
type Override struct {
	Param         string // the parameter as written: "iommu=pt"
	SetBy, LostBy Assignment
}

// Grub is the effect of /etc/default/grub and /etc/default/grub.d/*.cfg, sourced in the order
// grub-mkconfig sources them (the main file, then the drop-ins in C-locale glob order; the last assignment wins).
type Grub struct {
	Present     bool         // /etc/default/grub exists
	Default     string       // final GRUB_CMDLINE_LINUX_DEFAULT
	Linux       string       // final GRUB_CMDLINE_LINUX
	Assignments []Assignment // to the two variables, in the order sh makes them
	// Overrides are the parameters that an assignment replacing its variable discarded
	// and that no later assignment put back into either variable, in the order they
	// were lost. Each parameter is listed once, with the assignment that last set it and
	// the one that last discarded it.
	Overrides []Override

	// Unsure lists assignments to the two variables whose effect is not known: an
	// assignment inside an if, case, for or while block, a function or a subshell, in
	// a pipeline or after && or ||, or whose value holds a command substitution or an
	// expansion other than $VAR and ${VAR} (those are not applied: Value is empty), and
	// an assignment built from a variable that was set that way (applied with the
	// variable's last known value). When it is not empty, Default and Linux may differ
	// from what grub-mkconfig computes.
	Unsure []Assignment
	// SyntaxErrors are the places, as "file:line: problem", where sh stops reading a
	// file (an unterminated quote): grub-mkconfig, and so update-grub, fails there.
	// The file's assignments up to that point are kept.
	SyntaxErrors []string
}

// Cmdline is what normal boot entries get: GRUB_CMDLINE_LINUX then GRUB_CMDLINE_LINUX_DEFAULT.
//
// Parameters are separated by single spaces.
func (g *Grub) Cmdline() string {
	return strings.Join(append(Tokens(g.Linux), Tokens(g.Default)...), " ")
}

// ReadGrub reads /etc/default/grub and /etc/default/grub.d/*.cfg.
// A missing /etc/default/grub gives Present=false, no error; unreadable files are an error naming the file.
//
// As grub-mkconfig does, the drop-ins are read even without the main file; names that
// start with a dot, directories and links to nothing are left out, as its glob and its
// test -e leave them out.
func ReadGrub(h *host.Host) (*Grub, error) {
	var files []source
	b, err := h.ReadFile(GrubFile)
	switch {
	case err == nil:
		files = append(files, source{GrubFile, string(b)})
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	present := err == nil
	names, err := h.ReadDir(GrubDropIn)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, name := range names { // sorted by byte value: the C locale's glob order
		if !strings.HasSuffix(name, ".cfg") || strings.HasPrefix(name, ".") {
			continue
		}
		p := GrubDropIn + "/" + name
		if h.IsDir(p) {
			continue
		}
		b, err := h.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, source{p, string(b)})
	}
	g := evalGrub(files)
	g.Present = present
	return g, nil
}

// source is a file's name and contents.
type source struct{ name, text string }

// evalGrub sources the files in order.
func evalGrub(files []source) *Grub {
	e := &evaluator{
		g:       &Grub{},
		vals:    map[string]string{},
		tainted: map[string]bool{},
		setBy:   map[string]map[string]Assignment{},
		budget:  expandBudget,
	}
	for _, f := range files {
		e.file(f.name, f.text)
	}
	g := e.g
	g.Default, g.Linux = e.vals[VarDefault], e.vals[VarLinux]

	// The last loss of each parameter, unless a later assignment put it back.
	final := map[string]bool{}
	for _, t := range Tokens(g.Cmdline()) {
		final[t] = true
	}
	last := map[string]int{}
	for i, o := range e.losses {
		last[o.Param] = i
	}
	for i, o := range e.losses {
		if last[o.Param] == i && !final[o.Param] {
			g.Overrides = append(g.Overrides, o)
		}
	}
	return g
}

type evaluator struct {
	g       *Grub
	vals    map[string]string
	tainted map[string]bool // variables whose value is not known for sure
	// setBy is, for each command line variable, the assignment that set each of its parameters.
	setBy  map[string]map[string]Assignment
	losses []Override
	budget int // bytes expansions may still copy

	// The file being read.
	name  string
	src   string
	lines lineIndex
	// blocks holds the compound commands the reader is in: "if", "while", "until",
	// "for", "case", "{" and "(".
	blocks []block
	// broken is set, with the problem, where sh would stop reading the file.
	broken *syntaxError
}

type block struct {
	kind string
	pos  int
}

func isCmdlineVar(name string) bool { return name == VarDefault || name == VarLinux }

// command is a simple command: its words, where it is, and what separates it from its neighbours.
type command struct {
	words      []word
	wordAt     []int // where each word starts
	start, end int
	redirected bool
	before     string // the separator before: "\n" (also at the start), ";", "&&", "|", "(" ...
	after      string // the separator after: "" at the end of the file
}

// file sources one file.
func (e *evaluator) file(name, src string) {
	e.name, e.src, e.lines, e.blocks, e.broken = name, src, newLineIndex(src), nil, nil
	lx := &lexer{src: src}
	c := command{start: -1, before: "\n"}
	for {
		t, err := lx.next()
		if err != nil {
			var se *syntaxError
			if errors.As(err, &se) {
				e.g.SyntaxErrors = append(e.g.SyntaxErrors, se.at(name, e.lines))
			}
			return // sh reads no further; the unfinished command does not run
		}
		switch {
		case t.kind == tWord:
			if c.start < 0 {
				c.start = t.start
			}
			c.words = append(c.words, t.w)
			c.wordAt = append(c.wordAt, t.start)
			c.end = t.end
			continue
		case t.kind == tOp && isRedirection(t.op):
			if c.start < 0 {
				c.start = t.start
			}
			c.redirected = true
			c.end = t.end
			continue
		}
		sep := t.op
		switch t.kind {
		case tNewline:
			sep = "\n"
		case tEOF:
			sep = ""
		}
		c.after = sep
		e.run(c)
		if t.kind == tOp {
			e.bracket(t)
		}
		if t.kind == tEOF && e.broken == nil && len(e.blocks) > 0 {
			// A compound command without its end never runs.
			b := e.blocks[len(e.blocks)-1]
			e.broken = &syntaxError{b.pos, "no end to the " + blockName(b.kind) + " started here"}
		}
		if e.broken != nil {
			e.g.SyntaxErrors = append(e.g.SyntaxErrors, e.broken.at(name, e.lines))
			return
		}
		if t.kind == tEOF {
			return
		}
		if sep == "\n" && len(c.words) == 0 && !c.redirected && (c.before == "&&" || c.before == "||" || c.before == "|") {
			sep = c.before // the list goes on after a line break
		}
		c = command{start: -1, before: sep}
	}
}

// blockName names a compound command by the word that opens it.
func blockName(kind string) string { return blockNames[kind] }

var blockNames = map[string]string{
	"if": "if", "case": "case", "while": "while loop", "until": "until loop",
	"for": "for loop", "{": "{ group", "(": "( subshell",
}

// bracket follows the subshell parentheses; in a case block they belong to its patterns.
func (e *evaluator) bracket(t token) {
	top := ""
	if n := len(e.blocks); n > 0 {
		top = e.blocks[n-1].kind
	}
	switch {
	case top == "case":
	case t.op == "(":
		e.blocks = append(e.blocks, block{"(", t.start})
	case t.op == ")":
		e.close(t.start, ")", "(")
	}
}

// close ends the innermost compound command, which must be one of kinds.
func (e *evaluator) close(pos int, kw string, kinds ...string) {
	n := len(e.blocks)
	if n == 0 || !slices.Contains(kinds, e.blocks[n-1].kind) {
		e.broken = &syntaxError{pos, "unexpected " + kw}
		return
	}
	e.blocks = e.blocks[:n-1]
}

// run carries out a simple command as far as it concerns variables.
func (e *evaluator) run(c command) {
	words := c.words
	negated := false
reserved:
	for len(words) > 0 {
		pos := c.wordAt[len(c.words)-len(words)]
		switch kw := words[0].keyword(); kw {
		case "if", "while", "until", "{":
			e.blocks = append(e.blocks, block{kw, pos})
		case "for", "case":
			// The rest is the loop's list or the case's word, not a command.
			e.blocks = append(e.blocks, block{kw, pos})
			return
		case "then", "do", "else", "elif":
		case "fi":
			e.close(pos, kw, "if")
		case "done":
			e.close(pos, kw, "while", "until", "for")
		case "esac":
			e.close(pos, kw, "case")
		case "}":
			e.close(pos, kw, "{")
		case "!":
			negated = true
		default:
			break reserved
		}
		if e.broken != nil {
			return
		}
		words = words[1:]
	}
	if len(words) == 0 {
		return
	}
	// Whether the command surely runs, in this shell: not inside a compound command,
	// a pipeline, an and-or list or the background.
	sure := len(e.blocks) == 0 && !negated && !c.redirected &&
		(c.before == "\n" || c.before == ";") &&
		(c.after == "\n" || c.after == ";" || c.after == "")

	args := words
	export := false
	switch words[0].keyword() {
	case "export", "readonly":
		args, export = words[1:], true
	case "unset":
		for _, w := range words[1:] {
			if strings.HasPrefix(w.raw, "-") && strings.Contains(w.raw, "f") {
				return // functions, not variables
			}
		}
		for _, w := range words[1:] {
			if name := w.keyword(); isName(name) {
				e.assign(c, name, nil, sure)
			}
		}
		return
	}
	// The assignments, when the command is nothing else: assignments before a command
	// name only go into that command's environment.
	n := 0
	for _, w := range args {
		if _, _, ok := w.assignment(); ok {
			n++
		} else if export && isName(w.keyword()) {
			n++ // "export NAME" assigns nothing
		} else {
			break
		}
	}
	if n < len(args) {
		return
	}
	for _, w := range args {
		if name, value, ok := w.assignment(); ok {
			e.assign(c, name, value, sure)
		}
	}
}

// assign sets a variable from the parts of a value; sure tells whether the command surely runs.
func (e *evaluator) assign(c command, name string, value []part, sure bool) {
	first, last := e.lines.line(c.start), e.lines.line(max(c.end-1, c.start))
	a := Assignment{File: e.name, Line: first, Text: e.lines.text(e.src, first, last), Var: name}
	// Expansions may make a value at most maxValue longer than its literal text, and all
	// of them together copy at most expandBudget bytes: past that, the value is not known.
	limit := maxValue
	for _, p := range value {
		if p.kind == litPart {
			limit += len(p.s)
		}
	}
	var b strings.Builder
	known, fromTainted := sure, false
parts:
	for _, p := range value {
		switch p.kind {
		case litPart:
			b.WriteString(p.s)
		case refPart:
			if p.s == name {
				a.Keeps = true
			} else if e.tainted[p.s] {
				fromTainted = true
			}
			v := e.vals[p.s]
			if b.Len()+len(v) > limit || len(v) > e.budget {
				known = false
				break parts
			}
			e.budget -= len(v)
			b.WriteString(v)
		case opaquePart:
			known = false
		}
	}
	cmdline := isCmdlineVar(name)
	if !known {
		e.tainted[name] = true
		if cmdline {
			e.g.Unsure = append(e.g.Unsure, a)
		}
		return
	}
	a.Value = b.String()
	switch {
	case fromTainted:
		e.tainted[name] = true
		if cmdline {
			e.g.Unsure = append(e.g.Unsure, a)
		}
	case !a.Keeps:
		delete(e.tainted, name)
	}
	old := e.vals[name]
	e.vals[name] = a.Value
	if !cmdline {
		return
	}
	e.g.Assignments = append(e.g.Assignments, a)

	// Which assignment set each parameter, and which ones this one discards.
	prev := e.setBy[name]
	now := map[string]Assignment{}
	for _, t := range Tokens(a.Value) {
		if s, ok := prev[t]; ok && a.Keeps {
			now[t] = s
		} else if _, ok := now[t]; !ok {
			now[t] = a
		}
	}
	lost := map[string]bool{}
	for _, t := range Tokens(old) {
		if _, ok := now[t]; ok || lost[t] {
			continue
		}
		lost[t] = true
		e.losses = append(e.losses, Override{Param: t, SetBy: prev[t], LostBy: a})
	}
	e.setBy[name] = now
}
