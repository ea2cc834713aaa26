package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/testutils/p2ptest"
)

// The command-line contract (contract.go; docs/json.md), checked on every command of
// the tree. The commands are found by walking the tree, so one added later is checked
// too: it fails here until contractCases (or withoutJSON) says how to run it.

// contractCase is one outcome of a command, run with -o json.
type contractCase struct {
	name string
	// args are what follows the command's path; they may prepare a fixture first.
	args func(t *testing.T, f *fixtures) []string
	// code is the exit status the outcome ends with.
	code int
	// doc: a JSON document comes with this non-zero status, a result the command
	// reached (drift, a dry run that found what would stop the real run); without it, a
	// non-zero status leaves standard output empty.
	doc bool
}

func fixed(args ...string) func(*testing.T, *fixtures) []string {
	return func(*testing.T, *fixtures) []string { return args }
}

// onScratch is fixed for a run under --demo that makes the demo's scratch copy (a dry
// run of a command that writes): it gets a copy of its own.
func onScratch(args ...string) func(*testing.T, *fixtures) []string {
	return func(t *testing.T, _ *fixtures) []string {
		freshDemo(t)
		return args
	}
}

// contractCases are, by command path, the outcomes each command is run to: its work done,
// "nothing to do", and the refusals and errors that have (or have no) document.
var contractCases = map[string][]contractCase{
	"gpusplit inventory": {{name: "sample host", args: fixed("--demo")}},
	"gpusplit topo":      {{name: "sample host", args: fixed("--demo")}},
	"gpusplit plan": {
		{name: "moves", args: fixed("--demo", "--vfio", "numa:1")},
		{name: "nothing to do", args: func(t *testing.T, f *fixtures) []string { return []string{"--demo", "--config", f.inSync(t)} }},
		{name: "a selector that matches nothing", args: fixed("--demo", "--vfio", "0000:ee:00.0"), code: 1},
	},
	"gpusplit apply": {
		{name: "dry run, held GPUs", args: func(t *testing.T, f *fixtures) []string {
			freshDemo(t)
			f.must(t, "demo", "reset", "--held")
			return []string{"--demo", "--vfio", "numa:1", "--dry-run"}
		}, code: 1, doc: true},
		{name: "moved", args: func(t *testing.T, f *fixtures) []string {
			dir := t.TempDir()
			h, err := twoGPUs().Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			newSimKernel(t, h).use(t)
			return []string{"--root", dir, "--vfio", "0000:00:03.0", "--yes"}
		}},
		{name: "nothing to do", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", f.sample(t), "--config", f.inSync(t), "--yes"}
		}},
		{name: "refused, held GPUs", args: func(t *testing.T, f *fixtures) []string {
			root := f.sample(t)
			h, err := host.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			newSimKernel(t, h).use(t)
			return []string{"--root", root, "--vfio", "numa:1", "--yes"}
		}, code: 1},
	},
	"gpusplit status": {
		{name: "drift", args: fixed("--demo", "--vfio", "numa:1"), code: ExitDrift, doc: true},
		{name: "in sync", args: func(t *testing.T, f *fixtures) []string { return []string{"--demo", "--config", f.inSync(t)} }},
	},
	"gpusplit rollback": {
		{name: "dry run", args: func(t *testing.T, f *fixtures) []string {
			dir, _ := applied(t)
			return []string{"--root", dir, "--dry-run"}
		}},
		{name: "restored", args: func(t *testing.T, f *fixtures) []string {
			dir, _ := applied(t)
			return []string{"--root", dir, "--yes"}
		}},
		{name: "nothing to roll back", args: func(t *testing.T, f *fixtures) []string {
			dir, _ := applied(t)
			if _, stderr, err := run(t, "--root", dir, "rollback", "--yes"); err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			return []string{"--root", dir, "--yes"}
		}},
		{name: "no journal", args: func(t *testing.T, f *fixtures) []string {
			freshDemo(t)
			return []string{"--demo", "--dry-run"}
		}},
	},
	"gpusplit persist show": {{name: "sample host", args: fixed("--demo", "--vfio", "numa:1")}},
	"gpusplit demo reset": {
		{name: "made", args: func(t *testing.T, f *fixtures) []string { freshDemo(t); return nil }},
		{name: "holders kept", args: func(t *testing.T, f *fixtures) []string { freshDemo(t); return []string{"--held"} }},
	},
	"gpusplit demo path": {
		{name: "none yet", args: func(t *testing.T, f *fixtures) []string { freshDemo(t); return nil }},
	},
	"gpusplit persist install": {
		{name: "dry run on a snapshot", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", sampleArchive(t), "--vfio", "numa:1", "--dry-run"}
		}, code: 1, doc: true},
		{name: "installed", args: func(t *testing.T, f *fixtures) []string {
			if os.Getuid() != 0 {
				t.Skip("needs root: the unit's binary must be root's")
			}
			root := f.sample(t)
			putBinary(t, root, persist.DefaultBinary, 0o755)
			return []string{"--root", root, "--vfio", "numa:1", "--yes"}
		}},
	},
	"gpusplit persist remove": {{name: "nothing installed", args: func(t *testing.T, f *fixtures) []string { return []string{"--root", f.sample(t), "--yes"} }}},
	"gpusplit pve mappings": {
		{name: "sample host", args: fixed("--demo")},
		{name: "no pci.cfg", args: func(t *testing.T, f *fixtures) []string {
			root := f.sample(t)
			if err := os.Remove(filepath.Join(root, "etc/pve/mapping/pci.cfg")); err != nil {
				t.Fatal(err)
			}
			return []string{"--root", root}
		}},
	},
	"gpusplit pve sync": {
		{name: "dry run", args: onScratch("--demo", "--vfio", "numa:1", "--dry-run")},
		{name: "written", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", f.sample(t), "--vfio", "numa:1", "--yes"}
		}},
		{name: "refused, a VM locked", args: func(t *testing.T, f *fixtures) []string {
			root := f.sample(t)
			edit(t, root, vm131, func(s string) string { return "lock: backup\n" + s })
			return []string{"--root", root, "--vfio", "numa:1", "--apply"}
		}, code: 1, doc: true},
		{name: "nothing to do", args: func(t *testing.T, f *fixtures) []string {
			root := f.sample(t)
			f.must(t, "--root", root, "pve", "sync", "--vfio", "numa:1", "--apply")
			return []string{"--root", root, "--vfio", "numa:1", "--yes"}
		}},
		{name: "no terminal, no --yes", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", f.sample(t), "--vfio", "numa:1"}
		}, code: 1, doc: true},
	},
	"gpusplit pve vm-layout": {
		{name: "dry run", args: onScratch("--demo", "--vm", "131", "--dry-run")},
		{name: "written", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", f.sample(t), "--vm", "131", "--apply"}
		}},
		{name: "already laid out", args: func(t *testing.T, f *fixtures) []string {
			root := f.sample(t)
			f.must(t, "--root", root, "pve", "vm-layout", "--vm", "131", "--apply")
			return []string{"--root", root, "--vm", "131", "--yes"}
		}},
		{name: "no such VM", args: onScratch("--demo", "--vm", "999", "--dry-run"), code: 1},
	},
	"gpusplit hook": {
		{name: "a phase with nothing to do", args: fixed("--demo", "131", "post-start")},
		{name: "a container whose GPUs are on nvidia", args: func(t *testing.T, f *fixtures) []string {
			freshDemo(t)
			return []string{"--demo", "129", "pre-start"}
		}},
		{name: "refused on a copy of a host", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", sampleArchive(t), "131", "pre-start"}
		}, code: 1},
	},
	"gpusplit pve hook install": {
		{name: "dry run", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", withSnippets(t, f.sample(t)), "--vm", "131", "--dry-run"}
		}},
		{name: "written", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", withSnippets(t, f.sample(t)), "--vm", "131", "--yes"}
		}},
		{name: "no storage holds snippets", args: func(t *testing.T, f *fixtures) []string {
			root := f.sample(t)
			if err := os.Remove(filepath.Join(root, "etc/pve/storage.cfg")); err != nil {
				t.Fatal(err)
			}
			return []string{"--root", root, "--vm", "131", "--dry-run"}
		}, code: 1},
	},
	"gpusplit pve hook remove": {
		{name: "nothing installed", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", withSnippets(t, f.sample(t)), "--vm", "131", "--yes"}
		}},
		{name: "installed", args: func(t *testing.T, f *fixtures) []string {
			root := withSnippets(t, f.sample(t))
			f.must(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
			return []string{"--root", root, "--vm", "131", "--apply"}
		}},
	},
	"gpusplit pve hook show": {
		{name: "none", args: fixed("--demo", "--ct", "129")},
		{name: "no such guest", args: fixed("--demo", "--vm", "999"), code: 1},
	},
	"gpusplit pve p2p-clique": {
		{name: "refused, whole-slot entries", args: onScratch("--demo", "--vm", "131", "--dry-run"), code: 1},
		{name: "dry run", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", gpuFunctionVM(t, f.sample(t)), "--vm", "140", "--dry-run"}
		}},
		{name: "written", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", gpuFunctionVM(t, f.sample(t)), "--vm", "140", "--clique", "1", "--apply"}
		}},
	},
	"gpusplit pve cluster": {
		{name: "the sample host's planted problems", args: fixed("--demo"), code: 1, doc: true},
		{name: "no problems", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--root", clusterWithoutProblems(t, f.sample(t))}
		}},
		{name: "no .members", args: func(t *testing.T, f *fixtures) []string {
			root := clusterWithoutProblems(t, f.sample(t))
			if err := os.Remove(filepath.Join(root, "etc/pve/.members")); err != nil {
				t.Fatal(err)
			}
			return []string{"--root", root}
		}},
	},
	"gpusplit pve backups": {
		{name: "none", args: fixed("--demo")},
		{name: "after a sync", args: func(t *testing.T, f *fixtures) []string {
			root := f.sample(t)
			f.must(t, "--root", root, "pve", "sync", "--vfio", "numa:1", "--apply")
			return []string{"--root", root}
		}},
	},
	"gpusplit pve backups restore": {
		{name: "dry run", args: func(t *testing.T, f *fixtures) []string {
			root, id := f.backup(t)
			return []string{"--root", root, id, "--dry-run"}
		}},
		{name: "restored", args: func(t *testing.T, f *fixtures) []string {
			root, id := f.backup(t)
			return []string{"--root", root, id, "--yes"}
		}},
		{name: "no such backup", args: func(t *testing.T, f *fixtures) []string {
			freshDemo(t)
			return []string{"--demo", "nonesuch.20260101T000000.000000000Z", "--dry-run"}
		}, code: 1},
	},
	"gpusplit pve backups prune": {{name: "after a sync", args: func(t *testing.T, f *fixtures) []string {
		root := f.sample(t)
		f.must(t, "--root", root, "pve", "sync", "--vfio", "numa:1", "--apply")
		return []string{"--root", root, "--keep", "1", "--yes"}
	}}},
	"gpusplit metrics": {
		{name: "sample host", args: fixed("--demo")},
		{name: "textfile", args: func(t *testing.T, f *fixtures) []string { return []string{"--demo", "--textfile", t.TempDir()} }},
		{name: "no such textfile directory", args: fixed("--demo", "--textfile", "/nonexistent"), code: 1},
	},
	"gpusplit doctor": {
		{name: "sample host", args: fixed("--demo")},
		{name: "an unknown check", args: fixed("--demo", "--only", "nonesuch"), code: 1},
	},
	"gpusplit nccl-topo": {
		{name: "host", args: fixed("--demo")},
		{name: "VM manifest", args: fixed("--demo", "--vm", "131")},
		{name: "check, accepted", args: func(t *testing.T, f *fixtures) []string {
			xml := f.must(t, "--demo", "nccl-topo")
			p := filepath.Join(t.TempDir(), "topo.xml")
			if err := os.WriteFile(p, []byte(xml), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"--check", p}
		}},
		{name: "check, refused", args: func(t *testing.T, f *fixtures) []string {
			p := filepath.Join(t.TempDir(), "topo.xml")
			if err := os.WriteFile(p, []byte("<system version=\"1\"><cpu>\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"--check", p}
		}, code: 1, doc: true},
	},
	"gpusplit p2p": {
		{name: "two GPUs", args: func(t *testing.T, f *fixtures) []string {
			withDriver(t, p2ptest.New(2), nil)
			return []string{"--sizes", "4K", "--size", "1M", "--runs", "1"}
		}},
		{name: "no CUDA driver", args: func(t *testing.T, f *fixtures) []string {
			withDriver(t, nil, errors.New("libcuda.so.1: cannot open shared object file"))
			return nil
		}, code: ExitNoCUDA},
	},
	"gpusplit fit": {
		{name: "container, before and after the split", args: fixed("--demo", "--model", "../../testdata/models/qwen3.5-397b-a17b-nvfp4-like", "--ct", "129")},
		{name: "VM", args: fixed("--demo", "--model", "../../testdata/models/qwen3.5-397b-a17b-nvfp4-like", "--vm", "131")},
		{name: "a directory without a model", args: func(t *testing.T, f *fixtures) []string { return []string{"--demo", "--model", t.TempDir()} }, code: 1},
	},
	"gpusplit snapshot": {
		{name: "to a file", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--demo", "--file", filepath.Join(t.TempDir(), "s.tar.gz")}
		}},
		{name: "named by its argument", args: func(t *testing.T, f *fixtures) []string {
			return []string{"--demo", filepath.Join(t.TempDir(), "s.tar.gz")}
		}},
		{name: "archive and summary both on standard output", args: fixed("--demo", "-"), code: 1},
	},
}

// withoutJSON are the commands that print no result but a text for the shell or the
// reader, with the arguments that make them print it.
var withoutJSON = map[string][]string{
	"gpusplit help":                  {"topo"},
	"gpusplit completion bash":       nil,
	"gpusplit completion zsh":        nil,
	"gpusplit completion fish":       nil,
	"gpusplit completion powershell": nil,
}

// tooMany are, for the commands that take arguments, arguments one too many.
var tooMany = map[string][]string{
	"gpusplit pve backups restore": {"a.20260101T000000.000000000Z", "unexpected"},
	"gpusplit snapshot":            {"a.tar.gz", "unexpected"},
	"gpusplit hook":                {"131", "post-start", "unexpected"},
}

// nullable are the only fields whose value may be null: each is a number, an object or
// a time that may be absent (docs/json.md says when). A list is never null.
var nullable = map[string]bool{
	"numa_node": true, "root_port": true, "minor": true, "block_device": true, "pid": true,
	"container": true, "vm": true, "layout": true, "applied": true, "sriov": true, "vgpu_type": true,
}

func TestContract(t *testing.T) {
	f := newFixtures(t)
	seen := map[string]bool{}
	for _, c := range commandTree(New(io.Discard, io.Discard)) {
		path := c.CommandPath()
		seen[path] = true
		t.Run(path, func(t *testing.T) {
			if c.HasSubCommands() {
				checkGroup(t, c)
			}
			if !c.Runnable() || helpOnly(c) {
				return
			}
			checkArgs(t, path)
			if words, ok := withoutJSON[path]; ok {
				out, stderr, err := run(t, append(pathArgs(path), words...)...)
				if err != nil || out == "" {
					t.Errorf("%s %s: %v, %d bytes\n%s", path, strings.Join(words, " "), err, len(out), stderr)
				}
				return
			}
			cases, ok := contractCases[path]
			if !ok {
				t.Fatalf("%s has no entry in contractCases: say how to run it, with -o json, to each of its outcomes", path)
			}
			for _, cc := range cases {
				t.Run(cc.name, func(t *testing.T) { checkCase(t, f, path, cc) })
			}
		})
	}
	for path := range contractCases {
		if !seen[path] {
			t.Errorf("contractCases has %q, which is no command", path)
		}
	}
	for path := range withoutJSON {
		if !seen[path] {
			t.Errorf("withoutJSON has %q, which is no command", path)
		}
	}
}

// commandTree is every command under root, root included, but the help topics, which
// are read through gpusplit help TOPIC.
func commandTree(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		if !c.IsAdditionalHelpTopicCommand() {
			out = append(out, commandTree(c)...)
		}
	}
	return out
}

func pathArgs(path string) []string { return strings.Fields(path)[1:] }

// status is the exit status Main gives for err.
func status(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	return 1
}

// checkGroup: a group run alone prints its help; anything after it that is not one of
// its commands is an unknown command.
func checkGroup(t *testing.T, c *cobra.Command) {
	path := c.CommandPath()
	if helpOnly(c) || !c.HasParent() {
		out, _, err := run(t, pathArgs(path)...)
		if err != nil || !strings.Contains(out, "Usage:") {
			t.Errorf("%s alone: %v, want its help and exit status 0:\n%s", path, err, out)
		}
	}
	_, _, err := run(t, append(pathArgs(path), "unexpected")...)
	want := fmt.Sprintf("unknown command %q for %q", "unexpected", path)
	if status(err) != 1 || !strings.Contains(fmt.Sprint(err), want) || !strings.Contains(fmt.Sprint(err), "run '"+path+" --help' for usage") {
		t.Errorf("%s unexpected: exit status %d, %v; want 1 and %s: run '%s --help' for usage", path, status(err), err, want, path)
	}
}

// checkArgs: an argument too many and an unknown flag are errors that name the
// command's --help; an unknown output format is an error that names the formats.
func checkArgs(t *testing.T, path string) {
	extra, ok := tooMany[path]
	if !ok {
		extra = []string{"unexpected"}
	}
	help := "run '" + path + " --help' for usage"
	argHelp := help
	if path == "gpusplit help" {
		// Its arguments are commands: one it does not know is unknown to gpusplit.
		argHelp = "run 'gpusplit --help' for usage"
	}
	_, _, err := run(t, append(pathArgs(path), extra...)...)
	if status(err) != 1 || !strings.Contains(fmt.Sprint(err), argHelp) || (!ok && !strings.Contains(fmt.Sprint(err), `unknown command "unexpected"`)) {
		t.Errorf("%s %s: exit status %d, %v; want 1, unknown command and %q", path, strings.Join(extra, " "), status(err), err, argHelp)
	}
	_, _, err = run(t, append(pathArgs(path), "--no-such-flag")...)
	if status(err) != 1 || !strings.Contains(fmt.Sprint(err), "unknown flag: --no-such-flag") || !strings.Contains(fmt.Sprint(err), help) {
		t.Errorf("%s --no-such-flag: exit status %d, %v; want 1 and %q", path, status(err), err, help)
	}
	valid := append(pathArgs(path), extra[:len(extra)-1]...)
	_, _, err = run(t, append(valid, "-o", "yaml")...)
	if status(err) != 1 || !strings.Contains(fmt.Sprint(err), `-o "yaml": the output format is table, wide or json`) {
		t.Errorf("%s -o yaml: exit status %d, %v; want 1 and the formats", path, status(err), err)
	}
}

// checkCase runs one outcome with -o json: its exit status, and standard output holding
// one JSON document (with status 0, and with doc) or nothing, in which no list is null.
func checkCase(t *testing.T, f *fixtures, path string, cc contractCase) {
	args := append(pathArgs(path), cc.args(t, f)...)
	out, stderr, err := run(t, append(args, "-o", "json")...)
	line := strings.Join(args, " ") + " -o json"
	if got := status(err); got != cc.code {
		t.Fatalf("%s: exit status %d (%v), want %d\n%s", line, got, err, cc.code, stderr)
	}
	if cc.code == 1 && (err == nil || err.Error() == "") {
		t.Errorf("%s: exit status 1 with no message", line)
	}
	switch {
	case out == "" && (cc.code == 0 || cc.doc):
		t.Fatalf("%s: no JSON document on standard output (exit status %d, %v)", line, cc.code, err)
	case out == "":
		return
	case cc.code != 0 && !cc.doc:
		t.Fatalf("%s: exit status %d stopped it before a result, yet standard output holds:\n%.300s", line, cc.code, out)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: standard output is not JSON: %v\n%s", line, err, out)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Errorf("%s: more than one JSON document on standard output:\n%s", line, out)
	}
	if _, ok := doc.(map[string]any); !ok {
		t.Errorf("%s: the document is not an object:\n%.200s", line, out)
	}
	for _, p := range nulls(doc, "") {
		t.Errorf("%s: %s is null; a list is [] when empty, and only %v may be null", line, p, slices.Sorted(maps.Keys(nullable)))
	}
}

// nulls are the paths of the null values in v whose field is not nullable.
func nulls(v any, path string) []string {
	var out []string
	switch v := v.(type) {
	case nil:
		field := path[strings.LastIndex(path, ".")+1:]
		if !nullable[field] {
			out = append(out, path)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, nulls(v[k], path+"."+k)...)
		}
	case []any:
		for i, e := range v {
			out = append(out, nulls(e, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return out
}

// fixtures are what the cases share: one writable copy of the sample host (unpacking
// takes seconds), put back before each case that uses it.
type fixtures struct {
	root  string
	reset func()
}

func newFixtures(t *testing.T) *fixtures {
	root, reset := pveRoot(t)
	// persist checks the unit's binary with its directories: root's, 0755.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return &fixtures{root, reset}
}

// sample is the copy of the sample host, as it was unpacked.
func (f *fixtures) sample(t *testing.T) string {
	t.Helper()
	f.reset()
	for _, p := range []string{"usr", "opt", "tmp", "etc/gpusplit", "etc/systemd", "etc/udev", "etc/modprobe.d"} {
		if err := os.RemoveAll(filepath.Join(f.root, p)); err != nil {
			t.Fatal(err)
		}
	}
	return f.root
}

// inSync is a desired state the sample host is in: every GPU on nvidia.
func (f *fixtures) inSync(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "split.toml")
	if err := os.WriteFile(p, []byte(driversOnly+"[[group]]\nname = \"ct\"\nselect = [\"count:8\"]\ndriver = \"nvidia\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// backup is the sample host after a sync, and the id of pci.cfg's backup.
func (f *fixtures) backup(t *testing.T) (string, string) {
	t.Helper()
	root := f.sample(t)
	f.must(t, "--root", root, "pve", "sync", "--vfio", "numa:1", "--apply")
	var doc struct {
		Backups []struct{ ID, Path string }
	}
	if err := json.Unmarshal([]byte(f.must(t, "--root", root, "pve", "backups", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	for _, b := range doc.Backups {
		if b.Path == "/etc/pve/mapping/pci.cfg" {
			return root, b.ID
		}
	}
	t.Fatalf("no backup of pci.cfg: %+v", doc)
	return "", ""
}

func (f *fixtures) must(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := run(t, args...)
	if err != nil {
		t.Fatalf("gpusplit %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// The unknown commands of the reports: each is exit status 1, names the command and its
// --help, and offers the command meant when one is near.
func TestUnknownCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"persist", "instal"}, `unknown command "instal" for "gpusplit persist" (did you mean install?): run 'gpusplit persist --help' for usage`},
		{[]string{"pve", "bogus"}, `unknown command "bogus" for "gpusplit pve": run 'gpusplit pve --help' for usage`},
		{[]string{"pve", "backups", "bogus"}, `unknown command "bogus" for "gpusplit pve backups": run 'gpusplit pve backups --help' for usage`},
		{[]string{"invetory"}, `unknown command "invetory" for "gpusplit" (did you mean inventory?): run 'gpusplit --help' for usage`},
		{[]string{"topo", "extra"}, `unknown command "extra" for "gpusplit topo": run 'gpusplit topo --help' for usage`},
		{[]string{"help", "persist", "instal"}, `unknown command "instal" for "gpusplit persist" (did you mean install?)`},
		{[]string{"pve", "backups", "restore"}, `pve backups restore needs the ID of a backup (gpusplit pve backups lists them): run 'gpusplit pve backups restore --help' for usage`},
		{[]string{"hook"}, `hook needs VMID PHASE (e.g. gpusplit hook 131 pre-start) or release ADDRESS: run 'gpusplit hook --help' for usage`},
		{[]string{"hook", "release"}, `hook needs VMID PHASE (e.g. gpusplit hook 131 pre-start) or release ADDRESS`},
	} {
		out, _, err := run(t, c.args...)
		if status(err) != 1 || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("gpusplit %s: exit status %d, %v\nwant 1 and %s", strings.Join(c.args, " "), status(err), err, c.want)
		}
		if out != "" {
			t.Errorf("gpusplit %s printed on standard output:\n%s", strings.Join(c.args, " "), out)
		}
	}
}

// -o is the format everywhere, and a flag that also says what to print cannot say
// otherwise.
func TestConflictingOutput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--demo", "topo", "--format", "svg", "-o", "json"}, "--format svg and -o json"},
		{[]string{"--demo", "topo", "--format", "matrix", "-o", "json"}, "--format matrix and -o json"},
		{[]string{"--demo", "snapshot", "-", "-o", "json"}, "would both go to standard output"},
		{[]string{"--demo", "snapshot", "--file", "-", "-o", "json"}, "would both go to standard output"},
		{[]string{"--demo", "snapshot", "a.tar.gz", "--file", "b.tar.gz"}, "named twice"},
		{[]string{"--demo", "snapshot", "-o", filepath.Join(dir, "s.tar.gz")}, "the output format is table, wide or json; did you mean --file " + filepath.Join(dir, "s.tar.gz") + "?"},
		{[]string{"--demo", "nccl-topo", "-o", "t.xml"}, "did you mean --file t.xml?"},
	} {
		out, _, err := run(t, c.args...)
		if status(err) != 1 || !strings.Contains(fmt.Sprint(err), c.want) || out != "" {
			t.Errorf("gpusplit %s: exit status %d, %v, %d bytes out; want 1 and %q", strings.Join(c.args, " "), status(err), err, len(out), c.want)
		}
	}
	if names, _ := os.ReadDir(dir); len(names) > 0 {
		t.Errorf("a refused snapshot wrote %v", names)
	}
	out := mustRun(t, "--demo", "topo", "--format", "svg")
	if !strings.HasPrefix(out, "<svg") && !strings.HasPrefix(out, "<?xml") {
		t.Errorf("topo --format svg:\n%.200s", out)
	}
}

// A command added without a word about its arguments takes none, and a group added
// without a Run refuses what is not one of its commands: the contract holds for a
// command before any test of its own.
func TestContractDefaults(t *testing.T) {
	root := &cobra.Command{Use: "tool", SilenceErrors: true, SilenceUsage: true}
	group := &cobra.Command{Use: "group"}
	group.AddCommand(&cobra.Command{Use: "leaf", RunE: func(*cobra.Command, []string) error { return nil }})
	root.AddCommand(group)
	applyContract(root)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	for _, c := range []struct{ args, of string }{{"group leaf x", "tool group leaf"}, {"group x", "tool group"}, {"x", "tool"}} {
		root.SetArgs(strings.Fields(c.args))
		want := fmt.Sprintf("unknown command \"x\" for %q: run '%s --help' for usage", c.of, c.of)
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("tool %s: %v, want %s", c.args, err, want)
		}
	}
}

// gpuFunctionVM gives the sample host a VM 140 that passes two GPUs by their GPU
// function alone, as a gpudirect clique needs, and returns the root.
func gpuFunctionVM(t *testing.T, root string) string {
	t.Helper()
	conf := "hostpci0: 0000:81:00.0,pcie=1\nhostpci1: 0000:91:00.0,pcie=1\nmachine: q35\nmemory: 4096\n"
	if err := os.WriteFile(filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server/140.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// withSnippets gives the sample host a storage.cfg whose local storage holds snippets,
// and gpusplit installed where the snippet runs it, root's.
func withSnippets(t *testing.T, root string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: the binary the snippet runs must be root's")
	}
	cfg := "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup,snippets\n"
	if err := os.WriteFile(filepath.Join(root, "etc/pve/storage.cfg"), []byte(cfg), 0o640); err != nil {
		t.Fatal(err)
	}
	putBinary(t, root, persist.DefaultBinary, 0o755)
	return root
}

// helpOnly says whether c only groups other commands: run alone, it prints its help.
func helpOnly(c *cobra.Command) bool { return c.Annotations[helpOnlyKey] != "" }
