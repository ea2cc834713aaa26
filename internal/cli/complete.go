package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpusplit/gpusplit/internal/doctor"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// Shell completion of values. Cobra parses the whole command line, persistent flags
// included, before it calls a completion function, so --root, --demo and --devices are
// already in globals: each function reads the host the command would read. A completion
// runs while the user waits at a prompt, so it never prints an error and never waits
// long: on any failure it offers nothing (and says why in cobra's debug log, see
// BASH_COMP_DEBUG_FILE).

// completionTimeout bounds the reading a completion does: a TAB that hangs on a stuck
// file system is worse than one that offers nothing.
const completionTimeout = 3 * time.Second

// inOrder is the directive of the lists offered: in the order given (VM ids by number,
// backups oldest first, a GPU's selectors before the NUMA nodes', not as bash sorts
// strings), and never files.
const inOrder = cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder

// completeNone is for flags whose values cannot be guessed (numbers, sizes, new names): the
// shell should offer nothing rather than the files of the current directory.
var completeNone = cobra.NoFileCompletions

// completeFiles is for flags that take a path on this machine: the shell's own file completion.
func completeFiles(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveDefault
}

// completeFilesExt offers directories and the files whose names end in one of exts.
func completeFilesExt(exts ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return exts, cobra.ShellCompDirectiveFilterFileExt
	}
}

// formatValues are the values of --format, by command path: a flag of the same name means
// different things in different commands.
func formatValues() map[string][]cobra.Completion {
	return map[string][]cobra.Completion{
		"gpusplit topo": {
			cobra.CompletionWithDesc("matrix", "the nvidia-smi topo -m matrix"),
			cobra.CompletionWithDesc("svg", "a picture of the PCIe tree"),
			cobra.CompletionWithDesc("dot", "the PCIe tree as a Graphviz graph"),
		},
	}
}

// flagCompletions says how the values of each flag are completed, by the flag's name,
// wherever it is defined. Every flag that takes a value is here, so that a new one gets
// a decision (TestEveryFlagHasCompletion); boolean flags take none.
func flagCompletions(g *globals) map[string]cobra.CompletionFunc {
	return map[string]cobra.CompletionFunc{
		// Global flags.
		"root":   completeFilesExt("tar.gz"),
		"output": completeOutput,
		"devices": func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			// Which devices count as GPUs: offered from the default rule, since the value
			// being typed is the one that would change it.
			return g.complete(func(h *host.Host) ([]cobra.Completion, error) { return completeSelectors(h, nil, toComplete) })
		},

		// The desired split and what reads it.
		"vfio": func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return g.complete(func(h *host.Host) ([]cobra.Completion, error) {
				sels, err := g.selectors(h)
				if err != nil {
					return nil, err
				}
				return completeSelectors(h, sels, toComplete)
			})
		},
		"config":         completeFilesExt("toml"),
		"parallel":       completeNone,
		"unbind-timeout": completeNone,

		// Proxmox.
		"vm": func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return g.complete(func(h *host.Host) ([]cobra.Completion, error) { return completeGuests(h, pve.QEMU, toComplete) })
		},
		"vm-mapping": func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return g.complete(func(h *host.Host) ([]cobra.Completion, error) { return completeMappings(h, toComplete) })
		},
		"keep":    completeNone,
		"clique":  completeNone,
		"storage": completeNone,
		// pve hook install and hook: a duration.
		"deadline": completeNone,
		"p2p":      completeFilesExt("json"),
		"save":     completeFilesExt("json"),

		// doctor.
		"only":       completeChecks,
		"kernel-log": completeFiles,

		// topo; the files of nccl-topo and snapshot.
		"format": func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completionPrefix(formatValues()[cmd.CommandPath()], toComplete), inOrder
		},
		"manifest": completeFiles,
		"file":     completeFiles,
		"check":    completeFiles,

		// metrics: node_exporter's textfile directory.
		"textfile": func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},

		// persist: the binary as the host sees it, which on the live host is a file here.
		"binary": completeFiles,

		// fit.
		"model": func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		"ct": func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return g.complete(func(h *host.Host) ([]cobra.Completion, error) { return completeGuests(h, pve.LXC, toComplete) })
		},
		"engine": func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completionPrefix([]cobra.Completion{"vllm", "sglang"}, toComplete), inOrder
		},
		"kv-dtype": func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completionPrefix([]cobra.Completion{"auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"}, toComplete), inOrder
		},
		"memory-fraction":    completeNone,
		"kv-bytes-per-token": completeNone,
		"context":            completeNone,
		"concurrency":        completeNone,
		"gpu-memory":         completeNone,

		// p2p.
		"sizes":  completeNone,
		"size":   completeNone,
		"passes": completeNone,
		"runs":   completeNone,
	}
}

// argCompletions complete positional arguments, by command path.
func argCompletions(g *globals) map[string]cobra.CompletionFunc {
	return map[string]cobra.CompletionFunc{
		"gpusplit pve backups restore": func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return g.complete(func(h *host.Host) ([]cobra.Completion, error) { return completeBackups(h, toComplete) })
		},
		// The archive to write.
		"gpusplit snapshot": func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return []cobra.Completion{"tar.gz"}, cobra.ShellCompDirectiveFilterFileExt
		},
	}
}

// registerCompletions gives every flag under root that takes a value, and the
// arguments of the commands that take some, their completion functions.
func registerCompletions(root *cobra.Command, g *globals) {
	byFlag, byArgs := flagCompletions(g), argCompletions(g)
	seen := map[*pflag.Flag]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, set := range []*pflag.FlagSet{c.PersistentFlags(), c.Flags()} {
			set.VisitAll(func(f *pflag.Flag) {
				fn, ok := byFlag[f.Name]
				if seen[f] || !ok || f.Value.Type() == "bool" {
					return
				}
				seen[f] = true
				// The only error is a flag registered twice, which seen rules out.
				_ = c.RegisterFlagCompletionFunc(f.Name, fn)
			})
		}
		switch fn, ok := byArgs[c.CommandPath()]; {
		case ok:
			c.ValidArgsFunction = fn
		case c.ValidArgsFunction == nil && len(c.ValidArgs) == 0 && takesNoArgs(c):
			// Without this the shell offers the files of the current directory.
			c.ValidArgsFunction = cobra.NoFileCompletions
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// takesNoArgs says whether c refuses any positional argument.
func takesNoArgs(c *cobra.Command) bool {
	return c.Runnable() && !c.HasSubCommands() && c.Args != nil && c.Args(c, []string{"x"}) != nil
}

// complete opens the host the command line names and runs f on it, within
// completionTimeout. A failure or a timeout offers nothing.
func (g *globals) complete(f func(h *host.Host) ([]cobra.Completion, error)) ([]cobra.Completion, cobra.ShellCompDirective) {
	type result struct {
		comps []cobra.Completion
		err   error
	}
	done := make(chan result, 1)
	go func() {
		h, err := g.host()
		if err != nil {
			done <- result{err: err}
			return
		}
		comps, err := f(h)
		done <- result{comps, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			cobra.CompDebugln("gpusplit: no completions: "+r.err.Error(), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return r.comps, inOrder
	case <-time.After(completionTimeout):
		// The reader is left behind: the completion process ends right after this.
		cobra.CompDebugln(fmt.Sprintf("gpusplit: no completions: reading %s took longer than %s", g.root, completionTimeout), false)
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeOutput completes -o: the output formats.
func completeOutput(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return completionPrefix([]cobra.Completion{
		cobra.CompletionWithDesc("table", "columns for a person, fitted to the terminal"),
		cobra.CompletionWithDesc("wide", "every column, whole"),
		cobra.CompletionWithDesc("json", "one JSON document"),
	}, toComplete), inOrder
}

// completeChecks completes --only, a comma-separated list of doctor check ids.
func completeChecks(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var cands []cobra.Completion
	for _, c := range doctor.Checks {
		cands = append(cands, cobra.CompletionWithDesc(c.ID, c.Title))
	}
	return completeListItem(cands, toComplete), inOrder
}

// completeSelectors offers the selectors that choose among the host's GPUs (those sels
// count as GPUs), as inventory.SelectorChoices gives them. The value is a
// comma-separated list: the selector after the last comma is completed, and those
// already in the list are left out.
func completeSelectors(h *host.Host, sels []pci.Selector, toComplete string) ([]cobra.Completion, error) {
	choices, short, err := inventory.SelectorChoices(h, sels)
	if err != nil {
		return nil, err
	}
	// The short forms only once what is typed has left the domain out, not to offer
	// every GPU twice.
	if part := toComplete[strings.LastIndex(toComplete, ",")+1:]; part != "" && !strings.HasPrefix("0000:", part) && !strings.HasPrefix(part, "0000:") {
		choices = append(choices, short...)
	}
	var cands []cobra.Completion
	for _, c := range choices {
		cands = append(cands, cobra.CompletionWithDesc(c.Value, c.Desc))
	}
	mappings, err := pve.MappingSelectorChoices(h)
	return completeListItem(append(cands, completions(mappings)...), toComplete), err
}

// completeGuests offers the ids of this node's VMs or containers (kind), with their
// names, as pve.GuestChoices lists them.
func completeGuests(h *host.Host, kind, toComplete string) ([]cobra.Completion, error) {
	choices, err := pve.GuestChoices(h, kind, toComplete)
	return completions(choices), err
}

// completeMappings offers the ids of the cluster's PCI mappings, with their descriptions.
func completeMappings(h *host.Host, toComplete string) ([]cobra.Completion, error) {
	choices, err := pve.MappingChoices(h)
	return completionPrefix(completions(choices), toComplete), err
}

// completeBackups offers the backup ids, with the file and when it was replaced.
func completeBackups(h *host.Host, toComplete string) ([]cobra.Completion, error) {
	choices, err := pve.BackupChoices(h)
	return completionPrefix(completions(choices), toComplete), err
}

// completions are pve's choices as cobra offers them.
func completions(choices []pve.Choice) []cobra.Completion {
	var out []cobra.Completion
	for _, c := range choices {
		out = append(out, cobra.CompletionWithDesc(c.Value, c.Desc))
	}
	return out
}

// completeListItem completes the last item of a comma-separated list: the candidates that
// start with what is typed after the last comma, each behind the items already typed,
// leaving out those already in the list.
//
// After a comma the candidates go without descriptions, and a single one comes twice, as
// it is and with a comma after it (the list may end or go on). Both work around bash's
// completion script, which shell-quotes a value before it compares it with the word
// typed: with descriptions it compares a\,b with a,b and offers nothing, and a single
// value is quoted before the part up to its last colon is cut off, so that
// 0000:01:00.0,0000:e would become 0000:01:00.0,0000:0000:01:00.0\,0000:e1:00.0.
func completeListItem(cands []cobra.Completion, toComplete string) []cobra.Completion {
	i := strings.LastIndex(toComplete, ",")
	head, part := toComplete[:i+1], strings.ToLower(toComplete[i+1:])
	typed := strings.Split(strings.ToLower(head), ",")
	var out []cobra.Completion
	for _, c := range cands {
		value, _, _ := strings.Cut(c, "\t")
		if slices.Contains(typed, value) || !strings.HasPrefix(value, part) {
			continue
		}
		if head != "" {
			c = value
		}
		out = append(out, head+c)
	}
	if head != "" && len(out) == 1 {
		out = append(out, out[0]+",")
	}
	return out
}

// completionPrefix keeps the candidates whose value starts with prefix.
func completionPrefix(cands []cobra.Completion, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, c := range cands {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}
