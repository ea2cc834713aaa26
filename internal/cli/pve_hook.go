package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// hookSnippet is the name of gpusplit's shared snippet; a guest's own is hookSnippet-ID.
const hookSnippet = pve.HookSnippet

// maxHookDeadline bounds --deadline: Proxmox waits for a hookscript, and a guest's start
// with it.
const maxHookDeadline = 30 * time.Minute

// pveHookDoc is pve hook install|remove|show -o json (docs/json.md).
type pveHookDoc struct {
	Guest      int    `json:"guest"`
	Kind       string `json:"kind"`
	Hookscript string `json:"hookscript"` // the guest's, after the change
	Chained    string `json:"chained,omitempty"`
	Snippet    string `json:"snippet,omitempty"` // the file, on this node
	// SnippetState is the snippet file on this node: present, missing, new, changed.
	SnippetState string `json:"snippet_state,omitempty"`
	// MadeFor is the guest the snippet was made for, when it is another (a clone's).
	MadeFor  int                `json:"made_for,omitempty"`
	Binary   *persistBinaryJSON `json:"binary,omitempty"`
	Deadline string             `json:"deadline,omitempty"`
	// Removed is the snippet file remove deletes (did delete, with --apply); Kept one it
	// leaves, with UsedBy the guests that still name it.
	Removed string   `json:"removed,omitempty"`
	Kept    string   `json:"kept,omitempty"`
	UsedBy  []string `json:"used_by"`
	// Storage is the snippet's storage; Shared whether every node sees its files.
	Storage string `json:"storage,omitempty"`
	Shared  bool   `json:"shared"`
	// InstallOn are the other nodes where the guest may start and the snippet must be
	// installed too; StorageMissingOn those where its storage is not at all.
	InstallOn        []hookNodeJSON   `json:"install_on"`
	StorageMissingOn []hookNodeJSON   `json:"storage_missing_on"`
	Notes            []string         `json:"notes"`
	Diff             string           `json:"diff"`
	Applied          bool             `json:"applied"`
	Problems         []string         `json:"problems"`
	Files            []pve.FileResult `json:"files"`
}

type hookNodeJSON struct {
	Node string   `json:"node"`
	Why  []string `json:"why"`
}

func newHookDoc(kind string, id int) pveHookDoc {
	return pveHookDoc{Guest: id, Kind: kindName(kind), UsedBy: []string{}, InstallOn: []hookNodeJSON{}, StorageMissingOn: []hookNodeJSON{},
		Notes: []string{}, Problems: []string{}, Files: []pve.FileResult{}}
}

func newPVEHook(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "Make gpusplit hook a guest's hookscript, take it away, or show it",
		Long: `gpusplit hook moves a VM's GPUs at its start and stop (see gpusplit hook --help); Proxmox
runs it as the guest's hookscript, a file in a storage's snippets/ directory, as root, at
every start and stop.

install writes the snippet into a storage of this node that has the snippets content type
(--storage names one; read from /etc/pve/storage.cfg) and sets hookscript: in the guest's
config under Proxmox's locks. The snippet runs the installed gpusplit (--binary, checked
as persist install checks the boot unit's). A guest that has a hookscript already keeps
it: gpusplit's own snippet for that guest (gpusplit-hook-ID, which says the guest it was
made for) runs gpusplit hook and then the old script, in every phase but a pre-start that
gpusplit refused; remove puts the old one back. remove takes gpusplit's hookscript away
and deletes the snippet file once no guest on any node names it (a clone's config names
its original's). show says what the guest has.

Snippets are per node: the guest's config is the cluster's, but a snippet on a storage
that is not shared (dir: local) is on this node alone. install and show name the other
nodes where the guest may start (migration, HA, replication) and the snippet must be
installed too; run install there, or use a shared storage. Without --apply install and
remove change nothing and print what they would do.`,
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

// snippetFile is a gpusplit-named hookscript as it is on this node.
type snippetFile struct {
	vol, storage, name string
	path               string // on this node; "" when its storage is not here
	exists, ours       bool
	script             pve.HookScript
}

// readSnippet reads the hookscript vol, which is gpusplit's by name, on this node.
func readSnippet(h *host.Host, vol string) (snippetFile, error) {
	sf := snippetFile{vol: vol}
	var err error
	if sf.storage, sf.name, err = pve.SnippetVolume(vol); err != nil {
		return sf, err
	}
	if _, dir, err := snippetStorage(h, sf.storage); err == nil {
		sf.path = dir + "/" + sf.name
	}
	if sf.path == "" {
		return sf, nil
	}
	data, err := h.ReadFile(sf.path)
	b := string(data)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return sf, nil
	case err != nil:
		return sf, fmt.Errorf("the snippet %s: %w", sf.path, err)
	}
	sf.exists = true
	sf.script, sf.ours = pve.ParseHookScript(b)
	return sf, nil
}

// isGpusplitVol reports whether a hookscript names a snippet of gpusplit's, by its name:
// whether or not the file is on this node.
func isGpusplitVol(vol string) bool {
	_, name, err := pve.SnippetVolume(vol)
	return err == nil && pve.IsHookSnippetName(name)
}

func newPVEHookShow(g *globals) *cobra.Command {
	var gf guestFlags
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Say whether a guest's hookscript is gpusplit's, what it chains, and where else it must be",
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
			doc := newHookDoc(kind, id)
			doc.Hookscript, _ = guest.Get("hookscript")
			var sf snippetFile
			if isGpusplitVol(doc.Hookscript) {
				if sf, err = readSnippet(h, doc.Hookscript); err != nil {
					return err
				}
				doc.Snippet, doc.Storage = sf.path, sf.storage
				switch {
				case !sf.exists:
					doc.SnippetState = "missing"
				case sf.ours:
					doc.SnippetState = "present"
					doc.Chained, doc.Deadline = sf.script.Chained, sf.script.Deadline
					if sf.script.Guest != 0 && sf.script.Guest != id {
						doc.MadeFor = sf.script.Guest
					}
					if sf.script.Binary != "" {
						bin, _ := checkHookBinary(h, sf.script.Binary, true)
						doc.Binary = &bin
					}
				}
				hookNodes(h, kind, id, sf.storage, &doc)
			}
			if g.json() {
				return g.writeJSON(doc)
			}
			w := g.stdout
			switch {
			case doc.Hookscript == "":
				fmt.Fprintf(w, "%s %d has no hookscript: its GPUs do not follow it (gpusplit pve hook install)\n", doc.Kind, id)
			case doc.Snippet == "" && isGpusplitVol(doc.Hookscript):
				fmt.Fprintf(w, "%s %d runs %s, gpusplit's snippet, whose storage %s holds no snippets on this node: the guest does not start here\n", doc.Kind, id, doc.Hookscript, doc.Storage)
			case !isGpusplitVol(doc.Hookscript):
				fmt.Fprintf(w, "%s %d runs %s, which is not gpusplit's\n", doc.Kind, id, doc.Hookscript)
			case !sf.exists:
				fmt.Fprintf(w, "%s %d runs %s, gpusplit's snippet, which is missing on this node (%s; snippets are per node): the guest does not start here until gpusplit pve hook install %s %d --apply writes it\n",
					doc.Kind, id, doc.Hookscript, doc.Snippet, guestFlag(kind), id)
			case !sf.ours:
				fmt.Fprintf(w, "%s %d runs %s, which is named like gpusplit's snippet but was not written by gpusplit\n", doc.Kind, id, doc.Snippet)
			case doc.Chained != "":
				fmt.Fprintf(w, "%s %d runs gpusplit hook (%s), then %s\n", doc.Kind, id, doc.Hookscript, doc.Chained)
			default:
				fmt.Fprintf(w, "%s %d runs gpusplit hook (%s)\n", doc.Kind, id, doc.Hookscript)
			}
			if doc.MadeFor != 0 {
				fmt.Fprintf(w, "The snippet was made for guest %d (this one's config names it, as a clone's does): gpusplit pve hook install %s %d --apply gives it one of its own.\n", doc.MadeFor, guestFlag(kind), id)
			}
			if b := doc.Binary; b != nil {
				switch {
				case !b.Checked:
					fmt.Fprintf(w, "It runs %s (not checked: a snapshot holds no binaries).\n", b.Path)
				case !b.OK:
					fmt.Fprintf(w, "It runs %s, which fails the check: %s\n", b.Path, strings.Join(b.Problems, "; "))
				default:
					fmt.Fprintf(w, "It runs %s.\n", b.Path)
				}
			}
			if doc.Deadline != "" {
				fmt.Fprintf(w, "It bounds each phase to %s (gpusplit hook --deadline).\n", doc.Deadline)
			}
			printNodes(g, &doc, kind, id)
			return nil
		},
	}
	gf.register(cmd)
	return cmd
}

func guestFlag(kind string) string {
	if kind == pve.LXC {
		return "--ct"
	}
	return "--vm"
}

// checkHookBinary checks the gpusplit a snippet runs as persist checks the boot unit's:
// Proxmox runs it as root at every start and stop. refused is why install will not write
// a snippet that runs it; nil when it passes or cannot be checked (a snapshot).
func checkHookBinary(h *host.Host, path string, named bool) (persistBinaryJSON, error) {
	b, err := persist.CheckBinary(h, path, named)
	out := persistBinaryJSON{Path: path, Resolved: b.Resolved, Problems: []string{}, Notes: append([]string{}, b.Notes...)}
	if out.Resolved == "" {
		out.Resolved = path
	}
	if errors.Is(err, host.ErrReadOnly) {
		return out, nil
	}
	out.Checked = true
	if err == nil {
		out.OK = true
		return out, nil
	}
	var be *persist.BinaryError
	if errors.As(err, &be) {
		out.Problems = append(out.Problems, be.Problems...)
	} else {
		out.Problems = append(out.Problems, err.Error())
	}
	refused := fmt.Errorf("the snippet cannot run %s: %s. Proxmox runs a hookscript as root at every start and stop, so it must be a file only root can change: "+
		"install gpusplit with 'install -o root -g root -m 0755 gpusplit %s', or name such a file with --binary PATH",
		path, strings.Join(out.Problems, "; "), persist.DefaultBinary)
	if exe, e := os.Executable(); e == nil && !named && h.Root() == "/" && exe != path {
		refused = fmt.Errorf("%w (this gpusplit runs from %s; the snippet does not run it from there)", refused, exe)
	}
	return out, refused
}

// hookNodes fills in whether the snippet's storage is shared and the other nodes where
// the guest may start: where the snippet must be installed too, or where its storage is
// not at all.
func hookNodes(h *host.Host, kind string, id int, storage string, doc *pveHookDoc) {
	st, ok := findStorage(h, storage)
	if !ok {
		return
	}
	doc.Shared = st.IsShared()
	_, others, notes, err := pve.GuestNodes(h, kind, id)
	if err != nil {
		doc.Notes = append(doc.Notes, fmt.Sprintf("the other nodes where %s %d may start are not known (%v): a snippet on a storage that is not shared must be installed on each of them", doc.Kind, id, err))
		return
	}
	doc.Notes = append(doc.Notes, notes...)
	install, missing := pve.SnippetNodes(st, others)
	for _, n := range install {
		doc.InstallOn = append(doc.InstallOn, hookNodeJSON{n.Node, n.Why})
	}
	for _, n := range missing {
		doc.StorageMissingOn = append(doc.StorageMissingOn, hookNodeJSON{n.Node, n.Why})
	}
}

func findStorage(h *host.Host, id string) (pve.Storage, bool) {
	data, err := h.ReadString(pve.StoragePath)
	if err != nil {
		return pve.Storage{}, false
	}
	sts, err := pve.ParseStorage(data)
	if err != nil {
		return pve.Storage{}, false
	}
	for _, s := range sts {
		if s.ID == id {
			return s, true
		}
	}
	return pve.Storage{}, false
}

// printNodes says where else the snippet must be.
func printNodes(g *globals, doc *pveHookDoc, kind string, id int) {
	if doc.Storage == "" {
		return
	}
	w := g.stdout
	label := func(ns []hookNodeJSON) string {
		var parts []string
		for _, n := range ns {
			parts = append(parts, n.Node+" ("+strings.Join(n.Why, "; ")+")")
		}
		return strings.Join(parts, ", ")
	}
	if doc.Shared {
		fmt.Fprintf(w, "Storage %s is shared: its snippet serves every node it is on.\n", doc.Storage)
	} else {
		fmt.Fprintf(w, "Snippets are per node: storage %s is this node's own, so the snippet serves this node only.\n", doc.Storage)
	}
	if len(doc.InstallOn) > 0 {
		fmt.Fprintf(w, "note: %s %d may also start on %s: install the snippet there too (gpusplit pve hook install %s %d --apply on each), or use a shared storage (--storage).\n",
			doc.Kind, id, label(doc.InstallOn), guestFlag(kind), id)
	}
	if len(doc.StorageMissingOn) > 0 {
		fmt.Fprintf(w, "note: %s %d may also start on %s, where storage %s is not: it does not start there with this hookscript.\n", doc.Kind, id, label(doc.StorageMissingOn), doc.Storage)
	}
	for _, n := range doc.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func newPVEHookChange(g *globals, verb string) *cobra.Command {
	var gf guestFlags
	var storage, binary, deadline string
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
			var d time.Duration
			if deadline != "" {
				if d, err = time.ParseDuration(deadline); err != nil || d <= 0 || d > maxHookDeadline {
					return fmt.Errorf("--deadline %q: give a duration above 0 and at most %s, such as 5m", deadline, maxHookDeadline)
				}
			}
			if apply {
				if err := needRoot(g, "pve hook "+verb+" --apply", "it writes /etc/pve and a storage's snippets", pve.WriteDirs...); err != nil {
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
			doc := newHookDoc(kind, id)
			current, _ := guest.Get("hookscript")
			var ch hookChange
			var refused error // a binary install must not let the snippet run
			switch verb {
			case "install":
				path := binary
				if path == "" {
					path = persist.DefaultBinary
				}
				bin, berr := checkHookBinary(h, path, binary != "")
				doc.Binary, refused = &bin, berr
				if d > 0 {
					doc.Deadline = d.String()
				}
				if ch, err = planInstall(h, kind, id, current, storage, path, doc.Deadline); err != nil {
					return err
				}
				if refused != nil && apply {
					return fmt.Errorf("%w; nothing was changed", refused)
				}
				doc.Chained, doc.MadeFor = ch.chained, ch.madeFor
				guest.Set("hookscript", ch.vol)
			case "remove":
				if ch, err = planRemove(h, kind, id, current); err != nil {
					return err
				}
				doc.Chained = ch.chained
				if ch.chained != "" {
					guest.Set("hookscript", ch.chained)
				} else {
					guest.Delete("hookscript")
				}
			}
			doc.Hookscript, _ = guest.Get("hookscript")
			doc.Notes = append(doc.Notes, ch.notes...)
			doc.Snippet, doc.Storage, doc.SnippetState = ch.file, ch.storage, ch.state
			// The snippet the guest named before, when the change leaves it: it goes
			// once no guest config on any node names it (a clone's names its original's).
			if ch.prev.exists && (verb == "remove" || ch.prev.path != ch.file) {
				users, notes, err := pve.SnippetUsers(h, ch.prev.vol)
				if err != nil {
					return err
				}
				doc.Notes = append(doc.Notes, notes...)
				if users = pve.OthersThan(users, id); len(users) > 0 {
					doc.Kept = ch.prev.path
					for _, u := range users {
						doc.UsedBy = append(doc.UsedBy, u.Label())
					}
				} else {
					doc.Removed = ch.prev.path
				}
			}
			path := pve.GuestPath(kind, id)
			doc.Diff = pve.Diff(path, old, guest.String()) + ch.diff
			edit := pve.Edit{Path: path, Old: old, New: guest.String()}
			var werr error
			if apply {
				werr = writeHook(h, ch.write, ch.body, func() error {
					var err error
					doc.Files, doc.Problems, doc.Applied, err = pve.WriteGuest(h, "pve hook "+verb+" --apply", true, edit)
					return err
				})
				if werr == nil && doc.Removed != "" {
					if p, err := h.OSPath(doc.Removed); err == nil {
						if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
							doc.Notes = append(doc.Notes, fmt.Sprintf("the snippet %s, which no guest names any more, was not removed: %v", doc.Removed, err))
						}
					}
				}
			} else {
				doc.Files, doc.Problems, doc.Applied, werr = pve.WriteGuest(h, "pve hook "+verb, false, edit)
				if refused != nil {
					doc.Problems = append(doc.Problems, refused.Error())
					werr = pve.ErrWouldStop
				}
			}
			if doc.Problems == nil {
				doc.Problems = []string{}
			}
			if doc.Files == nil {
				doc.Files = []pve.FileResult{}
			}
			if verb == "install" && doc.Storage != "" {
				hookNodes(h, kind, id, doc.Storage, &doc)
			}
			if g.json() {
				if err := g.writeJSON(doc); err != nil {
					return err
				}
				return pveErr(werr)
			}
			w := g.stdout
			if doc.Diff == "" && doc.Removed == "" && len(doc.Problems) == 0 {
				fmt.Fprintf(w, "%s %d: nothing to change (hookscript: %s)\n", doc.Kind, id, orNone(doc.Hookscript))
			} else {
				fmt.Fprint(w, doc.Diff)
				switch {
				case doc.Removed != "" && apply && werr == nil:
					fmt.Fprintf(w, "removed %s: no guest names it any more.\n", doc.Removed)
				case doc.Removed != "":
					fmt.Fprintf(w, "--apply removes %s: no guest names it any more.\n", doc.Removed)
				}
				printGuestWrite(g, h, path, apply, doc.Applied, doc.Problems)
			}
			if doc.Kept != "" {
				fmt.Fprintf(w, "%s is kept: %s still %s it.\n", doc.Kept, strings.Join(doc.UsedBy, ", "), map[bool]string{true: "names", false: "name"}[len(doc.UsedBy) == 1])
			}
			if doc.Binary != nil {
				g.warn(doc.Binary.Notes)
			}
			if verb == "install" {
				if apply && doc.Applied && kind == pve.QEMU {
					fmt.Fprintf(w, "VM %d's GPUs follow it from its next start on this node (gpusplit hook %d pre-start).\n", id, id)
				}
				printNodes(g, &doc, kind, id)
			} else {
				for _, n := range doc.Notes {
					fmt.Fprintf(w, "note: %s\n", n)
				}
			}
			return pveErr(werr)
		},
	}
	gf.register(cmd)
	if verb == "install" {
		cmd.Flags().StringVar(&storage, "storage", "", "the storage for the snippet (default: the one the guest's gpusplit snippet is on, else the first of this node with the snippets content type)")
		cmd.Flags().StringVar(&binary, "binary", "", "the gpusplit the snippet runs, as the host sees it (default "+persist.DefaultBinary+"): root's, writable by root alone, in directories only root can change")
		cmd.Flags().StringVar(&deadline, "deadline", "", "pass gpusplit hook --deadline DURATION: a bound on each phase (at most 30m; default: none passed)")
	}
	cmd.Flags().BoolVar(&apply, "apply", false, "write the change")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the change and write nothing (the default)")
	return cmd
}

// hookChange is what install or remove does besides the config line.
type hookChange struct {
	vol           string // the hookscript install sets
	storage, file string // the snippet's storage and file on this node
	state         string // the snippet file: present, missing, new, changed
	write, body   string // the file to write, and what; "" when it is as it must be
	diff          string // the snippet's part of the diff
	chained       string // the hookscript the snippet runs after gpusplit's (install), or that remove puts back
	madeFor       int    // the guest the guest's old snippet was made for, when another
	prev          snippetFile
	notes         []string
}

// planInstall works out the snippet for a guest whose hookscript is current: the chain
// never runs gpusplit's snippet (itself or another) nor a file missing on this node.
func planInstall(h *host.Host, kind string, id int, current, storage, binary, deadline string) (hookChange, error) {
	var ch hookChange
	label := fmt.Sprintf("%s %d", kindName(kind), id)
	keepName := "" // the name of a snippet of gpusplit's missing here: written again as it is named
	switch {
	case current == "":
	case isGpusplitVol(current):
		sf, err := readSnippet(h, current)
		if err != nil {
			return ch, err
		}
		ch.prev = sf
		switch {
		case sf.exists && !sf.ours:
			return ch, fmt.Errorf("%s's hookscript %s is named like gpusplit's snippet, but %s was not written by gpusplit: rename that file and set the hookscript to the new name (qm set %d --hookscript <storage>:snippets/<new name>), then install again", label, current, sf.path, id)
		case sf.exists:
			ch.chained = sf.script.Chained
			if sf.script.Guest != 0 && sf.script.Guest != id {
				ch.madeFor = sf.script.Guest
			}
			if storage == "" {
				storage = sf.storage
			}
		default:
			// Written on another node, or lost: gpusplit's all the same. Its name stays,
			// since the config is every node's.
			if sf.path == "" {
				return ch, fmt.Errorf("%s's hookscript %s is gpusplit's snippet, but storage %s holds no snippets on this node: give it the snippets content type here, or install on a node that has it", label, current, sf.storage)
			}
			if storage != "" && storage != sf.storage {
				return ch, fmt.Errorf("%s's hookscript %s is missing on this node: install writes it again on storage %s, as the config (every node's) names it; --storage %s would change it for every node", label, current, sf.storage, storage)
			}
			storage, keepName = sf.storage, sf.name
			if sf.name != hookSnippet {
				ch.notes = append(ch.notes, fmt.Sprintf("%s is missing on this node (snippets are per node): it is written again here, running gpusplit hook only; if on the node it was installed on it runs a script of the guest's after gpusplit hook, copy that node's %s here instead", current, sf.path))
			}
		}
	default:
		ch.chained = current
	}
	if ch.chained != "" {
		if err := checkChain(h, label, id, ch.chained); err != nil {
			return ch, err
		}
	}
	vol, dir, err := snippetStorage(h, storage)
	if err != nil {
		return ch, err
	}
	name := keepName
	if name == "" {
		name = pve.SnippetName(id, ch.chained != "" || deadline != "")
	}
	script := pve.HookScript{Binary: binary, Deadline: deadline, Chained: ch.chained}
	if name != hookSnippet {
		script.Guest, _ = strconv.Atoi(strings.TrimPrefix(name, hookSnippet+"-"))
	}
	if ch.chained != "" {
		if script.ChainedPath, err = volumePath(h, ch.chained); err != nil {
			return ch, err
		}
	}
	ch.vol, ch.storage, ch.file = vol+":snippets/"+name, vol, dir+"/"+name
	if ch.chained != "" && sameFile(h, ch.file, script.ChainedPath) {
		return ch, fmt.Errorf("%s's hookscript %s is the file gpusplit's snippet %s would be: the snippet would run itself; set the guest's own script under another name (qm set %d --hookscript <storage>:snippets/<its file>), then install again", label, ch.chained, ch.file, id)
	}
	body := script.Render()
	prevData, err := h.ReadFile(ch.file)
	prev := string(prevData)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		ch.state, ch.write, ch.body = "new", ch.file, body
		ch.diff = fmt.Sprintf("+++ %s (new, executable)\n%s", ch.file, indent(body))
	case err != nil:
		return ch, fmt.Errorf("the snippet %s: %w", ch.file, err)
	case prev == body:
		ch.state = "present"
	default:
		if _, ours := pve.ParseHookScript(prev); !ours {
			return ch, fmt.Errorf("%s exists and was not written by gpusplit: move it away (it is not %s's hookscript), then install again", ch.file, label)
		}
		ch.state, ch.write, ch.body = "changed", ch.file, body
		ch.diff = pve.Diff(ch.file, prev, body)
		if users, _, err := pve.SnippetUsers(h, ch.vol); err == nil {
			if others := pve.OthersThan(users, id); len(others) > 0 {
				var ls []string
				for _, u := range others {
					ls = append(ls, u.Label())
				}
				ch.notes = append(ch.notes, fmt.Sprintf("%s is the hookscript of %s too: they run the new snippet as well", ch.vol, strings.Join(ls, ", ")))
			}
		}
	}
	return ch, nil
}

// checkChain refuses a script to chain that would loop or lead nowhere: a snippet of
// gpusplit's, or a file missing on this node.
func checkChain(h *host.Host, label string, id int, chained string) error {
	_, name, err := pve.SnippetVolume(chained)
	if err != nil {
		return fmt.Errorf("%s's hookscript %s: %w; remove it or fix it first", label, chained, err)
	}
	if pve.IsHookSnippetName(name) {
		return fmt.Errorf("%s's snippet chains %s, a snippet of gpusplit's: gpusplit hook would run twice, or the snippet itself again; remove gpusplit's hookscript (gpusplit pve hook remove), set the guest's own script back, then install again", label, chained)
	}
	path, err := volumePath(h, chained)
	if err != nil {
		return fmt.Errorf("%s's hookscript %s: %w; remove it or fix it first", label, chained, err)
	}
	fi, err := statIn(h, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s's hookscript %s is missing on this node (%s; snippets are per node, the config is every node's): copy it here from the node it was written on, or take it away (qm set %d --delete hookscript), then install again", label, chained, path, id)
	case err != nil:
		return fmt.Errorf("%s's hookscript %s: %w", label, chained, err)
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s's hookscript %s (%s) is not an executable file, so Proxmox cannot run it either: chmod 0755 %s, then install again", label, chained, path, path)
	}
	return nil
}

func statIn(h *host.Host, p string) (fs.FileInfo, error) {
	op, err := h.OSPath(p)
	if err != nil {
		if !h.Exists(p) {
			return nil, fs.ErrNotExist
		}
		return readOnlyInfo{}, nil // a snapshot: it is there, its mode unknown
	}
	return os.Stat(op)
}

// readOnlyInfo stands for a file of a snapshot, taken to be executable.
type readOnlyInfo struct{ fs.FileInfo }

func (readOnlyInfo) Mode() fs.FileMode { return 0o755 }

// sameFile reports whether two paths of the host are one file.
func sameFile(h *host.Host, a, b string) bool {
	if a == b {
		return true
	}
	pa, err1 := h.OSPath(a)
	pb, err2 := h.OSPath(b)
	if err1 != nil || err2 != nil {
		return false
	}
	fa, err1 := os.Stat(pa)
	fb, err2 := os.Stat(pb)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// planRemove works out what remove puts back for a guest whose hookscript is current.
func planRemove(h *host.Host, kind string, id int, current string) (hookChange, error) {
	var ch hookChange
	label := fmt.Sprintf("%s %d", kindName(kind), id)
	if current == "" {
		return ch, nil
	}
	if !isGpusplitVol(current) {
		return ch, fmt.Errorf("%s's hookscript %s is not gpusplit's: nothing to remove", label, current)
	}
	sf, err := readSnippet(h, current)
	if err != nil {
		return ch, err
	}
	ch.prev, ch.storage, ch.file = sf, sf.storage, sf.path
	switch {
	case sf.exists && !sf.ours:
		return ch, fmt.Errorf("%s's hookscript %s is named like gpusplit's snippet, but %s was not written by gpusplit: nothing to remove", label, current, sf.path)
	case sf.exists:
		ch.state = "present"
		ch.chained = sf.script.Chained
		if ch.chained != "" && isGpusplitVol(ch.chained) {
			ch.notes = append(ch.notes, fmt.Sprintf("the snippet chained %s, gpusplit's own: it is not put back", ch.chained))
			ch.chained = ""
		}
	case sf.name == hookSnippet:
		// The shared snippet never chains: nothing is lost by taking it away.
		ch.state = "missing"
	default:
		return ch, fmt.Errorf("%s's hookscript %s is missing on this node (%s; snippets are per node), so what it chains, if anything, is not known here: run remove on the node it was installed on, or set the hookscript yourself (qm set %d --delete hookscript, or --hookscript <the guest's own script>)", label, current, orNone(sf.path), id)
	}
	return ch, nil
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
	id, name, err := pve.SnippetVolume(vol)
	if err != nil {
		return "", err
	}
	_, dir, err := snippetStorage(h, id)
	if err != nil {
		return "", err
	}
	return dir + "/" + name, nil
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

// shellQuote quotes a word for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
