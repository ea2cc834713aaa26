//go:build ignore

// Mutants runs the hand-written mutation pass: it reads a list of mutants (a file, an
// exact piece of its text, the text that replaces it, the package whose tests must
// notice, and the bug it stands for), applies each one in turn to a private copy of the
// tree, runs that package's tests there, records whether they failed (killed) or passed
// (survived), and puts the file back. The checkout it is run from is never written to.
//
//	./scripts/mutants                      every mutant of scripts/mutants.txt
//	./scripts/mutants -run 'bind|plan'     those whose id matches a regular expression
//	./scripts/mutants -list                check the list and print it, running nothing
//	./scripts/mutants -rev HEAD            copy a commit instead of the working tree
//
// The list's format (scripts/mutants.txt says it again at its top):
//
//	=== bind/verify-removed
//	file: internal/bind/apply.go
//	package: ./internal/bind
//	bug: a bind is not verified, so a probe that binds nothing passes
//	equivalent: (only for a mutant that cannot change behaviour: why)
//	--- original
//	<the exact text, one or more lines>
//	+++ mutant
//	<the text that replaces it>
//
// The original must occur exactly once in its file, or the run stops before any test
// runs. The exit status is 0 when every mutant is killed but those marked equivalent,
// which must survive; 1 otherwise; 2 for a list or tree that cannot be used.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

type mutant struct {
	ID, File, Package, Bug, Equivalent string
	Original, Mutant                   string
	Line                               int // in the list
	FileLine                           int // of the original in its file
}

type result struct {
	m       *mutant
	outcome string // killed, survived, does not build, timed out
	elapsed time.Duration
	detail  string // the first failing test, or the build error
}

func main() {
	list := flag.String("list-file", "scripts/mutants.txt", "the list of mutants")
	run := flag.String("run", "", "run only the mutants whose id matches this regular expression")
	listOnly := flag.Bool("list", false, "check the list and print it; run nothing")
	rev := flag.String("rev", "", "copy this commit (git archive) instead of the working tree")
	timeout := flag.Duration("timeout", 20*time.Minute, "go test -timeout for one package run")
	keep := flag.Bool("keep", false, "keep the private copy of the tree")
	out := flag.String("o", "", "also write the results, tab-separated, to this file")
	flag.Parse()

	root, err := gitOutput(".", "rev-parse", "--show-toplevel")
	if err != nil {
		fatal(2, "not in a git checkout: %v", err)
	}
	listPath := *list
	if !filepath.IsAbs(listPath) {
		listPath = filepath.Join(root, listPath)
	}
	mutants, err := parse(listPath)
	if err != nil {
		fatal(2, "%v", err)
	}
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			fatal(2, "-run: %v", err)
		}
		var some []*mutant
		for _, m := range mutants {
			if re.MatchString(m.ID) {
				some = append(some, m)
			}
		}
		mutants = some
	}
	if len(mutants) == 0 {
		fatal(2, "no mutant to run")
	}

	tree, err := os.MkdirTemp("", "gpusplit-mutants-")
	if err != nil {
		fatal(2, "%v", err)
	}
	cleanup := func() {
		if *keep {
			fmt.Fprintf(os.Stderr, "mutants: the private copy is kept in %s\n", tree)
			return
		}
		os.RemoveAll(tree)
	}
	if err := copyTree(root, tree, *rev); err != nil {
		cleanup()
		fatal(2, "copying the tree: %v", err)
	}
	if problems := check(tree, mutants); len(problems) > 0 {
		cleanup()
		fatal(2, "the list cannot be used as it is:\n  %s", strings.Join(problems, "\n  "))
	}
	if *listOnly {
		for _, m := range mutants {
			eq := ""
			if m.Equivalent != "" {
				eq = " [equivalent]"
			}
			fmt.Printf("%-34s %s:%d%s\n    %s\n", m.ID, m.File, m.FileLine, eq, m.Bug)
		}
		fmt.Printf("%d mutants, each original found exactly once\n", len(mutants))
		cleanup()
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// The tests must pass on the unmutated copy, or a failure says nothing of a mutant.
	seen := map[string]bool{}
	for _, m := range mutants {
		if seen[m.Package] {
			continue
		}
		seen[m.Package] = true
		start := time.Now()
		ok, _, output := goTest(ctx, tree, m.Package, *timeout)
		if ctx.Err() != nil {
			cleanup()
			fatal(2, "interrupted")
		}
		if !ok {
			cleanup()
			fatal(2, "the tests of %s fail without any mutant; fix that first:\n%s", m.Package, tail(output, 40))
		}
		fmt.Printf("baseline %-22s ok %5.0fs\n", m.Package, time.Since(start).Seconds())
	}

	var results []result
	for i, m := range mutants {
		r := apply(ctx, tree, m, *timeout)
		if ctx.Err() != nil {
			cleanup()
			fatal(2, "interrupted")
		}
		results = append(results, r)
		fmt.Printf("[%d/%d] %-34s %-14s %5.0fs  %s\n", i+1, len(mutants), m.ID, r.outcome, r.elapsed.Seconds(), r.detail)
	}
	cleanup()

	killed, equivalent, bad := 0, 0, 0
	var survivors, wrong []string
	for _, r := range results {
		switch {
		case r.outcome == "killed" || r.outcome == "timed out":
			killed++
			if r.m.Equivalent != "" {
				wrong = append(wrong, fmt.Sprintf("%s is marked equivalent but was killed (%s): it is not equivalent", r.m.ID, r.detail))
			}
		case r.outcome == "survived" && r.m.Equivalent != "":
			equivalent++
		case r.outcome == "survived":
			survivors = append(survivors, fmt.Sprintf("%s (%s:%d): %s", r.m.ID, r.m.File, r.m.FileLine, r.m.Bug))
		default:
			bad++
			wrong = append(wrong, fmt.Sprintf("%s %s: %s", r.m.ID, r.outcome, r.detail))
		}
	}
	fmt.Printf("\n%d mutants: %d killed, %d survived as equivalent, %d survived, %d did not build\n",
		len(results), killed, equivalent, len(survivors), bad)
	if n := len(results) - equivalent; n > 0 {
		fmt.Printf("score: %d of %d non-equivalent mutants killed\n", killed, n)
	}
	for _, s := range survivors {
		fmt.Println("SURVIVED " + s)
	}
	for _, w := range wrong {
		fmt.Println("WRONG    " + w)
	}
	if *out != "" {
		var b strings.Builder
		b.WriteString("id\tfile\tline\tpackage\toutcome\tseconds\tequivalent\n")
		for _, r := range results {
			fmt.Fprintf(&b, "%s\t%s\t%d\t%s\t%s\t%.0f\t%t\n", r.m.ID, r.m.File, r.m.FileLine, r.m.Package, r.outcome, r.elapsed.Seconds(), r.m.Equivalent != "")
		}
		if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
			fatal(2, "%v", err)
		}
	}
	if len(survivors) > 0 || len(wrong) > 0 {
		os.Exit(1)
	}
}

// parse reads the list.
func parse(name string) ([]*mutant, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var out []*mutant
	var cur *mutant
	var block *[]string
	var orig, mut []string
	ids := map[string]int{}
	finish := func() error {
		if cur == nil {
			return nil
		}
		orig, mut = trimBlank(orig), trimBlank(mut)
		for _, b := range [][]string{orig, mut} {
			// A comment meant to stand between mutants would end up in the block.
			if len(b) > 0 && strings.HasPrefix(b[len(b)-1], "#") {
				return fmt.Errorf("%s:%d: mutant %s ends in a line starting with #: comments go before the first mutant or in a mutant's header", name, cur.Line, cur.ID)
			}
		}
		cur.Original = strings.Join(orig, "\n")
		cur.Mutant = strings.Join(mut, "\n")
		var missing []string
		for _, f := range []struct{ name, v string }{{"file", cur.File}, {"package", cur.Package}, {"bug", cur.Bug}, {"--- original", cur.Original}} {
			if f.v == "" {
				missing = append(missing, f.name)
			}
		}
		if block != &mut {
			missing = append(missing, "+++ mutant")
		}
		if len(missing) > 0 {
			return fmt.Errorf("%s:%d: mutant %s has no %s", name, cur.Line, cur.ID, strings.Join(missing, ", "))
		}
		if cur.Original == cur.Mutant {
			return fmt.Errorf("%s:%d: mutant %s changes nothing", name, cur.Line, cur.ID)
		}
		out = append(out, cur)
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "=== "); ok {
			if err := finish(); err != nil {
				return nil, err
			}
			id = strings.TrimSpace(id)
			if prev, ok := ids[id]; ok {
				return nil, fmt.Errorf("%s:%d: mutant id %s is used already on line %d", name, n, id, prev)
			}
			ids[id] = n
			cur, block, orig, mut = &mutant{ID: id, Line: n}, nil, nil, nil
			continue
		}
		switch {
		case block != nil:
			if line == "+++ mutant" && block == &orig {
				block = &mut
				continue
			}
			*block = append(*block, line)
		case cur == nil:
			if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
				return nil, fmt.Errorf("%s:%d: text before the first mutant that is not a # comment", name, n)
			}
		case line == "--- original":
			block = &orig
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
		default:
			k, v, ok := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k = strings.TrimSpace(k); {
			case !ok:
				return nil, fmt.Errorf("%s:%d: %q is not a key: value line", name, n, line)
			case k == "file":
				cur.File = v
			case k == "package":
				cur.Package = v
			case k == "bug":
				cur.Bug = v
			case k == "equivalent":
				cur.Equivalent = v
			default:
				return nil, fmt.Errorf("%s:%d: unknown key %q (file, package, bug, equivalent)", name, n, k)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// check finds, for every mutant, its original exactly once in its file of the copy.
func check(tree string, mutants []*mutant) []string {
	var problems []string
	for _, m := range mutants {
		if !strings.HasPrefix(m.Package, "./internal/") || strings.Contains(m.Package, "...") {
			problems = append(problems, fmt.Sprintf("%s: package %s is not one package under ./internal/", m.ID, m.Package))
		}
		data, err := os.ReadFile(filepath.Join(tree, m.File))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", m.ID, err))
			continue
		}
		switch n := strings.Count(string(data), m.Original); n {
		case 1:
			i := strings.Index(string(data), m.Original)
			m.FileLine = 1 + strings.Count(string(data[:i]), "\n")
		case 0:
			problems = append(problems, fmt.Sprintf("%s: the original text is not in %s (changed since the list was written?)", m.ID, m.File))
		default:
			problems = append(problems, fmt.Sprintf("%s: the original text occurs %d times in %s; make it longer so that it names one place", m.ID, n, m.File))
		}
	}
	return problems
}

// apply runs one mutant: write it, test, put the file back.
func apply(ctx context.Context, tree string, m *mutant, timeout time.Duration) result {
	path := filepath.Join(tree, m.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		fatal(2, "%v", err)
	}
	mutated := strings.Replace(string(orig), m.Original, m.Mutant, 1)
	if err := os.WriteFile(path, []byte(mutated), 0o644); err != nil {
		fatal(2, "%v", err)
	}
	defer func() {
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			fatal(2, "putting %s back: %v", m.File, err)
		}
		if back, err := os.ReadFile(path); err != nil || !bytes.Equal(back, orig) {
			fatal(2, "%s was not put back as it was", m.File)
		}
	}()
	start := time.Now()
	ok, timedOut, output := goTest(ctx, tree, m.Package, timeout)
	r := result{m: m, elapsed: time.Since(start)}
	switch {
	case ok:
		r.outcome = "survived"
	case strings.Contains(output, "[build failed]") || strings.Contains(output, "[setup failed]"):
		r.outcome, r.detail = "does not build", firstLine(output, func(l string) bool { return strings.Contains(l, ".go:") })
	case timedOut:
		r.outcome, r.detail = "timed out", "the tests did not finish"
	default:
		r.outcome, r.detail = "killed", firstLine(output, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "--- FAIL") })
	}
	return r
}

// goTest runs a package's tests in the copy, failing fast.
func goTest(ctx context.Context, tree, pkg string, timeout time.Duration) (ok, timedOut bool, output string) {
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-failfast", "-timeout", timeout.String(), pkg)
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	b, err := cmd.CombinedOutput()
	output = string(b)
	if err == nil {
		return true, false, output
	}
	timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded) || strings.Contains(output, "panic: test timed out")
	return false, timedOut, output
}

// copyTree copies the working tree's files that git knows or does not ignore, or a
// commit's, into dst.
func copyTree(root, dst, rev string) error {
	if rev != "" {
		archive := exec.Command("git", "-C", root, "archive", "--format=tar", rev)
		untar := exec.Command("tar", "-x", "-C", dst)
		pipe, err := archive.StdoutPipe()
		if err != nil {
			return err
		}
		untar.Stdin = pipe
		if err := untar.Start(); err != nil {
			return err
		}
		if err := archive.Run(); err != nil {
			return fmt.Errorf("git archive %s: %w", rev, err)
		}
		return untar.Wait()
	}
	names, err := gitOutput(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return err
	}
	for _, name := range strings.Split(names, "\x00") {
		if name == "" {
			continue
		}
		src := filepath.Join(root, name)
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, data, fi.Mode().Perm()); err != nil {
				return err
			}
		}
	}
	return nil
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	b, err := cmd.Output()
	return strings.TrimRight(string(b), "\n"), err
}

func firstLine(s string, want func(string) bool) string {
	for _, l := range strings.Split(s, "\n") {
		if want(l) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func fatal(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mutants: "+format+"\n", args...)
	os.Exit(code)
}
