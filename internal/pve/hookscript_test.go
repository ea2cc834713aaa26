package pve

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/persist"
)

const localSnippets = "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup,snippets\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n"

// hookHost is the sample host's /etc with storage.cfg as given and gpusplit installed where a
// snippet runs it by default, a file of root's.
func hookHost(t *testing.T, storage string) (string, *host.Host) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: the snippet's binary must be root's")
	}
	template, err := refTemplate()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(template, "etc"), root).CombinedOutput(); err != nil {
		t.Fatalf("copying the sample host's /etc: %v %s", err, out)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	putFile(t, root, StoragePath, storage, 0o640)
	putFile(t, root, persist.DefaultBinary, "#!/bin/sh\n", 0o755)
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, h
}

func putFile(t *testing.T, root, p, body string, mode os.FileMode) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(full, mode); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const vm131 = "/etc/pve/nodes/kpro6/qemu-server/131.conf"

// setHookscript gives VM 131 a hookscript.
func setHookscript(t *testing.T, root, vol string) {
	t.Helper()
	p := filepath.Join(root, vm131)
	putFile(t, root, vm131, "hookscript: "+vol+"\n"+readFile(t, p), 0o640)
}

// A check writes nothing; install writes the shared snippet and the config line; show
// says so; remove puts the config back and deletes the snippet no guest names.
func TestHookInstallRemove(t *testing.T) {
	root, h := hookHost(t, localSnippets)
	before := readFile(t, filepath.Join(root, vm131))
	snippet := filepath.Join(root, "var/lib/vz/snippets", HookSnippet)

	rep, err := InstallHook(h, QEMU, 131, HookOptions{Command: "test"})
	if err != nil || rep.Hookscript != "local:snippets/gpusplit-hook" || rep.SnippetState != "new" || rep.Applied ||
		!strings.Contains(rep.Diff, "+hookscript: local:snippets/gpusplit-hook\n") || rep.Binary == nil || !rep.Binary.OK {
		t.Fatalf("check: %v %+v", err, rep)
	}
	if _, err := os.Stat(snippet); err == nil {
		t.Fatal("the check wrote the snippet")
	}
	if rep.Shared || len(rep.InstallOn) != 2 || rep.InstallOn[0].Node != "kpro5" || rep.InstallOn[1].Node != "kpro7" {
		t.Errorf("the other nodes: %+v", rep.InstallOn)
	}

	if rep, err = InstallHook(h, QEMU, 131, HookOptions{Apply: true, Command: "test"}); err != nil || !rep.Applied {
		t.Fatalf("install: %v %+v", err, rep)
	}
	if fi, err := os.Stat(snippet); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("the snippet: %v %v", fi, err)
	}
	rep, err = ShowHook(h, QEMU, 131)
	if err != nil || rep.SnippetState != "present" || rep.Storage != "local" || rep.Snippet != "/var/lib/vz/snippets/gpusplit-hook" || rep.Binary == nil || rep.Binary.Path != persist.DefaultBinary {
		t.Fatalf("show: %v %+v", err, rep)
	}
	if rep, err = InstallHook(h, QEMU, 131, HookOptions{Apply: true, Command: "test"}); err != nil || rep.Diff != "" || rep.SnippetState != "present" {
		t.Errorf("a second install: %v %+v", err, rep)
	}

	rep, err = RemoveHook(h, QEMU, 131, HookOptions{Apply: true, Command: "test"})
	if err != nil || rep.Hookscript != "" || rep.Removed != "/var/lib/vz/snippets/gpusplit-hook" {
		t.Fatalf("remove: %v %+v", err, rep)
	}
	if readFile(t, filepath.Join(root, vm131)) != before {
		t.Error("remove left the config changed")
	}
	if _, err := os.Stat(snippet); err == nil {
		t.Error("the snippet no guest names is left")
	}
}

// A guest's own script is chained from a snippet of the guest's own; a clone that names
// it keeps it when the original's hookscript is removed.
func TestHookChainAndClone(t *testing.T) {
	root, h := hookHost(t, localSnippets)
	putFile(t, root, "/var/lib/vz/snippets/mine.sh", "#!/bin/sh\nexit 0\n", 0o755)
	setHookscript(t, root, "local:snippets/mine.sh")
	rep, err := InstallHook(h, QEMU, 131, HookOptions{Apply: true, Command: "test"})
	if err != nil || rep.Chained != "local:snippets/mine.sh" || rep.Hookscript != "local:snippets/gpusplit-hook-131" {
		t.Fatalf("install: %v %+v", err, rep)
	}
	body := readFile(t, filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-131"))
	if !strings.Contains(body, "# guest: 131\n") || !strings.Contains(body, "# chained: local:snippets/mine.sh\n") {
		t.Errorf("the snippet:\n%s", body)
	}
	clone := readFile(t, filepath.Join(root, vm131))
	putFile(t, root, "/etc/pve/nodes/kpro6/qemu-server/132.conf", clone, 0o640)
	if rep, err = ShowHook(h, QEMU, 132); err != nil || rep.MadeFor != 131 || rep.Chained != "local:snippets/mine.sh" {
		t.Errorf("show on the clone: %v %+v", err, rep)
	}
	rep, err = RemoveHook(h, QEMU, 132, HookOptions{Apply: true, Command: "test"})
	if err != nil || rep.Hookscript != "local:snippets/mine.sh" || rep.Kept != "/var/lib/vz/snippets/gpusplit-hook-131" || len(rep.UsedBy) != 1 || rep.UsedBy[0] != "VM 131" || rep.Removed != "" {
		t.Fatalf("remove on the clone: %v %+v", err, rep)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-131")); err != nil {
		t.Error("the snippet the original runs was removed")
	}
}

// Each refusal stops before anything is worked out or written, and says why.
func TestHookRefusals(t *testing.T) {
	for _, c := range []struct {
		name, storage string
		set           func(t *testing.T, root string)
		o             HookOptions
		remove        bool
		want          string
	}{
		{name: "no storage holds snippets", storage: "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup\n", want: "no storage of node kpro6 holds snippets"},
		{name: "a storage without files", o: HookOptions{Storage: "local-lvm"}, want: "storage local-lvm cannot hold snippets"},
		{name: "no such storage", o: HookOptions{Storage: "nope"}, want: "no storage nope"},
		{name: "a chained script missing here", set: func(t *testing.T, root string) { setHookscript(t, root, "local:snippets/mine.sh") }, want: "missing on this node"},
		{name: "a chained script that cannot run", set: func(t *testing.T, root string) {
			putFile(t, root, "/var/lib/vz/snippets/mine.sh", "#!/bin/sh\n", 0o644)
			setHookscript(t, root, "local:snippets/mine.sh")
		}, want: "is not an executable file"},
		{name: "a file of someone else's under gpusplit's name", set: func(t *testing.T, root string) {
			putFile(t, root, "/var/lib/vz/snippets/gpusplit-hook-131", "#!/bin/sh\necho mine\n", 0o755)
			setHookscript(t, root, "local:snippets/gpusplit-hook-131")
		}, want: "was not written by gpusplit"},
		{name: "a snippet of gpusplit's that chains gpusplit's", set: func(t *testing.T, root string) {
			putFile(t, root, "/var/lib/vz/snippets/gpusplit-hook-131", "#!/bin/sh\n# gpusplit pve hook install: x\n# chained: local:snippets/gpusplit-hook\n/usr/bin/gpusplit hook \"$@\" || exit $?\nexec '/var/lib/vz/snippets/gpusplit-hook' \"$@\"\n", 0o755)
			setHookscript(t, root, "local:snippets/gpusplit-hook-131")
		}, want: "a snippet of gpusplit's"},
		{name: "another storage for a snippet missing here", set: func(t *testing.T, root string) { setHookscript(t, root, "local:snippets/gpusplit-hook-131") },
			o: HookOptions{Storage: "nas"}, want: "install writes it again on storage local, as the config (every node's) names it; storage nas would change it"},
		{name: "a binary that does not exist", o: HookOptions{Binary: "/opt/gpusplit"}, want: "the snippet cannot run /opt/gpusplit"},
		{name: "remove of a hookscript not gpusplit's", set: func(t *testing.T, root string) { setHookscript(t, root, "local:snippets/mine.sh") }, remove: true, want: "is not gpusplit's"},
		{name: "remove where the guest's snippet is missing", set: func(t *testing.T, root string) { setHookscript(t, root, "local:snippets/gpusplit-hook-131") }, remove: true, want: "run remove on the node it was installed on"},
	} {
		t.Run(c.name, func(t *testing.T) {
			storage := c.storage
			if storage == "" {
				storage = localSnippets
			}
			root, h := hookHost(t, storage)
			if c.set != nil {
				c.set(t, root)
			}
			conf := readFile(t, filepath.Join(root, vm131))
			c.o.Apply, c.o.Command = true, "test"
			change := InstallHook
			if c.remove {
				change = RemoveHook
			}
			rep, err := change(h, QEMU, 131, c.o)
			if rep != nil || err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v, %v; want %q", rep, err, c.want)
			}
			if readFile(t, filepath.Join(root, vm131)) != conf {
				t.Error("the config was changed")
			}
			if _, err := os.Stat(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook")); err == nil {
				t.Error("a snippet was written")
			}
		})
	}
}

// A check of an install whose binary is refused reports it as what would stop the
// write; a config that cannot be written takes the snippet back.
func TestHookWouldStop(t *testing.T) {
	root, h := hookHost(t, localSnippets)
	rep, err := InstallHook(h, QEMU, 131, HookOptions{Binary: "/opt/gpusplit", Command: "test"})
	if !errors.Is(err, ErrWouldStop) || rep == nil || len(rep.Problems) != 0 || rep.Refused == nil || rep.Refused.Path != "/opt/gpusplit" || !strings.Contains(rep.Refused.Error(), "does not exist") {
		t.Fatalf("%v %+v", err, rep)
	}
	_, err = InstallHook(h, QEMU, 131, HookOptions{Binary: "/opt/gpusplit", Apply: true, Command: "test"})
	var refused *BinaryRefusedError
	if !errors.As(err, &refused) || refused.Path != "/opt/gpusplit" || !strings.HasSuffix(refused.Message(", or else"), "0755 gpusplit "+persist.DefaultBinary+"', or else") {
		t.Fatalf("apply: %v", err)
	}
	putFile(t, root, vm131, "lock: backup\n"+readFile(t, filepath.Join(root, vm131)), 0o640)
	rep, err = InstallHook(h, QEMU, 131, HookOptions{Apply: true, Command: "test"})
	if err == nil || rep == nil || rep.Applied || !strings.Contains(err.Error(), "lock: backup") || !strings.Contains(err.Error(), "was put back") {
		t.Fatalf("a locked VM: %v %+v", err, rep)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook")); err == nil {
		t.Error("the snippet is left")
	}
}

// show of a guest without gpusplit's hookscript says only what it has.
func TestShowHookNotOurs(t *testing.T) {
	root, h := hookHost(t, localSnippets)
	rep, err := ShowHook(h, QEMU, 131)
	if err != nil || rep.Hookscript != "" || rep.Snippet != "" || rep.Kind != "VM" {
		t.Fatalf("%v %+v", err, rep)
	}
	setHookscript(t, root, "local:snippets/mine.sh")
	if rep, err = ShowHook(h, QEMU, 131); err != nil || rep.Hookscript != "local:snippets/mine.sh" || rep.Snippet != "" || rep.Storage != "" {
		t.Fatalf("%v %+v", err, rep)
	}
	if _, err := ShowHook(h, LXC, 999); err == nil {
		t.Error("a guest that does not exist")
	}
}

// An install writes what was shown and confirmed, or nothing: a config changed between
// the check and the write, even outside the diff's lines, makes it refuse.
func TestHookInstallShown(t *testing.T) {
	root, h := hookHost(t, localSnippets)
	shown, err := InstallHook(h, QEMU, 131, HookOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, vm131)
	putFile(t, root, vm131, readFile(t, p)+"tags: gpu\n", 0o640)
	changed := readFile(t, p)
	rep, err := InstallHook(h, QEMU, 131, HookOptions{Apply: true, Command: "test", Shown: shown})
	var se *ShownError
	if !errors.As(err, &se) || rep.Applied || readFile(t, p) != changed {
		t.Fatalf("after a change: %v %+v", err, rep)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/vz/snippets", HookSnippet)); err == nil {
		t.Error("the snippet was written")
	}
	shown, err = InstallHook(h, QEMU, 131, HookOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err = InstallHook(h, QEMU, 131, HookOptions{Apply: true, Command: "test", Shown: shown}); err != nil || !rep.Applied {
		t.Fatalf("as shown: %v", err)
	}
}
