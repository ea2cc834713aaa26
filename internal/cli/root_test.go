package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// The table of subcommands names each command as the command names itself, and says
// which are help topics; the whole tree has them all.
func TestSubcommandsTable(t *testing.T) {
	g := &globals{}
	for _, s := range subcommands {
		c := s.make(g)
		if c.Name() != s.name {
			t.Errorf("subcommands has %q for the command %q", s.name, c.Name())
		}
		if topic := !c.Runnable() && !c.HasSubCommands(); topic != s.topic {
			t.Errorf("%s: topic %v in the table, but %v", s.name, s.topic, topic)
		}
	}
	listed := map[string]bool{}
	for _, c := range New(io.Discard, io.Discard).Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			listed[c.Name()] = true
		}
	}
	for _, s := range subcommands {
		delete(listed, s.name)
	}
	if len(listed) != 0 || len(New(io.Discard, io.Discard).Commands()) != len(subcommands)+2 {
		t.Errorf("the root has subcommands that the table lacks: %v", listed)
	}
}

// A run of one command makes only that command, and prints exactly what the whole tree
// prints, exit code included: its output, its help, its errors for bad flags and
// arguments, after the root's flags in every form. What commandIn cannot tell runs on
// the whole tree.
func TestOneCommandRunsAsTheWholeTree(t *testing.T) {
	tests := []struct {
		args []string
		one  string // the command forArgs makes alone, "" for the whole tree
	}{
		{[]string{"--demo", "inventory"}, "inventory"},
		{[]string{"--demo", "inventory", "-o", "json"}, "inventory"},
		{[]string{"--demo", "-o", "json", "inventory", "--long"}, "inventory"},
		{[]string{"-ojson", "--demo", "inventory"}, "inventory"},
		{[]string{"--demo", "--output=json", "topo"}, "topo"},
		{[]string{"--demo", "topo", "--format", "dot"}, "topo"},
		{[]string{"--demo", "--devices", "10de:2bb1", "topo"}, "topo"},
		{[]string{"--devices=10de:2bb1", "--demo", "inventory"}, "inventory"},
		{[]string{"--demo", "inventory", "--help"}, "inventory"},
		{[]string{"--demo", "inventory", "extra"}, "inventory"},
		{[]string{"--demo", "inventory", "--bogus"}, "inventory"},
		{[]string{"--demo", "-o", "yaml", "inventory"}, "inventory"},
		{[]string{"--root", "/nonexistent", "inventory"}, "inventory"},
		{[]string{"--demo", "status"}, "status"},
		{[]string{"--demo", "nccl-topo"}, "nccl-topo"},
		{[]string{"--demo", "persist"}, "persist"},
		{[]string{"--demo", "persist", "instal"}, "persist"},
		{[]string{"--demo", "pve", "--help"}, "pve"},
		{[]string{"--demo", "fit", "--help"}, "fit"},
		{[]string{"--demo", "snapshot", "--help"}, "snapshot"},
		{[]string{"--version"}, ""},
		{[]string{"--help"}, ""},
		{[]string{"-h", "inventory"}, ""},
		{[]string{}, ""},
		{[]string{"help", "inventory"}, ""},
		{[]string{"selectors"}, ""},
		{[]string{"--bogus", "inventory"}, ""},
		{[]string{"--demo=true", "inventory"}, "inventory"},
		{[]string{"--demo", "-o"}, ""},
		{[]string{"-d", "inventory"}, ""},
		{[]string{"invent"}, ""},
		{[]string{"--demo", "--", "inventory"}, ""},
		{[]string{"completion", "bash"}, ""},
		{[]string{"__complete", "--demo", "inventory", "-o", ""}, ""},
	}
	all := len(New(io.Discard, io.Discard).Commands())
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := forArgs(tc.args, &out, &errOut)
			var made []string
			for _, c := range root.Commands() {
				if c.Name() != "help" && c.Name() != "completion" {
					made = append(made, c.Name())
				}
			}
			switch {
			case tc.one == "" && len(root.Commands()) != all:
				t.Fatalf("made %q, not the whole tree", made)
			case tc.one != "" && (len(made) != 1 || made[0] != tc.one):
				t.Fatalf("made %q, not %s alone", made, tc.one)
			}
			code := execute(root, tc.args, &errOut)
			var wantOut, wantErr bytes.Buffer
			wantCode := execute(New(&wantOut, &wantErr), tc.args, &wantErr)
			if code != wantCode || out.String() != wantOut.String() || errOut.String() != wantErr.String() {
				t.Errorf("exit %d, the whole tree %d\nstdout:\n%s\nthe whole tree's:\n%s\nstderr:\n%s\nthe whole tree's:\n%s",
					code, wantCode, out.String(), wantOut.String(), errOut.String(), wantErr.String())
			}
		})
	}
}
