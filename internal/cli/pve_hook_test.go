package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// snippetsRoot is the sample host with a storage.cfg whose local storage holds snippets,
// as Proxmox's installer writes it with the snippets content type added.
func snippetsRoot(t *testing.T, storage string) string {
	t.Helper()
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/pve/storage.cfg"), []byte(storage), 0o640); err != nil {
		t.Fatal(err)
	}
	return root
}

const localSnippets = "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup,snippets\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n"

// install writes the snippet and sets hookscript:, show says so, remove takes it away;
// a dry run writes nothing.
func TestPVEHookInstallRemove(t *testing.T) {
	root := snippetsRoot(t, localSnippets)
	conf := filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server/131.conf")
	before, _ := os.ReadFile(conf)
	snippet := filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook")

	out := mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131")
	if !strings.Contains(out, "+hookscript: local:snippets/gpusplit-hook\n") || !strings.Contains(out, `exec /usr/bin/gpusplit hook "$@"`) || !strings.Contains(out, "dry run: nothing was written") {
		t.Errorf("dry run:\n%s", out)
	}
	if _, err := os.Stat(snippet); err == nil {
		t.Error("the dry run wrote the snippet")
	}
	mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
	fi, err := os.Stat(snippet)
	if err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("the snippet: %v %v", fi, err)
	}
	if data, _ := os.ReadFile(conf); !strings.Contains(string(data), "hookscript: local:snippets/gpusplit-hook\n") {
		t.Errorf("config:\n%s", data)
	}
	if out := mustRun(t, "--root", root, "pve", "hook", "show", "--vm", "131"); !strings.Contains(out, "VM 131 runs gpusplit hook (local:snippets/gpusplit-hook)") {
		t.Errorf("show: %s", out)
	}
	if out := mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply"); !strings.Contains(out, "nothing to change") {
		t.Errorf("a second install: %s", out)
	}
	mustRun(t, "--root", root, "pve", "hook", "remove", "--vm", "131", "--apply")
	if data, _ := os.ReadFile(conf); string(data) != string(before) {
		t.Errorf("after remove:\n%s\nwant\n%s", data, before)
	}
}

// A guest's own hookscript keeps running, after gpusplit's, from a snippet of the
// guest's own; remove puts the old one back.
func TestPVEHookChains(t *testing.T) {
	root := snippetsRoot(t, localSnippets)
	own := filepath.Join(root, "var/lib/vz/snippets/mine.pl")
	os.MkdirAll(filepath.Dir(own), 0o755)
	os.WriteFile(own, []byte("#!/usr/bin/perl\nexit 0;\n"), 0o755)
	conf := filepath.Join(root, "etc/pve/nodes/kpro6/lxc/129.conf")
	edit(t, root, "etc/pve/nodes/kpro6/lxc/129.conf", func(s string) string { return "hookscript: local:snippets/mine.pl\n" + s })
	before, _ := os.ReadFile(conf)
	mustRun(t, "--root", root, "pve", "hook", "install", "--ct", "129", "--apply")
	chain, err := os.ReadFile(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-129"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(chain), "/usr/bin/gpusplit hook \"$@\" || exit $?\nexec '/var/lib/vz/snippets/mine.pl' \"$@\"") {
		t.Errorf("the chain:\n%s", chain)
	}
	if out := mustRun(t, "--root", root, "pve", "hook", "show", "--ct", "129"); !strings.Contains(out, "then local:snippets/mine.pl") {
		t.Errorf("show: %s", out)
	}
	mustRun(t, "--root", root, "pve", "hook", "remove", "--ct", "129", "--apply")
	if data, _ := os.ReadFile(conf); string(data) != string(before) {
		t.Errorf("after remove:\n%s\nwant\n%s", data, before)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-129")); err == nil {
		t.Error("the chain snippet is left")
	}
}

// Refusals, each naming the way out, with nothing written; a config that cannot be
// written takes the snippet back.
func TestPVEHookRefuses(t *testing.T) {
	for _, c := range []struct {
		name, storage string
		args          []string
		want          string
	}{
		{"no snippets storage", "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup\n", []string{"--vm", "131"}, "pvesm set local --content iso,vztmpl,backup,snippets"},
		{"a storage without files", localSnippets, []string{"--vm", "131", "--storage", "local-lvm"}, "storage local-lvm cannot hold snippets"},
		{"no such storage", localSnippets, []string{"--vm", "131", "--storage", "nope"}, "no storage nope"},
		{"no guest", localSnippets, []string{"--vm", "999"}, "999"},
		{"two guests", localSnippets, []string{"--vm", "131", "--ct", "129"}, "give one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := snippetsRoot(t, c.storage)
			_, _, err := run(t, append([]string{"--root", root, "pve", "hook", "install", "--apply"}, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook")); err == nil {
				t.Error("a snippet was written")
			}
		})
	}
	t.Run("a locked VM", func(t *testing.T) {
		root := snippetsRoot(t, localSnippets)
		edit(t, root, "etc/pve/nodes/kpro6/qemu-server/131.conf", func(s string) string { return "lock: backup\n" + s })
		_, _, err := run(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
		if err == nil || !strings.Contains(err.Error(), "lock: backup") || !strings.Contains(err.Error(), "the snippet /var/lib/vz/snippets/gpusplit-hook was put back") {
			t.Errorf("err = %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook")); err == nil {
			t.Error("the snippet is left")
		}
	})
}
