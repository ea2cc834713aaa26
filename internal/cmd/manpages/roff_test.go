package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/cli"
	"github.com/gpusplit/gpusplit/internal/persist"
)

func TestProse(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"paragraphs", "one line\nand its next\n\na second", "one line\nand its next\n.PP\na second\n"},
		{"escapes", "--root a\\b\n.starts with a dot\n'and a quote", "\\-\\-root a\\eb\n\\&.starts with a dot\n\\&'and a quote\n"},
		{"bullets", "Three:\n  - one\n    goes on\n  - two", "Three:\n.IP \"\\(bu\" 4\none goes on\n.IP \"\\(bu\" 4\ntwo\n"},
		{"numbered", "  1. first\n     more\n  2. second", ".IP \"1.\" 4\nfirst more\n.IP \"2.\" 4\nsecond\n"},
		{"terms", "  numa:1      the devices on node 1\n  count:4     any 4, packed\n              onto few nodes", ".TP\nnuma:1\nthe devices on node 1\n.TP\ncount:4\nany 4, packed onto few nodes\n"},
		{"kept lines", "Run:\n  gpusplit --demo topo\n    export X=1", "Run:\n.PP\n.RS 4\n.nf\ngpusplit \\-\\-demo topo\n  export X=1\n.fi\n.RE\n"},
		{"text after a list", "  - a\nthen text", ".IP \"\\(bu\" 4\na\n.PP\nthen text\n"},
		{"tabs and trailing space", "a  \n\tb", "a\n.PP\n.RS 4\n.nf\nb\n.fi\n.RE\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Prose(tc.in); got != tc.want {
				t.Errorf("Prose(%q) =\n%s\nwant\n%s", tc.in, got, tc.want)
			}
		})
	}
}

// requests are the roff requests the pages may use; any other line that begins with a
// dot is text that escaped escaping.
var requests = regexp.MustCompile(`^\.(TH|SH|TP|TQ|IP|PP|RS|RE|nf|fi|B|I|br|nh|ad)( |$)`)

func TestPages(t *testing.T) {
	root := cli.New(io.Discard, io.Discard)
	m := Meta{Date: "2026-01-02", Version: "1.2~git"}
	cmds := Commands(root)
	names := map[string]bool{}
	for _, c := range cmds {
		names[PageName(c)] = true
	}
	for _, must := range []string{"gpusplit", "gpusplit-topo", "gpusplit-pve-sync", "gpusplit-persist-install", "gpusplit-pve"} {
		if !names[must] {
			t.Errorf("no page %s among %v", must, names)
		}
	}
	for _, bad := range []string{"gpusplit-help", "gpusplit-completion", "gpusplit-selectors", "gpusplit-exit-status"} {
		if names[bad] {
			t.Errorf("page %s: help topics and cobra's commands get none", bad)
		}
	}
	pages := map[string]string{"gpusplit-cuda": CUDAPage(m)}
	for _, c := range cmds {
		pages[PageName(c)] = Page(c, m)
	}
	for name, p := range pages {
		title := `.TH "` + strings.ToUpper(esc(name)) + `" 1 "2026-01-02" "gpusplit 1.2~git" "gpusplit manual"` + "\n"
		if !strings.HasPrefix(p, title) {
			t.Errorf("%s: begins %q, want %q", name, p[:min(len(p), 80)], title)
		}
		sections := regexp.MustCompile(`(?m)^\.SH "?([A-Z ]+)"?$`).FindAllStringSubmatch(p, -1)
		var got []string
		for _, s := range sections {
			got = append(got, s[1])
		}
		for _, want := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "FILES", "SEE ALSO"} {
			if !strings.Contains(" "+strings.Join(got, " , ")+" ", " "+want+" ") {
				t.Errorf("%s: sections %v lack %s", name, got, want)
			}
		}
		if name != "gpusplit-cuda" && !regexp.MustCompile(`\n\.SH EXIT STATUS\n(.*\n)?\.TP\n\.B 0\n`).MatchString(p) {
			t.Errorf("%s: no EXIT STATUS section with entries", name)
		}
		if !strings.Contains(p, "\n.SH NAME\n"+esc(name)+` \- `) {
			t.Errorf("%s: the NAME line is not %q followed by \\- and a description", name, esc(name))
		}
		for i, l := range strings.Split(p, "\n") {
			if strings.HasPrefix(l, ".") && !requests.MatchString(l) || strings.HasPrefix(l, "'") {
				t.Errorf("%s:%d: %q would be read as a request", name, i+1, l)
			}
			if !strings.HasPrefix(l, ".TH ") && regexp.MustCompile(`(^|[^\\])-`).MatchString(l) {
				t.Errorf("%s:%d: %q has a - that is not \\-", name, i+1, l)
			}
		}
	}

	// Each page says what its command's table says, and only that.
	for _, tc := range []struct {
		page     string
		has, not []string
	}{
		{"gpusplit-topo", []string{".B 0\n", ".B 1\n", ".I \"/sys/bus/pci/devices/*\"", "\\fBgpusplit\\fR(1)"}, []string{".B 3\n", "journal"}},
		{"gpusplit-status", []string{".B 3\nDrift", ".B 0\nIn sync"}, []string{".B 2\n"}},
		{"gpusplit-doctor", []string{".B 1\nWarnings", ".B 2\nErrors", ".I \"/dev/kmsg\""}, []string{".B 3\n"}},
		{"gpusplit-p2p", []string{".B 2\n", ".B 4\n"}, []string{".B 3\n"}},
		{"gpusplit-apply", []string{esc(bind.JournalPath), esc(bind.LockPath), `\fB\-\-dry\-run\fR`}, nil},
		{"gpusplit-persist-install", []string{esc(persist.DefaultBinary), esc(persist.Unit)}, nil},
		{"gpusplit-pve", []string{".SH COMMANDS", "\\fBgpusplit\\-pve\\-sync\\fR(1)", ".SH SYNOPSIS\n\\fBgpusplit pve\\fR "}, nil},
		{"gpusplit", []string{".SH \"SELECTORS\"", ".SH \"HELP TOPICS\"", "\\fBgpusplit help exit\\-status\\fR", "\\fBgpusplit\\-topo\\fR(1)", ".B 4\n", "\\fBgpusplit\\-cuda\\fR(1)", `\fB\-v\fR, \fB\-\-verbose\fR`, `\fB\-\-version\fR`, ".TQ\n"}, []string{"EXIT\\-STATUS"}},
	} {
		p := pages[tc.page]
		for _, s := range tc.has {
			if !strings.Contains(p, s) {
				t.Errorf("%s lacks %q", tc.page, s)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(p, s) {
				t.Errorf("%s has %q", tc.page, s)
			}
		}
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1764547200") // 2025-12-01
	n, err := write(dir, "9.9", "")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	if want := len(Commands(cli.New(io.Discard, io.Discard))) + 1; n != want || len(files) != want {
		t.Errorf("wrote %d pages, %d files; want %d", n, len(files), want)
	}
	b, err := os.ReadFile(filepath.Join(dir, "gpusplit-topo.1"))
	if err != nil || !strings.HasPrefix(string(b), `.TH "GPUSPLIT\-TOPO" 1 "2025-12-01" "gpusplit 9.9"`) {
		t.Errorf("gpusplit-topo.1: %v\n%.80s", err, b)
	}
	if _, err := write(dir, "9.9", "1 Dec 2025"); err == nil || !strings.Contains(err.Error(), "YYYY-MM-DD") {
		t.Errorf("a bad -date: %v", err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := write(dir, "9.9", ""); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("a bad SOURCE_DATE_EPOCH: %v", err)
	}
}

// Every command with a page has its files in files.go, each with a sentence, and files.go names no
// command that is gone: a command added without them fails here, not in a man page
// that silently says nothing.
func TestFilesCoverEveryCommand(t *testing.T) {
	paths := map[string]bool{}
	for _, c := range Commands(cli.New(io.Discard, io.Discard)) {
		p := c.CommandPath()
		paths[p] = true
		if _, ok := commandFiles()[p]; !c.HasSubCommands() && !ok {
			t.Errorf("%s has no files in files.go's commandFiles: say what it reads and writes", p)
		}
		fs := Files(c)
		if len(fs) == 0 && c.HasParent() {
			t.Errorf("%s: no files", p)
		}
		for _, f := range fs {
			if f.Path == "" || !strings.HasSuffix(f.Use, ".") || len(f.Use) < 10 {
				t.Errorf("%s: file %q: %q is not a sentence saying what the command does with it", p, f.Path, f.Use)
			}
		}
	}
	for p := range commandFiles() {
		if !paths[p] {
			t.Errorf("files.go has files for %q, which is no command", p)
		}
	}
}
