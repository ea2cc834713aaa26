package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// commandsOf walks the tree as the man pages do: every command but help topics and
// cobra's help and completion.
func commandsOf(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		if c.IsAdditionalHelpTopicCommand() || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		out = append(out, commandsOf(c)...)
	}
	return out
}

// Every command has its exit statuses in the manual, and the manual names no command
// that is gone: a command added without them fails here, not in a man page that
// silently says nothing. (Its files are held so by internal/cmd/manpages' test.)
func TestManualCoversEveryCommand(t *testing.T) {
	paths := map[string]bool{}
	for _, c := range commandsOf(New(io.Discard, io.Discard)) {
		p := c.CommandPath()
		paths[p] = true
		var codes []int
		for _, e := range ExitStatusesOf(p) {
			codes = append(codes, e.Code)
		}
		if !slices.Contains(codes, 0) || !slices.Contains(codes, 1) {
			t.Errorf("%s: exit statuses %v, want 0 and 1 among them", p, codes)
		}
	}
	seen := map[[2]string]bool{}
	for _, e := range ExitStatuses {
		if e.Command != "" && !paths[e.Command] {
			t.Errorf("exit status %d is for %q, which is no command", e.Code, e.Command)
		}
		k := [2]string{e.Command, string(rune('0' + e.Code))}
		if seen[k] {
			t.Errorf("exit status %d of %q has two meanings", e.Code, e.Command)
		}
		seen[k] = true
	}
}

func TestExitStatusesOf(t *testing.T) {
	for _, tc := range []struct {
		path string
		want map[int]string // code: a word of its meaning
	}{
		{"gpusplit topo", map[int]string{0: "did what was asked", 1: "bad input"}},
		{"gpusplit pve sync", map[int]string{0: "did what was asked", 1: "refusal"}},
		{"gpusplit status", map[int]string{0: "in sync", 1: "bad input", 3: "drift"}},
		{"gpusplit doctor", map[int]string{0: "no finding", 1: "warnings", 2: "errors"}},
		{"gpusplit p2p", map[int]string{0: "intact", 1: "bad input", 2: "wrong bytes", 4: "CUDA"}},
	} {
		got := ExitStatusesOf(tc.path)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want codes %v", tc.path, got, tc.want)
			continue
		}
		for i, e := range got {
			if i > 0 && got[i-1].Code >= e.Code {
				t.Errorf("%s: %v is not in order of code", tc.path, got)
			}
			if w, ok := tc.want[e.Code]; !ok || !strings.Contains(e.Meaning, w) {
				t.Errorf("%s: %d means %q, want it to say %q", tc.path, e.Code, e.Meaning, w)
			}
		}
	}
}

// The README's table is the one in the code.
func TestREADMEExitStatusTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := ExitStatusMarkdown(); !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not have the exit status table of manual.go; put this in its place:\n%s", want)
	}
}

func TestExitStatusTopic(t *testing.T) {
	out := strings.Join(strings.Fields(mustRun(t, "help", "exit-status")), " ")
	for _, e := range ExitStatuses {
		if !strings.Contains(out, e.Meaning) {
			t.Errorf("gpusplit help exit-status does not say %q:\n%s", e.Meaning, out)
		}
	}
}

// ExitStatusMarkdown is the table of exit statuses as the README shows it.
func ExitStatusMarkdown() string {
	var b strings.Builder
	b.WriteString("| status | command | meaning |\n|---|---|---|\n")
	rows := slices.Clone(ExitStatuses)
	slices.SortStableFunc(rows, func(a, b ExitStatus) int { return a.Code - b.Code })
	for _, e := range rows {
		who := "every command"
		if e.Command != "" {
			who = "`" + strings.TrimPrefix(e.Command, "gpusplit ") + "`"
		}
		fmt.Fprintf(&b, "| %d | %s | %s |\n", e.Code, who, e.Meaning)
	}
	return b.String()
}
