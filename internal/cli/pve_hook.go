package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// hookSnippet is the name of gpusplit's snippet: Proxmox calls a hookscript with the
// guest's id and the phase only, so the snippet hands both to gpusplit hook.
const hookSnippet = "gpusplit-hook"

// hookBinary is where the packages install gpusplit.
const hookBinary = "/usr/bin/gpusplit"

// chainMark starts the line of a chained snippet that names the hookscript it runs after
// gpusplit's: what remove puts back.
const chainMark = "# chained: "

// pveHookDoc is pve hook install|remove|show -o json (docs/json.md).
type pveHookDoc struct {
	Guest      int              `json:"guest"`
	Kind       string           `json:"kind"`
	Hookscript string           `json:"hookscript"` // the guest's, after the change
	Chained    string           `json:"chained,omitempty"`
	Snippet    string           `json:"snippet,omitempty"` // the file, on this node
	Diff       string           `json:"diff"`
	Applied    bool             `json:"applied"`
	Problems   []string         `json:"problems"`
	Files      []pve.FileResult `json:"files"`
}

func newPVEHook(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "Make gpusplit hook a guest's hookscript, take it away, or show it",
		Long: `gpusplit hook moves a VM's GPUs at its start and stop (see gpusplit hook --help); Proxmox
runs it as the guest's hookscript, a file in a storage's snippets/ directory.

install writes the snippet into a storage of this node that has the snippets content type
(--storage names one; read from /etc/pve/storage.cfg) and sets hookscript: in the guest's
config under Proxmox's locks. A guest that has a hookscript already keeps it: gpusplit's
own snippet for that guest runs gpusplit hook first and then the old script, and remove
puts the old one back. remove takes gpusplit's hookscript away; show says what the guest
has. Without --apply install and remove change nothing and print what they would do.`,
	}
	cmd.AddCommand(newPVEHookChange(g, "install"), newPVEHookChange(g, "remove"), newPVEHookShow(g))
	return cmd
}

// guestFlags are --vm and --ct: the guest a command is about.
type guestFlags struct{ vm, ct int }

func (f *guestFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.vm, "vm", 0, "the VM")
	cmd.Flags().IntVar(&f.ct, "ct", 0, "the container")
}

func (f *guestFlags) guest() (string, int, error) {
	switch {
	case f.vm != 0 && f.ct != 0:
		return "", 0, errors.New("--vm and --ct name two guests; give one")
	case f.vm != 0:
		return pve.QEMU, f.vm, nil
	case f.ct != 0:
		return pve.LXC, f.ct, nil
	}
	return "", 0, errors.New("--vm ID or --ct ID names the guest")
}

func newPVEHookShow(g *globals) *cobra.Command {
	var gf guestFlags
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Say whether a guest's hookscript is gpusplit's, and what it chains",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, id, err := gf.guest()
			if err != nil {
				return err
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			guest, err := pve.ReadGuest(h, kind, id)
			if err != nil {
				return err
			}
			doc := pveHookDoc{Guest: id, Kind: kindName(kind), Problems: []string{}, Files: []pve.FileResult{}}
			doc.Hookscript, _ = guest.Get("hookscript")
			if p, ok := ownSnippet(h, doc.Hookscript); ok {
				doc.Snippet = p
				doc.Chained = chainedOf(h, p)
			}
			if g.json() {
				return g.writeJSON(doc)
			}
			switch {
			case doc.Hookscript == "":
				fmt.Fprintf(g.stdout, "%s %d has no hookscript: its GPUs do not follow it (gpusplit pve hook install)\n", doc.Kind, id)
			case doc.Snippet == "":
				fmt.Fprintf(g.stdout, "%s %d runs %s, which is not gpusplit's\n", doc.Kind, id, doc.Hookscript)
			case doc.Chained != "":
				fmt.Fprintf(g.stdout, "%s %d runs gpusplit hook (%s), then %s\n", doc.Kind, id, doc.Hookscript, doc.Chained)
			default:
				fmt.Fprintf(g.stdout, "%s %d runs gpusplit hook (%s)\n", doc.Kind, id, doc.Hookscript)
			}
			return nil
		},
	}
	gf.register(cmd)
	return cmd
}

func newPVEHookChange(g *globals, verb string) *cobra.Command {
	var gf guestFlags
	var storage string
	var apply, dryRun bool
	short := map[string]string{
		"install": "Make gpusplit hook the guest's hookscript, chaining one it has (diff; --apply writes)",
		"remove":  "Take gpusplit hook away from the guest, putting back a hookscript it chained (diff; --apply writes)",
	}[verb]
	cmd := &cobra.Command{
		Use:   verb,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, id, err := gf.guest()
			if err != nil {
				return err
			}
			if apply && dryRun {
				return errors.New("--apply and --dry-run contradict each other; use one")
			}
			if apply {
				if err := needRoot(g, "pve hook "+verb+" --apply", "it writes /etc/pve and a storage's snippets"); err != nil {
					return err
				}
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			guest, err := pve.ReadGuest(h, kind, id)
			if err != nil {
				return err
			}
			old := guest.String()
			doc := pveHookDoc{Guest: id, Kind: kindName(kind)}
			current, _ := guest.Get("hookscript")
			var snippet, body string // the file to write, and what
			var remove string        // the file to remove
			switch verb {
			case "install":
				if _, ok := ownSnippet(h, current); ok {
					doc.Hookscript, doc.Snippet = current, mustOwn(h, current)
					break
				}
				vol, dir, err := snippetStorage(h, storage)
				if err != nil {
					return err
				}
				name := hookSnippet
				body = "#!/bin/sh\n# gpusplit pve hook install: the guest's GPUs follow it (gpusplit hook --help).\nexec " + hookBinary + " hook \"$@\"\n"
				if current != "" {
					// The guest's own script keeps running, after gpusplit's.
					path, err := volumePath(h, current)
					if err != nil {
						return fmt.Errorf("%s %d's hookscript %s: %w; remove it or fix it first", doc.Kind, id, current, err)
					}
					name = fmt.Sprintf("%s-%d", hookSnippet, id)
					body = "#!/bin/sh\n# gpusplit pve hook install: the guest's GPUs follow it, then its own hookscript runs.\n" +
						chainMark + current + "\n" + hookBinary + " hook \"$@\" || exit $?\nexec " + shellQuote(path) + " \"$@\"\n"
					doc.Chained = current
				}
				snippet = dir + "/" + name
				doc.Snippet = snippet
				doc.Hookscript = vol + ":snippets/" + name
				guest.Set("hookscript", doc.Hookscript)
			case "remove":
				p, ok := ownSnippet(h, current)
				if !ok {
					if current == "" {
						doc.Problems = []string{}
						break
					}
					return fmt.Errorf("%s %d's hookscript %s is not gpusplit's: nothing to remove", doc.Kind, id, current)
				}
				if chained := chainedOf(h, p); chained != "" {
					guest.Set("hookscript", chained)
					doc.Chained = chained
					remove = p // the guest's own chain snippet
				} else {
					guest.Delete("hookscript")
				}
				doc.Hookscript, _ = guest.Get("hookscript")
			}
			path := pve.GuestPath(kind, id)
			doc.Diff = pve.Diff(path, old, guest.String())
			if snippet != "" && !apply {
				doc.Diff += fmt.Sprintf("+++ %s (new, executable)\n%s", snippet, indent(body))
			}
			edit := pve.Edit{Path: path, Old: old, New: guest.String()}
			var werr error
			if apply {
				werr = writeHook(h, snippet, body, func() error {
					var err error
					doc.Files, doc.Problems, doc.Applied, err = writeGuest(h, "pve hook "+verb+" --apply", true, edit)
					return err
				})
				if werr == nil && remove != "" {
					if p, err := h.OSPath(remove); err == nil {
						os.Remove(p)
					}
				}
			} else {
				doc.Files, doc.Problems, doc.Applied, werr = writeGuest(h, "pve hook "+verb, false, edit)
			}
			if doc.Problems == nil {
				doc.Problems = []string{}
			}
			if doc.Files == nil {
				doc.Files = []pve.FileResult{}
			}
			if g.json() {
				if err := g.writeJSON(doc); err != nil {
					return err
				}
				return werr
			}
			if doc.Diff == "" {
				fmt.Fprintf(g.stdout, "%s %d: nothing to change (hookscript: %s)\n", doc.Kind, id, orNone(doc.Hookscript))
				return werr
			}
			fmt.Fprint(g.stdout, doc.Diff)
			printGuestWrite(g, h, path, apply, doc.Applied, doc.Problems)
			if apply && doc.Applied && verb == "install" && kind == pve.QEMU {
				fmt.Fprintf(g.stdout, "VM %d's GPUs follow it from its next start (gpusplit hook %d pre-start); a shared storage's snippet serves every node, a local one must be installed on each node the VM may start on.\n", id, id)
			}
			return werr
		},
	}
	gf.register(cmd)
	if verb == "install" {
		cmd.Flags().StringVar(&storage, "storage", "", "the storage for the snippet (default: the first of this node with the snippets content type)")
	}
	cmd.Flags().BoolVar(&apply, "apply", false, "write the change")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the change and write nothing (the default)")
	return cmd
}

// writeHook writes the snippet, then the guest's config through commit; when the config
// is not written, the snippet is put back as it was.
func writeHook(h *host.Host, snippet, body string, commit func() error) error {
	if snippet == "" {
		return commit()
	}
	p, err := h.OSPath(snippet)
	if err != nil {
		return err
	}
	prev, rerr := os.ReadFile(p)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("the snippet %s: %w; nothing was changed", snippet, err)
	}
	if err := atomicfile.Write(p, []byte(body), 0o755); err != nil {
		return fmt.Errorf("the snippet %s: %w; nothing was changed", snippet, err)
	}
	if err := commit(); err != nil {
		if errors.Is(rerr, fs.ErrNotExist) {
			os.Remove(p)
		} else if rerr == nil {
			atomicfile.Write(p, prev, 0o755)
		}
		return fmt.Errorf("%w (the snippet %s was put back as it was)", err, snippet)
	}
	return nil
}

// snippetStorage picks the storage for the snippet: the one named, or the first of this
// node that holds snippets; its volume prefix and directory.
func snippetStorage(h *host.Host, want string) (string, string, error) {
	data, err := h.ReadString(pve.StoragePath)
	if err != nil {
		return "", "", fmt.Errorf("reading %s: %w", pve.StoragePath, err)
	}
	sts, err := pve.ParseStorage(data)
	if err != nil {
		return "", "", err
	}
	node, err := pve.NodeName(h)
	if err != nil {
		return "", "", err
	}
	for _, s := range sts {
		if want != "" && s.ID != want {
			continue
		}
		if dir, ok := s.SnippetsDir(node); ok {
			return s.ID, dir, nil
		}
		if want != "" {
			return "", "", fmt.Errorf("storage %s cannot hold snippets on node %s: it needs a file-based type (dir, nfs, cifs, cephfs, btrfs), the snippets content type (pvesm set %s --content <its content>,snippets), and to be enabled on this node", want, node, want)
		}
	}
	if want != "" {
		return "", "", fmt.Errorf("no storage %s in %s", want, pve.StoragePath)
	}
	return "", "", fmt.Errorf("no storage of node %s holds snippets: enable the content type on one, e.g. pvesm set local --content iso,vztmpl,backup,snippets", node)
}

// volumePath is the file of a snippet volume ("local:snippets/x.sh") on this node.
func volumePath(h *host.Host, vol string) (string, error) {
	id, rest, ok := strings.Cut(vol, ":")
	name, isSnippet := strings.CutPrefix(rest, "snippets/")
	if !ok || !isSnippet || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%q is not a snippet volume (<storage>:snippets/<file>)", vol)
	}
	_, dir, err := snippetStorage(h, id)
	if err != nil {
		return "", err
	}
	return dir + "/" + name, nil
}

// ownSnippet returns the file of a hookscript that is gpusplit's snippet.
func ownSnippet(h *host.Host, vol string) (string, bool) {
	if vol == "" {
		return "", false
	}
	_, rest, _ := strings.Cut(vol, ":")
	name := strings.TrimPrefix(rest, "snippets/")
	if name != hookSnippet && !strings.HasPrefix(name, hookSnippet+"-") {
		return "", false
	}
	p, err := volumePath(h, vol)
	if err != nil {
		return "", false
	}
	b, err := h.ReadString(p)
	if err != nil || !strings.Contains(b, "gpusplit pve hook install") {
		return "", false
	}
	return p, true
}

func mustOwn(h *host.Host, vol string) string { p, _ := ownSnippet(h, vol); return p }

// chainedOf returns the hookscript a chain snippet runs after gpusplit's.
func chainedOf(h *host.Host, p string) string {
	b, err := h.ReadString(p)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(b, "\n") {
		if v, ok := strings.CutPrefix(line, chainMark); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func kindName(kind string) string {
	if kind == pve.LXC {
		return "container"
	}
	return "VM"
}

func indent(body string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimSuffix(body, "\n"), "\n") {
		b.WriteString("+" + l)
	}
	return b.String() + "\n"
}

// shellQuote quotes a path for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
