package pve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/persist"
)

// MaxHookDeadline bounds the deadline a snippet passes to gpusplit hook: Proxmox waits
// for a hookscript, and a guest's start with it.
const MaxHookDeadline = 30 * time.Minute

// HookReport is what pve hook install, remove or show found of a guest's hookscript, and
// what install or remove changed (docs/json.md).
type HookReport struct {
	Guest      int    `json:"guest"`
	Kind       string `json:"kind"`
	Hookscript string `json:"hookscript"` // the guest's, after the change
	Chained    string `json:"chained,omitempty"`
	Snippet    string `json:"snippet,omitempty"` // the file, on this node
	// SnippetState is the snippet file on this node: present, missing, new, changed; ""
	// for a file named like gpusplit's that gpusplit did not write.
	SnippetState string `json:"snippet_state,omitempty"`
	// MadeFor is the guest the snippet was made for, when it is another (a clone's).
	MadeFor  int                   `json:"made_for,omitempty"`
	Binary   *persist.BinaryReport `json:"binary,omitempty"`
	Deadline string                `json:"deadline,omitempty"`
	// Removed is the snippet file remove deletes (did delete, with apply); Kept one it
	// leaves, with UsedBy the guests that still name it.
	Removed string   `json:"removed,omitempty"`
	Kept    string   `json:"kept,omitempty"`
	UsedBy  []string `json:"used_by"`
	// Storage is the snippet's storage; Shared whether every node sees its files.
	Storage string `json:"storage,omitempty"`
	Shared  bool   `json:"shared"`
	// InstallOn are the other nodes where the guest may start and the snippet must be
	// installed too; StorageMissingOn those where its storage is not at all.
	InstallOn        []HookNode   `json:"install_on"`
	StorageMissingOn []HookNode   `json:"storage_missing_on"`
	Notes            []string     `json:"notes"`
	Diff             string       `json:"diff"`
	Applied          bool         `json:"applied"`
	Problems         []string     `json:"problems"`
	Files            []FileResult `json:"files"`
	// Refused is why a check of install found that the binary stops it: a reason for
	// ErrWouldStop besides Problems.
	Refused *BinaryRefusedError `json:"-"`
	// old is the guest's config as it was read, for Shown.
	old string
}

// HookNode is another node where the guest may start, and why.
type HookNode struct {
	Node string   `json:"node"`
	Why  []string `json:"why"`
}

// HookOptions are how install or remove runs.
type HookOptions struct {
	// Storage is the storage for install's snippet: "" is the one the guest's snippet of
	// gpusplit's is on, else the first of this node that holds snippets.
	Storage string
	// Binary is the gpusplit install's snippet runs; "" is persist.DefaultBinary.
	Binary string
	// Deadline is what install's snippet passes to gpusplit hook --deadline; 0 passes
	// none.
	Deadline time.Duration
	// Apply writes the change; without it, what would stop it is checked.
	Apply bool
	// Shown is the check a person saw and confirmed: with Apply, a change that differs
	// now, or a config changed since, writes nothing (*ShownError). nil writes whatever
	// the change is.
	Shown *HookReport
	// Command names what writes, for the backups.
	Command string
}

// KindName is "VM" or "container".
func KindName(kind string) string {
	if kind == LXC {
		return "container"
	}
	return "VM"
}

func newHookReport(kind string, id int) *HookReport {
	return &HookReport{Guest: id, Kind: KindName(kind), UsedBy: []string{}, InstallOn: []HookNode{}, StorageMissingOn: []HookNode{},
		Notes: []string{}, Problems: []string{}, Files: []FileResult{}}
}

// IsHookVolume reports whether a hookscript names a snippet of gpusplit's, by its name:
// whether or not the file is on this node.
func IsHookVolume(vol string) bool {
	_, name, err := SnippetVolume(vol)
	return err == nil && IsHookSnippetName(name)
}

// snippetFile is a gpusplit-named hookscript as it is on this node.
type snippetFile struct {
	vol, storage, name string
	path               string // on this node; "" when its storage is not here
	exists, ours       bool
	script             HookScript
}

// readSnippet reads the hookscript vol, which is gpusplit's by name, on this node.
func readSnippet(h *host.Host, vol string) (snippetFile, error) {
	sf := snippetFile{vol: vol}
	var err error
	if sf.storage, sf.name, err = SnippetVolume(vol); err != nil {
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
	sf.script, sf.ours = ParseHookScript(b)
	return sf, nil
}

// ShowHook says what a guest's hookscript is: whether it is gpusplit's snippet, the
// snippet's state on this node, what it chains and runs, and the other nodes where it
// must be too.
func ShowHook(h *host.Host, kind string, id int) (*HookReport, error) {
	guest, err := ReadGuest(h, kind, id)
	if err != nil {
		return nil, err
	}
	rep := newHookReport(kind, id)
	rep.Hookscript, _ = guest.Get("hookscript")
	if !IsHookVolume(rep.Hookscript) {
		return rep, nil
	}
	sf, err := readSnippet(h, rep.Hookscript)
	if err != nil {
		return nil, err
	}
	rep.Snippet, rep.Storage = sf.path, sf.storage
	switch {
	case !sf.exists:
		rep.SnippetState = "missing"
	case sf.ours:
		rep.SnippetState = "present"
		rep.Chained, rep.Deadline = sf.script.Chained, sf.script.Deadline
		if sf.script.Guest != 0 && sf.script.Guest != id {
			rep.MadeFor = sf.script.Guest
		}
		if sf.script.Binary != "" {
			bin, _ := checkHookBinary(h, sf.script.Binary, true)
			rep.Binary = &bin
		}
	}
	hookNodes(h, kind, id, sf.storage, rep)
	return rep, nil
}

// BinaryRefusedError is why install will not write a snippet that runs Path: it fails
// the check persist makes of the boot unit's binary (Problems), and Proxmox runs a
// hookscript as root at every start and stop. RunsFrom is where this gpusplit runs
// from, when the snippet would run another file.
type BinaryRefusedError struct {
	Path     string
	Problems []string
	RunsFrom string
}

func (e *BinaryRefusedError) Error() string { return e.Message("") }

// Message is the refusal with more ways out after the first (", or ...").
func (e *BinaryRefusedError) Message(more string) string {
	s := fmt.Sprintf("the snippet cannot run %s: %s. Proxmox runs a hookscript as root at every start and stop, so it must be a file only root can change: "+
		"install gpusplit with 'install -o root -g root -m 0755 gpusplit %s'%s", e.Path, strings.Join(e.Problems, "; "), persist.DefaultBinary, more)
	if e.RunsFrom != "" {
		s += fmt.Sprintf(" (this gpusplit runs from %s; the snippet does not run it from there)", e.RunsFrom)
	}
	return s
}

// checkHookBinary checks the gpusplit a snippet runs as persist checks the boot unit's:
// Proxmox runs it as root at every start and stop. refused is why install will not write
// a snippet that runs it; nil when it passes or cannot be checked (a snapshot).
func checkHookBinary(h *host.Host, path string, named bool) (persist.BinaryReport, *BinaryRefusedError) {
	b, err := persist.CheckBinary(h, path, named)
	if errors.Is(err, host.ErrReadOnly) {
		return persist.NewBinaryReport(b, false, nil), nil
	}
	out := persist.NewBinaryReport(b, true, err)
	if err == nil {
		return out, nil
	}
	refused := &BinaryRefusedError{Path: path, Problems: out.Problems}
	if exe, e := os.Executable(); e == nil && !named && h.Root() == "/" && exe != path {
		refused.RunsFrom = exe
	}
	return out, refused
}

// hookNodes fills in whether the snippet's storage is shared and the other nodes where
// the guest may start: where the snippet must be installed too, or where its storage is
// not at all.
func hookNodes(h *host.Host, kind string, id int, storage string, rep *HookReport) {
	st, ok := findStorage(h, storage)
	if !ok {
		return
	}
	rep.Shared = st.IsShared()
	_, others, notes, err := GuestNodes(h, kind, id)
	if err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the other nodes where %s %d may start are not known (%v): a snippet on a storage that is not shared must be installed on each of them", rep.Kind, id, err))
		return
	}
	rep.Notes = append(rep.Notes, notes...)
	install, missing := SnippetNodes(st, others)
	for _, n := range install {
		rep.InstallOn = append(rep.InstallOn, HookNode{n.Node, n.Why})
	}
	for _, n := range missing {
		rep.StorageMissingOn = append(rep.StorageMissingOn, HookNode{n.Node, n.Why})
	}
}

func findStorage(h *host.Host, id string) (Storage, bool) {
	data, err := h.ReadString(StoragePath)
	if err != nil {
		return Storage{}, false
	}
	sts, err := ParseStorage(data)
	if err != nil {
		return Storage{}, false
	}
	for _, s := range sts {
		if s.ID == id {
			return s, true
		}
	}
	return Storage{}, false
}

// InstallHook makes gpusplit hook the guest's hookscript: it writes the snippet into a
// storage of this node that holds snippets and sets hookscript: in the guest's config,
// keeping a hookscript the guest has as the one the snippet runs after gpusplit hook.
// Without o.Apply it writes nothing and checks what would stop the write
// (ErrWouldStop, with the reasons in the report's Problems and Refused). A nil report
// comes with an error that stopped it before any change was worked out, a binary that
// fails its check included (a *BinaryRefusedError); a report with an error is what was
// found and done.
func InstallHook(h *host.Host, kind string, id int, o HookOptions) (*HookReport, error) {
	return changeHook(h, kind, id, o, true)
}

// RemoveHook takes gpusplit hook away from the guest, putting back a hookscript its
// snippet chained, and removes the snippet file once no guest on any node names it.
// It returns as InstallHook does.
func RemoveHook(h *host.Host, kind string, id int, o HookOptions) (*HookReport, error) {
	return changeHook(h, kind, id, o, false)
}

func changeHook(h *host.Host, kind string, id int, o HookOptions, install bool) (*HookReport, error) {
	guest, err := ReadGuest(h, kind, id)
	if err != nil {
		return nil, err
	}
	old := guest.String()
	rep := newHookReport(kind, id)
	current, _ := guest.Get("hookscript")
	var ch hookChange
	var refused *BinaryRefusedError // a binary install must not let the snippet run
	if install {
		path := o.Binary
		if path == "" {
			path = persist.DefaultBinary
		}
		bin, berr := checkHookBinary(h, path, o.Binary != "")
		rep.Binary, refused = &bin, berr
		if o.Deadline > 0 {
			rep.Deadline = o.Deadline.String()
		}
		if ch, err = planInstall(h, kind, id, current, o.Storage, path, rep.Deadline); err != nil {
			return nil, err
		}
		if refused != nil && o.Apply {
			return nil, refused
		}
		rep.Chained, rep.MadeFor = ch.chained, ch.madeFor
		guest.Set("hookscript", ch.vol)
	} else {
		if ch, err = planRemove(h, kind, id, current); err != nil {
			return nil, err
		}
		rep.Chained = ch.chained
		if ch.chained != "" {
			guest.Set("hookscript", ch.chained)
		} else {
			guest.Delete("hookscript")
		}
	}
	rep.Hookscript, _ = guest.Get("hookscript")
	rep.Notes = append(rep.Notes, ch.notes...)
	rep.Snippet, rep.Storage, rep.SnippetState = ch.file, ch.storage, ch.state
	// The snippet the guest named before, when the change leaves it: it goes once no
	// guest config on any node names it (a clone's names its original's).
	if ch.prev.exists && (!install || ch.prev.path != ch.file) {
		users, notes, err := SnippetUsers(h, ch.prev.vol)
		if err != nil {
			return nil, err
		}
		rep.Notes = append(rep.Notes, notes...)
		if users = OthersThan(users, id); len(users) > 0 {
			rep.Kept = ch.prev.path
			for _, u := range users {
				rep.UsedBy = append(rep.UsedBy, u.Label())
			}
		} else {
			rep.Removed = ch.prev.path
		}
	}
	path := GuestPath(kind, id)
	rep.Diff = Diff(path, old, guest.String()) + ch.diff
	edit := Edit{Path: path, Old: old, New: guest.String()}
	rep.old = old
	if o.Apply && o.Shown != nil && (rep.Diff != o.Shown.Diff || old != o.Shown.old) {
		return rep, &ShownError{Paths: []string{path}}
	}
	var werr error
	if o.Apply {
		werr = writeHook(h, ch.write, ch.body, func() error {
			var err error
			rep.Files, rep.Problems, rep.Applied, err = WriteGuest(h, o.Command, true, edit)
			return err
		})
		if werr == nil && rep.Removed != "" {
			if p, err := h.OSPath(rep.Removed); err == nil {
				if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
					rep.Notes = append(rep.Notes, fmt.Sprintf("the snippet %s, which no guest names any more, was not removed: %v", rep.Removed, err))
				}
			}
		}
	} else {
		rep.Files, rep.Problems, rep.Applied, werr = WriteGuest(h, o.Command, false, edit)
		if refused != nil {
			rep.Refused = refused
			werr = ErrWouldStop
		}
	}
	if rep.Problems == nil {
		rep.Problems = []string{}
	}
	if rep.Files == nil {
		rep.Files = []FileResult{}
	}
	if install && rep.Storage != "" {
		hookNodes(h, kind, id, rep.Storage, rep)
	}
	return rep, werr
}

// StorageChangeError refuses an install onto storage Named when the guest's hookscript,
// gpusplit's snippet on Storage, is missing on this node: it is written again where the
// config, which is every node's, names it.
type StorageChangeError struct {
	Guest      string // "VM 131"
	Hookscript string
	Storage    string
	Named      string
}

func (e *StorageChangeError) Error() string {
	return fmt.Sprintf("%s's hookscript %s is missing on this node: install writes it again on storage %s, as the config (every node's) names it; storage %s would change it for every node", e.Guest, e.Hookscript, e.Storage, e.Named)
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
	label := fmt.Sprintf("%s %d", KindName(kind), id)
	keepName := "" // the name of a snippet of gpusplit's missing here: written again as it is named
	switch {
	case current == "":
	case IsHookVolume(current):
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
				return ch, &StorageChangeError{Guest: label, Hookscript: current, Storage: sf.storage, Named: storage}
			}
			storage, keepName = sf.storage, sf.name
			if sf.name != HookSnippet {
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
		name = SnippetName(id, ch.chained != "" || deadline != "")
	}
	script := HookScript{Binary: binary, Deadline: deadline, Chained: ch.chained}
	if name != HookSnippet {
		script.Guest, _ = strconv.Atoi(strings.TrimPrefix(name, HookSnippet+"-"))
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
		if _, ours := ParseHookScript(prev); !ours {
			return ch, fmt.Errorf("%s exists and was not written by gpusplit: move it away (it is not %s's hookscript), then install again", ch.file, label)
		}
		ch.state, ch.write, ch.body = "changed", ch.file, body
		ch.diff = Diff(ch.file, prev, body)
		if users, _, err := SnippetUsers(h, ch.vol); err == nil {
			if others := OthersThan(users, id); len(others) > 0 {
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
	_, name, err := SnippetVolume(chained)
	if err != nil {
		return fmt.Errorf("%s's hookscript %s: %w; remove it or fix it first", label, chained, err)
	}
	if IsHookSnippetName(name) {
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
	label := fmt.Sprintf("%s %d", KindName(kind), id)
	if current == "" {
		return ch, nil
	}
	if !IsHookVolume(current) {
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
		if ch.chained != "" && IsHookVolume(ch.chained) {
			ch.notes = append(ch.notes, fmt.Sprintf("the snippet chained %s, gpusplit's own: it is not put back", ch.chained))
			ch.chained = ""
		}
	case sf.name == HookSnippet:
		// The shared snippet never chains: nothing is lost by taking it away.
		ch.state = "missing"
	default:
		return ch, fmt.Errorf("%s's hookscript %s is missing on this node (%s; snippets are per node), so what it chains, if anything, is not known here: run remove on the node it was installed on, or set the hookscript yourself (qm set %d --delete hookscript, or --hookscript <the guest's own script>)", label, current, orText(sf.path, "(none)"), id)
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
	data, err := h.ReadString(StoragePath)
	if err != nil {
		return "", "", fmt.Errorf("reading %s: %w", StoragePath, err)
	}
	sts, err := ParseStorage(data)
	if err != nil {
		return "", "", err
	}
	node, err := NodeName(h)
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
		return "", "", fmt.Errorf("no storage %s in %s", want, StoragePath)
	}
	return "", "", fmt.Errorf("no storage of node %s holds snippets: enable the content type on one, e.g. pvesm set local --content iso,vztmpl,backup,snippets", node)
}

// volumePath is the file of a snippet volume ("local:snippets/x.sh") on this node.
func volumePath(h *host.Host, vol string) (string, error) {
	id, name, err := SnippetVolume(vol)
	if err != nil {
		return "", err
	}
	_, dir, err := snippetStorage(h, id)
	if err != nil {
		return "", err
	}
	return dir + "/" + name, nil
}

func indent(body string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimSuffix(body, "\n"), "\n") {
		b.WriteString("+" + l)
	}
	return b.String() + "\n"
}
