package cli

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpusplit/gpusplit/internal/doctor"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// complete asks for completions as the shell scripts do (gpusplit __complete ARGS…, the
// last argument being the word under the cursor) and returns the candidates and the
// directive. Standard error must hold nothing but cobra's closing line: a completion
// that prints a warning or an error would spoil the user's prompt.
func complete(t *testing.T, args ...string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	out, stderr, err := run(t, append([]string{cobra.ShellCompRequestCmd}, args...)...)
	if err != nil {
		t.Fatalf("__complete %q: %v\n%s", args, err, stderr)
	}
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "Completion ended with directive:") {
		t.Errorf("__complete %q wrote to standard error:\n%s", args, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	last := lines[len(lines)-1]
	d, err := strconv.Atoi(strings.TrimPrefix(last, ":"))
	if !strings.HasPrefix(last, ":") || err != nil {
		t.Fatalf("__complete %q: no directive at the end of\n%s", args, out)
	}
	return lines[:len(lines)-1], cobra.ShellCompDirective(d)
}

// values drops the descriptions.
func values(comps []string) []string {
	out := []string{}
	for _, c := range comps {
		v, _, _ := strings.Cut(c, "\t")
		out = append(out, v)
	}
	return out
}

var demoGPUs = []string{"0000:01:00.0", "0000:11:00.0", "0000:61:00.0", "0000:71:00.0", "0000:81:00.0", "0000:91:00.0", "0000:e1:00.0", "0000:f1:00.0"}

// demoSelectors are the selectors of the sample host's GPUs, in the order offered.
func demoSelectors(prefix string) []string {
	var out []string
	for _, s := range slices.Concat(demoGPUs,
		[]string{"numa:0", "numa:1", "group:10", "group:28", "group:42", "group:61", "group:72", "group:90", "group:101", "group:117", "10de:2bb1"},
		[]string{"count:1", "count:2", "count:3", "count:4", "count:5", "count:6", "count:7", "count:8"},
		[]string{"mapping:pro6000"}) { // the sample's other mapping, a6000-ws, is of another node
		out = append(out, prefix+s)
	}
	return out
}

func TestCompleteValues(t *testing.T) {
	freshDemo(t) // a dry run under --demo makes the scratch copy
	checks, afterOff := []string{}, []string{}
	for _, c := range doctor.Checks {
		checks = append(checks, c.ID)
		if strings.HasPrefix(c.ID, "iommu-") && c.ID != "iommu-off" {
			afterOff = append(afterOff, "iommu-off,"+c.ID)
		}
	}
	if len(afterOff) < 2 {
		t.Fatalf("the checks %q: too few iommu- ones for the test of a list", checks)
	}
	const noFiles, files, ext = cobra.ShellCompDirectiveNoFileComp, cobra.ShellCompDirectiveDefault, cobra.ShellCompDirectiveFilterFileExt
	const listed = noFiles | cobra.ShellCompDirectiveKeepOrder // in the order given
	for _, tc := range []struct {
		name string
		args []string
		want []string // values, in order
		dir  cobra.ShellCompDirective
		// lines are candidates, with their descriptions, that must be among them.
		lines []string
	}{
		{"the VMs of this node, not of kpro5, not the container", []string{"--demo", "pve", "vm-layout", "--vm", ""}, []string{"131"}, listed, []string{"131\ttrain01"}},
		{"a VM id by its start", []string{"--demo", "pve", "vm-layout", "--vm", "13"}, []string{"131"}, listed, nil},
		{"no VM starts so", []string{"--demo", "pve", "vm-layout", "--vm", "2"}, []string{}, listed, nil},
		{"--demo after the command", []string{"pve", "vm-layout", "--demo", "--vm", ""}, []string{"131"}, listed, nil},
		{"nccl-topo --vm", []string{"--demo", "nccl-topo", "--vm", ""}, []string{"131"}, listed, nil},

		{"every selector of the host's GPUs", []string{"--demo", "topo", "--devices", ""}, demoSelectors(""), listed, []string{
			"0000:01:00.0\tRTX PRO 6000 Blackwell Workstation Edition, NUMA node 0, IOMMU group 10, nvidia",
			"numa:1\tNUMA node 1: 4 GPUs",
			"group:117\tIOMMU group of 0000:f1:00.0",
			"10de:2bb1\tRTX PRO 6000 Blackwell Workstation Edition: 8 GPUs",
			"count:1\tany 1 GPU, on as few NUMA nodes as possible",
		}},
		{"a selector by its kind", []string{"--demo", "topo", "--devices", "numa:"}, []string{"numa:0", "numa:1"}, listed, nil},
		{"after a comma, keeping what is typed, without what is typed", []string{"--demo", "topo", "--devices", "0000:01:00.0,"}, demoSelectors("0000:01:00.0,")[1:], listed, nil},
		{"after a comma, by its start", []string{"--demo", "topo", "--devices", "0000:01:00.0,nu"}, []string{"0000:01:00.0,numa:0", "0000:01:00.0,numa:1"}, listed, nil},
		{"one left after a comma: the list may end or go on", []string{"--demo", "topo", "--devices", "0000:01:00.0,0000:e"}, []string{"0000:01:00.0,0000:e1:00.0", "0000:01:00.0,0000:e1:00.0,"}, listed, nil},
		{"an address without its domain", []string{"--demo", "topo", "--devices", "e"}, []string{"e1:00.0"}, listed, nil},
		{"the --devices given narrow --vfio", []string{"--demo", "--devices", "numa:1", "plan", "--vfio", ""},
			[]string{"0000:81:00.0", "0000:91:00.0", "0000:e1:00.0", "0000:f1:00.0", "numa:1", "group:72", "group:90", "group:101", "group:117", "10de:2bb1", "count:1", "count:2", "count:3", "count:4", "mapping:pro6000"}, listed, nil},
		{"the GPU numbers, once typed", []string{"--demo", "plan", "--vfio", "gpu"}, []string{"gpu:0", "gpu:1", "gpu:2", "gpu:3", "gpu:4", "gpu:5", "gpu:6", "gpu:7"}, listed,
			[]string{"gpu:4\tGPU4, 0000:81:00.0, RTX PRO 6000 Blackwell Workstation Edition"}},
		{"a mapping after a comma", []string{"--demo", "plan", "--vfio", "gpu:4,m"}, []string{"gpu:4,mapping:pro6000", "gpu:4,mapping:pro6000,"}, listed, nil},
		{"a --devices that matches nothing: nothing", []string{"--demo", "--devices", "numa:7", "plan", "--vfio", ""}, []string{}, noFiles, nil},
		{"a host that cannot be opened: nothing, quietly", []string{"--root", "/nonexistent", "topo", "--devices", ""}, []string{}, noFiles, nil},
		{"--demo with --root: nothing, quietly", []string{"--demo", "--root", "/nonexistent", "pve", "vm-layout", "--vm", ""}, []string{}, noFiles, nil},

		{"the doctor's checks", []string{"--demo", "doctor", "--only", ""}, checks, listed, []string{"iommu-off\tno IOMMU, so no IOMMU groups and no vfio-pci"}},
		{"checks after a comma", []string{"--demo", "doctor", "--only", "iommu-off,iommu-"}, afterOff, listed, nil},

		{"topo's formats", []string{"--demo", "topo", "--format", ""}, []string{"matrix", "svg", "dot"}, listed, []string{"svg\ta picture of the PCIe tree"}},
		{"a format by its start", []string{"--demo", "topo", "--format", "s"}, []string{"svg"}, listed, nil},
		{"-o", []string{"--demo", "inventory", "-o", ""}, []string{"table", "wide", "json"}, listed, []string{"wide\tevery column, whole"}},
		{"--output by its start", []string{"--demo", "pve", "mappings", "--output", "j"}, []string{"json"}, listed, nil},
		{"the mappings", []string{"--demo", "pve", "sync", "--vm-mapping", ""}, []string{"a6000-ws", "pro6000"}, listed, nil},

		{"--root: directories and archives", []string{"topo", "--root", ""}, []string{"tar.gz"}, ext, nil},
		{"--config: TOML files", []string{"--demo", "plan", "--config", ""}, []string{"toml"}, ext, nil},
		{"--kernel-log: files", []string{"--demo", "doctor", "--kernel-log", ""}, []string{}, files, nil},
		{"a number: nothing, not files", []string{"--demo", "apply", "--parallel", ""}, []string{}, noFiles, nil},

		{"no arguments: nothing, not files", []string{"--demo", "topo", ""}, []string{}, noFiles, nil},
		{"persist's commands", []string{"--demo", "persist", ""}, []string{"install", "remove", "show"}, noFiles, nil},
		{"no backups on the sample host", []string{"--demo", "pve", "backups", "restore", ""}, []string{}, listed, nil},
		{"snapshot's archive", []string{"--demo", "snapshot", ""}, []string{"tar.gz"}, ext, nil},
		{"snapshot takes one archive", []string{"--demo", "snapshot", "a.tar.gz", ""}, []string{}, noFiles, nil},
		{"snapshot --file", []string{"--demo", "snapshot", "--file", ""}, []string{}, files, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, dir := complete(t, tc.args...)
			if !slices.Equal(values(got), tc.want) || dir != tc.dir {
				t.Errorf("gpusplit %s<TAB>:\n got %q, directive %d\nwant %q, directive %d", strings.Join(tc.args, " "), values(got), dir, tc.want, tc.dir)
			}
			for _, l := range tc.lines {
				if !slices.Contains(got, l) {
					t.Errorf("no %q among\n%s", l, strings.Join(got, "\n"))
				}
			}
			if last := tc.args[len(tc.args)-1]; strings.Contains(last, ",") {
				// After a comma bash's script would drop every candidate with a description.
				for _, c := range got {
					if strings.Contains(c, "\t") {
						t.Errorf("a description after a comma: %q", c)
					}
				}
			}
		})
	}
}

// The completions read the host --root names, wherever --root is on the line: another
// host's GPUs, VMs and backups, as the commands themselves list them.
func TestCompleteReadsTheNamedHost(t *testing.T) {
	fixture := filepath.Join("..", "..", "testdata", "hosts", "oracle-o1-8x4090-2socket.tar.gz")
	var inv struct {
		GPUs []struct{ Address string }
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--root", fixture, "inventory", "-o", "json")), &inv); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, g := range inv.GPUs {
		addrs = append(addrs, g.Address)
	}
	if len(addrs) != 8 || slices.Equal(addrs, demoGPUs) {
		t.Fatalf("the fixture's GPUs are %q", addrs)
	}
	got, _ := complete(t, "--root", fixture, "topo", "--devices", "0000:")
	if !slices.Equal(values(got), addrs) {
		t.Errorf("--root %s: offered %q, the host's GPUs are %q", fixture, values(got), addrs)
	}
	got, _ = complete(t, "topo", "--root="+fixture, "--devices", "numa:")
	if !slices.Equal(values(got), []string{"numa:0", "numa:1"}) {
		t.Errorf("--root= after the command: %q", got)
	}

	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	write := func(p, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/pve/nodes/kpro6/qemu-server/200.conf", "name: bench02\nmemory: 4096\n")
	write("etc/pve/nodes/kpro6/qemu-server/99.conf", "memory: 4096\n")
	write("etc/pve/nodes/kpro6/qemu-server/README", "not a config\n")
	write("etc/pve/nodes/kpro6/qemu-server/300.conf", "name: bad\r\n") // refused by the parser: offered by id
	got, _ = complete(t, "--root", root, "pve", "vm-layout", "--vm", "")
	if want := []string{"99", "131\ttrain01", "200\tbench02", "300"}; !slices.Equal(got, want) {
		t.Errorf("VMs of %s: %q, want %q", root, got, want)
	}

	mustRun(t, "--root", root, "pve", "vm-layout", "--vm", "131", "--apply")
	var doc struct {
		Backups []struct{ ID, Path, Command string }
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--root", root, "pve", "backups", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Backups) == 0 {
		t.Fatal("vm-layout --apply left no backup")
	}
	got, dir := complete(t, "--root", root, "pve", "backups", "restore", "")
	if len(got) != len(doc.Backups) || dir != cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveKeepOrder {
		t.Fatalf("backups offered %q (directive %d), listed %+v", got, dir, doc.Backups)
	}
	for i, b := range doc.Backups {
		id, desc, _ := strings.Cut(got[i], "\t")
		if id != b.ID || !strings.HasPrefix(desc, b.Path+", replaced ") || !strings.HasSuffix(desc, " by "+b.Command) {
			t.Errorf("backup %d offered as %q, listed as %+v", i, got[i], b)
		}
	}
	if got, _ := complete(t, "--root", root, "pve", "backups", "restore", doc.Backups[0].ID, ""); len(got) != 0 {
		t.Errorf("a second argument offered %q", got)
	}
}

// Every flag that takes a value has a completion, so that TAB never offers the current
// directory's files for a VM id or a number; and every entry of the tables names a flag
// or command that exists.
func TestEveryFlagHasCompletion(t *testing.T) {
	root := New(io.Discard, io.Discard)
	g := &globals{}
	flagNames, formatPaths := map[string]bool{}, map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, set := range []*pflag.FlagSet{c.PersistentFlags(), c.Flags()} {
			set.VisitAll(func(f *pflag.Flag) {
				flagNames[f.Name] = true
				if f.Value.Type() == "bool" {
					return
				}
				if _, ok := c.GetFlagCompletionFunc(f.Name); !ok {
					t.Errorf("%s --%s takes a value but has no completion: add it to flagCompletions (completeNone when there is nothing to offer)", c.CommandPath(), f.Name)
				}
				if f.Name == "format" {
					formatPaths[c.CommandPath()] = true
					if len(formatValues()[c.CommandPath()]) == 0 {
						t.Errorf("%s --format: its values are not in formatValues", c.CommandPath())
					}
				}
			})
		}
		if c.Runnable() && !c.HasSubCommands() && c.ValidArgsFunction == nil {
			t.Errorf("%s: its arguments have no completion", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for name := range flagCompletions(g) {
		if !flagNames[name] {
			t.Errorf("flagCompletions has --%s, which no command has", name)
		}
	}
	for path := range formatValues() {
		if !formatPaths[path] {
			t.Errorf("formatValues has %q, which has no --format", path)
		}
	}
	for path := range argCompletions(g) {
		if c, _, err := root.Find(strings.Fields(path)[1:]); err != nil || c.CommandPath() != path {
			t.Errorf("argCompletions has %q, which is not a command", path)
		}
	}
}
