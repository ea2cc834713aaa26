package cli

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/persist"
)

// writeCase prepares a host where a command that changes things has a change to make:
// the root it changes, and what follows the command's path. kernel, when not nil, is
// the simulated kernel the command's driver moves go through.
type writeCase func(t *testing.T, f *fixtures) (root string, args []string, kernel *simKernel)

// writeCases are every command that changes things (write.go's contract), by path: one
// added later fails TestWriteContract until it is here.
var writeCases = map[string]writeCase{
	"gpusplit apply": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		root, k := twoGPUHost(t)
		return root, []string{"--root", root, "--vfio", "0000:00:03.0"}, k
	},
	"gpusplit rollback": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		root, k := twoGPUHost(t)
		f.must(t, "--root", root, "apply", "--vfio", "0000:00:03.0", "--yes")
		k.writes = nil
		return root, []string{"--root", root}, k
	},
	"gpusplit persist install": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		root := rootsBinary(t, f)
		return root, []string{"--root", root, "--vfio", "numa:1"}, nil
	},
	"gpusplit persist remove": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		root := rootsBinary(t, f)
		f.must(t, "--root", root, "persist", "install", "--vfio", "numa:1", "--yes")
		return root, []string{"--root", root}, nil
	},
	"gpusplit pve sync": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		root := f.sample(t)
		return root, []string{"--root", root, "--vfio", "numa:1"}, nil
	},
	"gpusplit pve vm-layout": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		root := f.sample(t)
		return root, []string{"--root", root, "--vm", "131"}, nil
	},
	"gpusplit pve hook install": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		root := withSnippets(t, f.sample(t))
		return root, []string{"--root", root, "--vm", "131"}, nil
	},
	"gpusplit pve hook remove": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		root := withSnippets(t, f.sample(t))
		f.must(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--yes")
		return root, []string{"--root", root, "--vm", "131"}, nil
	},
	"gpusplit pve p2p-clique": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		root := gpuFunctionVM(t, f.sample(t))
		return root, []string{"--root", root, "--vm", "140", "--clique", "1"}, nil
	},
	"gpusplit pve backups prune": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		// Two syncs: two backups of each file, one of which goes.
		root := f.sample(t)
		f.must(t, "--root", root, "pve", "sync", "--vfio", "numa:1", "--yes")
		f.must(t, "--root", root, "pve", "sync", "--vfio", "numa:0", "--yes")
		return root, []string{"--root", root, "--keep", "1"}, nil
	},
	"gpusplit pve backups restore": func(t *testing.T, f *fixtures) (string, []string, *simKernel) {
		root, id := f.backup(t)
		return root, []string{"--root", root, id}, nil
	},
}

// twoGPUHost is a host of two GPUs, each alone in its group, whose drivers move through
// a simulated kernel.
func twoGPUHost(t *testing.T) (string, *simKernel) {
	dir := t.TempDir()
	h, err := twoGPUs().Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := newSimKernel(t, h)
	k.use(t)
	return dir, k
}

// rootsBinary is the sample host with the boot unit's binary in place, root's: persist
// installs only a unit that runs one.
func rootsBinary(t *testing.T, f *fixtures) string {
	if os.Getuid() != 0 {
		t.Skip("needs root: the unit's binary must be root's")
	}
	root := f.sample(t)
	putBinary(t, root, persist.DefaultBinary, 0o755)
	return root
}

// Every command that changes things follows one contract (write.go). Without a
// terminal and without --yes it shows the change, writes nothing and says how to go on
// (exit 1); --dry-run shows it and exits 0; --yes makes it; --dry-run with --yes is a
// contradiction. A command with the contract's flags is in writeCases, so that none is
// left out.
func TestWriteContract(t *testing.T) {
	f := newFixtures(t)
	var writing []string
	for _, c := range commandTree(New(io.Discard, io.Discard)) {
		path := c.CommandPath()
		marked := c.Annotations[writesKey] == "true"
		for _, name := range []string{"dry-run", "yes", "apply"} {
			if c.Flags().Lookup(name) != nil && !marked {
				t.Errorf("%s has --%s but not the write contract (writeFlags)", path, name)
			}
		}
		if !marked {
			continue
		}
		writing = append(writing, path)
		if !strings.HasSuffix(c.Long, contractText) {
			t.Errorf("%s: its help (and manual page) does not end with the contract", path)
		}
		if _, ok := writeCases[path]; !ok {
			t.Errorf("%s changes things: give it a case in writeCases", path)
		}
	}
	slices.Sort(writing)
	if got, want := strings.Join(writing, "\n"), strings.Join(slices.Sorted(maps.Keys(writeCases)), "\n"); got != want {
		t.Errorf("commands under the contract:\n%s\nwant\n%s", got, want)
	}
	for _, path := range slices.Sorted(maps.Keys(writeCases)) {
		t.Run(path, func(t *testing.T) {
			cmd := pathArgs(path)
			for _, c := range []struct {
				name    string
				flags   []string
				code    int
				says    string
				changes bool
			}{
				{"no terminal, no --yes", nil, 1, "run again with --yes to make this change, or --dry-run to only look", false},
				{"--dry-run", []string{"--dry-run"}, 0, "", false},
				{"--dry-run and --yes", []string{"--dry-run", "--yes"}, 1, "--dry-run and --yes contradict each other", false},
				{"--yes", []string{"--yes"}, 0, "", true},
			} {
				t.Run(c.name, func(t *testing.T) {
					root, args, k := writeCases[path](t, f)
					before := treeSum(t, root)
					out, stderr, err := run(t, slices.Concat(cmd, args, c.flags)...)
					if status(err) != c.code || !strings.Contains(errText(err), c.says) {
						t.Fatalf("%s %s: exit %d (%v), want %d saying %q\n%s%s", path, strings.Join(c.flags, " "), status(err), err, c.code, c.says, out, stderr)
					}
					changed := !mapsEqual(before, treeSum(t, root)) || k != nil && len(k.writes) > 0
					if changed != c.changes {
						t.Errorf("%s %s: changed %v, want %v", path, strings.Join(c.flags, " "), changed, c.changes)
					}
					// The change is shown before anything is asked or written.
					if c.flags == nil && strings.TrimSpace(out) == "" {
						t.Errorf("%s without --yes showed no change", path)
					}
				})
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func mapsEqual(a, b map[string]string) bool { return maps.Equal(a, b) }

// The question: on a terminal "y" goes ahead and anything else changes nothing; -o json
// never asks; --yes never asks.
func TestProceed(t *testing.T) {
	for _, c := range []struct {
		terminal, json, yes bool
		answer              string
		want                error
	}{
		{terminal: true, answer: "y\n"},
		{terminal: true, answer: "yes\n"},
		{terminal: true, answer: "\n", want: errors.New("nothing was changed: not confirmed")},
		{terminal: true, answer: "n\n", want: errors.New("nothing was changed: not confirmed")},
		{terminal: false, answer: "y\n", want: errNoTerminal},
		{terminal: true, json: true, answer: "y\n", want: errNoTerminal},
		{terminal: false, yes: true},
	} {
		var asked bytes.Buffer
		g := &globals{stdin: strings.NewReader(c.answer), stderr: &asked, terminal: c.terminal, output: "table"}
		if c.json {
			g.output = "json"
		}
		w := &writeFlags{yes: c.yes}
		err := w.proceed(g, "Write it?")
		if errText(err) != errText(c.want) {
			t.Errorf("%+v: %v, want %v", c, err, c.want)
		}
		if wantAsk := c.terminal && !c.json && !c.yes; (asked.String() == "Write it? [y/N] ") != wantAsk {
			t.Errorf("%+v: asked %q", c, asked.String())
		}
	}
}

// /dev/null, the standard input systemd and cron give, is a character device but no
// terminal: nobody is asked there.
func TestNullIsNoTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Error("/dev/null is taken for a terminal")
	}
}
