package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpusplit/gpusplit/internal/cli"
	"github.com/gpusplit/gpusplit/internal/lazyre"
)

// Meta is what every page's title line says beside the command.
type Meta struct {
	Date    string // YYYY-MM-DD
	Version string
}

// PageName is the man page of a command: its path with dashes, "gpusplit-pve-sync".
func PageName(c *cobra.Command) string { return strings.ReplaceAll(c.CommandPath(), " ", "-") }

// Commands returns the commands that get a page, root first, each before its
// subcommands: every available command but help topics and cobra's own help and
// completion, whose scripts the package installs instead.
func Commands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		out = append(out, c)
		for _, s := range c.Commands() {
			if documented(s) {
				walk(s)
			}
		}
	}
	walk(root)
	return out
}

func documented(c *cobra.Command) bool {
	if c.Name() == "help" || c.Name() == "completion" {
		return false
	}
	return c.IsAvailableCommand() && !c.IsAdditionalHelpTopicCommand()
}

// topics are the root's help topics ("gpusplit help selectors").
func topics(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range root.Commands() {
		if c.IsAdditionalHelpTopicCommand() {
			out = append(out, c)
		}
	}
	return out
}

// sectionTopics are the help topics that gpusplit(1) holds whole, as sections; the
// others it names (exit-status is its EXIT STATUS; split.toml is a file, not prose, and
// the package installs it as an example).
var sectionTopics = []string{"selectors"}

// header is the title line, then no hyphenation and no justification: the pages are full
// of paths and options, which must be shown whole, and a path too long to justify is
// better ragged than spread.
func header(name string, m Meta) string {
	// The date and version are shown as they are: a hyphen there is no minus sign.
	return fmt.Sprintf(".TH %s 1 \"%s\" \"gpusplit %s\" \"gpusplit manual\"\n.nh\n.ad l\n", quote(strings.ToUpper(name)), m.Date, strings.ReplaceAll(m.Version, `"`, ""))
}

// Page renders the man page of c in section 1.
func Page(c *cobra.Command, m Meta) string {
	c.InitDefaultHelpFlag()
	if !c.HasParent() {
		c.InitDefaultVersionFlag()
	}
	var b strings.Builder
	name := PageName(c)
	b.WriteString(header(name, m))
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(&b, "%s \\- %s\n", esc(name), esc(c.Short))

	b.WriteString(".SH SYNOPSIS\n")
	use := strings.TrimPrefix(c.UseLine(), c.CommandPath())
	if c.HasAvailableSubCommands() && !strings.Contains(c.Use, " ") {
		use = " [COMMAND] [flags]" // gpusplit alone prints its help
	}
	fmt.Fprintf(&b, "\\fB%s\\fR%s\n", esc(c.CommandPath()), esc(use))

	b.WriteString(".SH DESCRIPTION\n")
	text := c.Long
	if text == "" {
		text = c.Short + "."
	}
	b.WriteString(Prose(text))

	if subs := subcommands(c); len(subs) > 0 {
		b.WriteString(".SH COMMANDS\n")
		for _, s := range subs {
			fmt.Fprintf(&b, ".TP\n\\fB%s\\fR(1)\n%s\n", esc(PageName(s)), esc(s.Short))
		}
	}
	if !c.HasParent() {
		if ts := topics(c); len(ts) > 0 {
			b.WriteString(".SH \"HELP TOPICS\"\n")
			for _, t := range ts {
				fmt.Fprintf(&b, ".TP\n\\fBgpusplit help %s\\fR\n%s\n", esc(t.Name()), esc(t.Short))
			}
		}
		for _, t := range topics(c) {
			if slices.Contains(sectionTopics, t.Name()) {
				fmt.Fprintf(&b, ".SH %s\n", quote(strings.ToUpper(t.Name())))
				b.WriteString(Prose(t.Long))
			}
		}
	}

	writeFlags(&b, "OPTIONS", c.NonInheritedFlags())
	writeFlags(&b, "GLOBAL OPTIONS", c.InheritedFlags())

	if c.Example != "" {
		b.WriteString(".SH EXAMPLES\n.nf\n")
		for _, l := range dedent(strings.Split(strings.TrimRight(c.Example, "\n"), "\n")) {
			b.WriteString(line(l))
		}
		b.WriteString(".fi\n")
	}

	b.WriteString(".SH EXIT STATUS\n")
	if !c.HasParent() {
		b.WriteString("A status means the same in every command that can end with it.\n")
		last := -1
		for _, e := range sortedStatuses() {
			if e.Code != last {
				fmt.Fprintf(&b, ".TP\n.B %d\n", e.Code)
				last = e.Code
			} else {
				b.WriteString(".br\n")
			}
			who := "Every command"
			if e.Command != "" {
				who = `\fB` + esc(e.Command) + `\fR`
			}
			fmt.Fprintf(&b, "%s: %s.\n", who, esc(e.Meaning))
		}
	} else {
		for _, e := range cli.ExitStatusesOf(c.CommandPath()) {
			fmt.Fprintf(&b, ".TP\n.B %d\n%s.\n", e.Code, esc(capitalise(e.Meaning)))
		}
	}

	b.WriteString(".SH FILES\n")
	if !c.HasParent() {
		writeAllFiles(&b, c)
	} else {
		b.WriteString("Paths are as the host sees them: under \\-\\-root when it names a directory or snapshot.\n")
		for _, f := range Files(c) {
			fmt.Fprintf(&b, ".TP\n.I %s\n%s\n", quote(f.Path), esc(f.Use))
		}
	}

	b.WriteString(".SH SEE ALSO\n")
	var see []string
	if c.HasParent() {
		see = append(see, `\fB`+esc(PageName(c.Parent()))+`\fR(1)`)
	}
	for _, s := range subcommands(c) {
		see = append(see, `\fB`+esc(PageName(s))+`\fR(1)`)
	}
	if !c.HasParent() {
		see = append(see, `\fBgpusplit\-cuda\fR(1)`)
	}
	b.WriteString(strings.Join(see, ", ") + "\n")
	return b.String()
}

// CUDAPage is the page of gpusplit-cuda, the CUDA build, which has no command of its own.
func CUDAPage(m Meta) string {
	var b strings.Builder
	b.WriteString(header("gpusplit-cuda", m))
	b.WriteString(".SH NAME\ngpusplit\\-cuda \\- gpusplit built with the CUDA driver binding, for gpusplit p2p\n")
	b.WriteString(".SH SYNOPSIS\n\\fBgpusplit\\-cuda\\fR COMMAND [flags]\n")
	b.WriteString(".SH DESCRIPTION\n")
	b.WriteString(Prose(`gpusplit-cuda has the commands, flags and exit statuses of gpusplit. It differs in one
way: it loads the NVIDIA driver's CUDA library, libcuda.so.1, at run time, which the
static gpusplit cannot. gpusplit p2p hands over to it when it is installed beside
gpusplit or on the PATH; there is no need to run it by hand.

Without libcuda.so.1 (no NVIDIA driver, or one installed without its CUDA library),
gpusplit-cuda p2p exits 4, and every other command works as in gpusplit.`))
	b.WriteString(".SH FILES\n.TP\n.I libcuda.so.1\nThe CUDA driver library, found by the dynamic loader (the NVIDIA driver installs it, as a Debian package or from NVIDIA's installer).\n")
	b.WriteString(".SH SEE ALSO\n\\fBgpusplit\\fR(1), \\fBgpusplit\\-p2p\\fR(1)\n")
	return b.String()
}

// sortedStatuses is the whole table by code, the general meaning of each code first.
func sortedStatuses() []cli.ExitStatus {
	out := slices.Clone(cli.ExitStatuses)
	slices.SortStableFunc(out, func(a, b cli.ExitStatus) int {
		if a.Code != b.Code {
			return a.Code - b.Code
		}
		return strings.Compare(a.Command, b.Command)
	})
	return out
}

func subcommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range c.Commands() {
		if documented(s) {
			out = append(out, s)
		}
	}
	return out
}

// writeAllFiles lists every file any command uses, once, with the pages that say what
// each does with it; files used by the same commands share an entry.
func writeAllFiles(b *strings.Builder, root *cobra.Command) {
	b.WriteString("Paths are as the host sees them: under \\-\\-root when it names a directory or snapshot. Each command's page says what it does with them.\n")
	var paths []string
	users := map[string][]string{}
	for _, c := range Commands(root)[1:] {
		if c.HasAvailableSubCommands() && !c.Runnable() {
			continue // its subcommands say it
		}
		for _, f := range Files(c) {
			if _, ok := users[f.Path]; !ok {
				paths = append(paths, f.Path)
			}
			if u := users[f.Path]; len(u) == 0 || u[len(u)-1] != PageName(c) {
				users[f.Path] = append(u, PageName(c))
			}
		}
	}
	var keys []string
	group := map[string][]string{}
	for _, p := range paths {
		k := strings.Join(users[p], ", ")
		if _, ok := group[k]; !ok {
			keys = append(keys, k)
		}
		group[k] = append(group[k], p)
	}
	for _, k := range keys {
		for i, p := range group[k] {
			req := ".TQ"
			if i == 0 {
				req = ".TP"
			}
			fmt.Fprintf(b, "%s\n.I %s\n", req, quote(p))
		}
		var refs []string
		for _, u := range strings.Split(k, ", ") {
			refs = append(refs, `\fB`+esc(u)+`\fR(1)`)
		}
		b.WriteString(strings.Join(refs, ", ") + "\n")
	}
}

func writeFlags(b *strings.Builder, title string, fs *pflag.FlagSet) {
	var flags []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			flags = append(flags, f)
		}
	})
	if len(flags) == 0 {
		return
	}
	fmt.Fprintf(b, ".SH %s\n", quote(title))
	for _, f := range flags {
		varname, usage := pflag.UnquoteUsage(f)
		head := `\fB\-\-` + esc(f.Name) + `\fR`
		if f.Shorthand != "" {
			head = `\fB\-` + esc(f.Shorthand) + `\fR, ` + head
		}
		if varname != "" {
			head += ` \fI` + esc(varname) + `\fR`
		}
		if !zeroDefault(f) {
			usage += fmt.Sprintf(" (default %s)", defaultText(f))
		}
		fmt.Fprintf(b, ".TP\n%s\n%s\n", head, esc(usage))
	}
}

// zeroDefault reports whether the flag's default is its type's zero, which --help leaves
// unsaid too.
func zeroDefault(f *pflag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "[]", "<nil>", "0s":
		return true
	}
	return false
}

func defaultText(f *pflag.Flag) string {
	if f.Value.Type() == "string" {
		return fmt.Sprintf("%q", f.DefValue)
	}
	return f.DefValue
}

var (
	bullet   = lazyre.New(`^(-|\*|[0-9]+\.) +`)
	twoSpace = lazyre.New(`^(\S.*?) {2,}(\S.*)$`)
)

// Prose turns a help text into roff. The help texts are plain text wrapped by hand:
// paragraphs between blank lines, each of lines at the left margin (filled by roff) and
// indented lines, which are lists: "- item" or "1. item" (a bullet list), "term  text"
// with two spaces or more between (a tagged list), or else lines to keep as they are
// (commands, layouts). A line indented deeper than the item it follows continues it.
func Prose(text string) string {
	var b strings.Builder
	for i, para := range paragraphs(text) {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		afterList := false
		for j := 0; j < len(para); {
			if indent(para[j]) == 0 {
				if afterList {
					b.WriteString(".PP\n")
					afterList = false
				}
				for ; j < len(para) && indent(para[j]) == 0; j++ {
					b.WriteString(line(para[j]))
				}
				continue
			}
			k := j
			for k < len(para) && indent(para[k]) > 0 {
				k++
			}
			writeIndented(&b, para[j:k])
			afterList = true
			j = k
		}
	}
	return b.String()
}

// writeIndented renders a run of indented lines as list items, or as they are.
func writeIndented(b *strings.Builder, lines []string) {
	base := indent(lines[0])
	type item struct{ head, body string }
	var items []item
	for _, l := range lines {
		if indent(l) > base && len(items) > 0 {
			items[len(items)-1].body += " " + strings.TrimSpace(l)
			continue
		}
		if indent(l) < base {
			base = indent(l)
		}
		items = append(items, item{body: strings.TrimSpace(l)})
	}
	kept := false
	for i := range items {
		it := &items[i]
		if m := bullet.FindStringSubmatch(it.body); m != nil {
			it.head, it.body = m[1], strings.TrimPrefix(it.body, m[0])
			if it.head == "-" || it.head == "*" {
				it.head = `\(bu`
			}
			continue
		}
		if m := twoSpace.FindStringSubmatch(it.body); m != nil {
			it.head, it.body = "term:"+m[1], m[2]
			continue
		}
		kept = true
	}
	if kept {
		// Not a list: lines that mean their layout, such as commands.
		b.WriteString(".PP\n.RS 4\n.nf\n")
		for _, l := range dedent(lines) {
			b.WriteString(line(l))
		}
		b.WriteString(".fi\n.RE\n")
		return
	}
	for _, it := range items {
		if term, ok := strings.CutPrefix(it.head, "term:"); ok {
			fmt.Fprintf(b, ".TP\n%s\n%s\n", line1(term), esc(it.body))
		} else {
			head := `"\(bu"` // a bullet, already roff
			if it.head != `\(bu` {
				head = quote(it.head)
			}
			fmt.Fprintf(b, ".IP %s 4\n%s\n", head, esc(it.body))
		}
	}
}

func paragraphs(text string) [][]string {
	var out [][]string
	var cur []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, strings.ReplaceAll(l, "\t", "        "))
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

func dedent(lines []string) []string {
	least := -1
	for _, l := range lines {
		if strings.TrimSpace(l) != "" && (least < 0 || indent(l) < least) {
			least = indent(l)
		}
	}
	out := slices.Clone(lines)
	for i, l := range out {
		if len(l) >= least && least > 0 {
			out[i] = l[least:]
		}
	}
	return out
}

// esc escapes text for roff: a backslash is \e, and every - is a minus sign (\-), so that
// options and commands copied from the page work.
func esc(s string) string {
	return strings.NewReplacer(`\`, `\e`, `-`, `\-`).Replace(s)
}

// line is one text line, escaped, with a final newline; a line that begins with . or '
// would be a request to roff, and \& in front keeps it text.
func line(s string) string { return line1(s) + "\n" }

func line1(s string) string {
	s = esc(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// quote makes s one argument of a roff request.
func quote(s string) string { return `"` + strings.ReplaceAll(esc(s), `"`, `\(dq`) + `"` }

func capitalise(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
