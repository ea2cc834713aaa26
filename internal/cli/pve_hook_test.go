package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/pve"
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

// hookRoot is snippetsRoot with gpusplit installed where the snippet runs it by default:
// a file of root's, as persist install wants the boot unit's.
func pveHookRoot(t *testing.T, storage string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: the snippet's binary must be root's")
	}
	root := snippetsRoot(t, storage)
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	putBinary(t, root, persist.DefaultBinary, 0o755)
	return root
}

const localSnippets = "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup,snippets\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n"

// putScript writes an executable script under root.
func putHookScript(t *testing.T, root, p, body string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func readHookFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func hookFileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

// install writes the snippet and sets hookscript:, show says so, remove takes it away and
// deletes the snippet no guest names any more; a dry run writes nothing.
func TestPVEHookInstallRemove(t *testing.T) {
	root := pveHookRoot(t, localSnippets)
	conf := filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server/131.conf")
	before := readHookFile(t, conf)
	snippet := filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook")

	out := mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--dry-run")
	if !strings.Contains(out, "+hookscript: local:snippets/gpusplit-hook\n") || !strings.Contains(out, "exec '"+persist.DefaultBinary+`' hook "$@"`) || !strings.Contains(out, "dry run: nothing was written") {
		t.Errorf("dry run:\n%s", out)
	}
	if hookFileExists(snippet) {
		t.Error("the dry run wrote the snippet")
	}
	mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
	fi, err := os.Stat(snippet)
	if err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("the snippet: %v %v", fi, err)
	}
	if data := readHookFile(t, conf); !strings.Contains(data, "hookscript: local:snippets/gpusplit-hook\n") {
		t.Errorf("config:\n%s", data)
	}
	if out := mustRun(t, "--root", root, "pve", "hook", "show", "--vm", "131"); !strings.Contains(out, "VM 131 runs gpusplit hook (local:snippets/gpusplit-hook)") || !strings.Contains(out, "It runs "+persist.DefaultBinary) {
		t.Errorf("show: %s", out)
	}
	if out := mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply"); !strings.Contains(out, "nothing to change") {
		t.Errorf("a second install: %s", out)
	}
	mustRun(t, "--root", root, "pve", "hook", "remove", "--vm", "131", "--apply")
	if data := readHookFile(t, conf); data != before {
		t.Errorf("after remove:\n%s\nwant\n%s", data, before)
	}
	if hookFileExists(snippet) {
		t.Error("the snippet no guest names is left")
	}
}

// A guest's own hookscript keeps running, after gpusplit's, from a snippet of the
// guest's own that says whose it is; remove puts the old one back.
func TestPVEHookChains(t *testing.T) {
	root := pveHookRoot(t, localSnippets)
	putHookScript(t, root, "var/lib/vz/snippets/mine.pl", "#!/usr/bin/perl\nexit 0;\n")
	conf := filepath.Join(root, "etc/pve/nodes/kpro6/lxc/129.conf")
	edit(t, root, "etc/pve/nodes/kpro6/lxc/129.conf", func(s string) string { return "hookscript: local:snippets/mine.pl\n" + s })
	before := readHookFile(t, conf)
	mustRun(t, "--root", root, "pve", "hook", "install", "--ct", "129", "--apply")
	chain := readHookFile(t, filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-129"))
	for _, want := range []string{"\n# guest: 129\n", "\n# chained: local:snippets/mine.pl\n", "'" + persist.DefaultBinary + `' hook "$@"` + "\n", "\n'/var/lib/vz/snippets/mine.pl' \"$@\"\n"} {
		if !strings.Contains(chain, want) {
			t.Errorf("the chain lacks %q:\n%s", want, chain)
		}
	}
	if out := mustRun(t, "--root", root, "pve", "hook", "show", "--ct", "129"); !strings.Contains(out, "then local:snippets/mine.pl") || strings.Contains(out, "made for") {
		t.Errorf("show: %s", out)
	}
	mustRun(t, "--root", root, "pve", "hook", "remove", "--ct", "129", "--apply")
	if data := readHookFile(t, conf); data != before {
		t.Errorf("after remove:\n%s\nwant\n%s", data, before)
	}
	if hookFileExists(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-129")) {
		t.Error("the chain snippet is left")
	}
	if !hookFileExists(filepath.Join(root, "var/lib/vz/snippets/mine.pl")) {
		t.Error("the guest's own script is gone")
	}
}

// The chain never runs itself, another snippet of gpusplit's, or a file missing on this
// node: the config is the cluster's, the snippets each node's.
func TestPVEHookChainTargets(t *testing.T) {
	const vm = "etc/pve/nodes/kpro6/qemu-server/131.conf"
	snippets := "var/lib/vz/snippets/"
	set := func(t *testing.T, root, vol string) {
		edit(t, root, vm, func(s string) string { return "hookscript: " + vol + "\n" + s })
	}
	t.Run("its own snippet missing here is written again, not chained", func(t *testing.T) {
		root := pveHookRoot(t, localSnippets)
		set(t, root, "local:snippets/gpusplit-hook-131")
		before := readHookFile(t, filepath.Join(root, vm))
		out := mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
		body := readHookFile(t, filepath.Join(root, snippets+"gpusplit-hook-131"))
		if strings.Contains(body, "gpusplit-hook-131'") || strings.Contains(body, "# chained") || !strings.Contains(body, "# guest: 131\nexec '") {
			t.Errorf("the snippet:\n%s", body)
		}
		if readHookFile(t, filepath.Join(root, vm)) != before {
			t.Error("the config (every node's) was changed")
		}
		if strings.Contains(out, "nothing to change") || !strings.Contains(out, "is missing on this node") {
			t.Errorf("out:\n%s", out)
		}
	})
	t.Run("the shared snippet missing here is written again", func(t *testing.T) {
		root := pveHookRoot(t, localSnippets)
		set(t, root, "local:snippets/gpusplit-hook")
		out := mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
		if strings.Contains(out, "nothing to change") || !strings.Contains(out, "+++ /var/lib/vz/snippets/gpusplit-hook (new, executable)") {
			t.Errorf("out:\n%s", out)
		}
		if hookFileExists(filepath.Join(root, snippets+"gpusplit-hook-131")) {
			t.Error("a chain snippet was written")
		}
		if body := readHookFile(t, filepath.Join(root, snippets+"gpusplit-hook")); strings.Contains(body, "# chained") {
			t.Errorf("the snippet chains:\n%s", body)
		}
	})
	for _, c := range []struct {
		name, vol, chainLine string
		want                 []string
	}{
		{name: "a script missing on this node", vol: "local:snippets/mine.sh",
			want: []string{"/var/lib/vz/snippets/mine.sh", "missing on this node", "copy it here", "qm set 131 --delete hookscript"}},
		{name: "a snippet that chains gpusplit's", vol: "local:snippets/gpusplit-hook-131", chainLine: "local:snippets/gpusplit-hook-131",
			want: []string{"a snippet of gpusplit's", "gpusplit pve hook remove"}},
		{name: "a snippet that chains another of gpusplit's", vol: "local:snippets/gpusplit-hook-131", chainLine: "local:snippets/gpusplit-hook",
			want: []string{"a snippet of gpusplit's"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := pveHookRoot(t, localSnippets)
			set(t, root, c.vol)
			os.MkdirAll(filepath.Join(root, snippets), 0o755)
			if c.chainLine != "" {
				putHookScript(t, root, snippets+"gpusplit-hook", "#!/bin/sh\n# gpusplit pve hook install: x\nexec /usr/bin/gpusplit hook \"$@\"\n")
				putHookScript(t, root, snippets+"gpusplit-hook-131", "#!/bin/sh\n# gpusplit pve hook install: x\n# chained: "+c.chainLine+"\n/usr/bin/gpusplit hook \"$@\" || exit $?\nexec '/var/lib/vz/snippets/"+strings.TrimPrefix(c.chainLine, "local:snippets/")+"' \"$@\"\n")
			}
			beforeConf := readHookFile(t, filepath.Join(root, vm))
			before := treeSum(t, filepath.Join(root, "var/lib/vz"))
			_, _, err := run(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want %q", err, w)
				}
			}
			if readHookFile(t, filepath.Join(root, vm)) != beforeConf || fmt.Sprint(treeSum(t, filepath.Join(root, "var/lib/vz"))) != fmt.Sprint(before) {
				t.Error("something was written")
			}
		})
	}
	t.Run("a file of someone else's under gpusplit's name", func(t *testing.T) {
		root := pveHookRoot(t, localSnippets)
		set(t, root, "local:snippets/gpusplit-hook-131")
		putHookScript(t, root, snippets+"gpusplit-hook-131", "#!/bin/sh\necho mine\n")
		_, _, err := run(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
		if err == nil || !strings.Contains(err.Error(), "was not written by gpusplit") {
			t.Errorf("err = %v", err)
		}
	})
}

// A clone's config names its original's snippet: remove on the clone puts the chained
// script back on the clone and keeps the file, which the original still runs.
func TestPVEHookClone(t *testing.T) {
	root := pveHookRoot(t, localSnippets)
	qemu := filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server")
	chain := filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-131")
	putHookScript(t, root, "var/lib/vz/snippets/mine.sh", "#!/bin/sh\nexit 0\n")
	edit(t, root, "etc/pve/nodes/kpro6/qemu-server/131.conf", func(s string) string { return "hookscript: local:snippets/mine.sh\n" + s })
	mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
	clone := readHookFile(t, filepath.Join(qemu, "131.conf"))
	if err := os.WriteFile(filepath.Join(qemu, "132.conf"), []byte(clone), 0o640); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, "--root", root, "pve", "hook", "show", "--vm", "132"); !strings.Contains(out, "made for guest 131") {
		t.Errorf("show on the clone:\n%s", out)
	}
	out := mustRun(t, "--root", root, "pve", "hook", "remove", "--vm", "132", "--dry-run")
	if !strings.Contains(out, "/var/lib/vz/snippets/gpusplit-hook-131 is kept: VM 131 still names it") || strings.Contains(out, "removes") {
		t.Errorf("dry run:\n%s", out)
	}
	out = mustRun(t, "--root", root, "pve", "hook", "remove", "--vm", "132", "--apply")
	if !hookFileExists(chain) {
		t.Fatalf("the snippet VM 131 runs was removed:\n%s", out)
	}
	if c := readHookFile(t, filepath.Join(qemu, "132.conf")); !strings.HasPrefix(c, "hookscript: local:snippets/mine.sh\n") {
		t.Errorf("the clone's config:\n%s", c)
	}
	if c := readHookFile(t, filepath.Join(qemu, "131.conf")); !strings.HasPrefix(c, "hookscript: local:snippets/gpusplit-hook-131\n") {
		t.Errorf("the original's config:\n%s", c)
	}
	// A clone that installs gets its own snippet; the original's stays.
	if err := os.WriteFile(filepath.Join(qemu, "132.conf"), []byte(clone), 0o640); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "132", "--apply")
	own := readHookFile(t, filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-132"))
	if !strings.Contains(own, "# guest: 132\n# chained: local:snippets/mine.sh\n") || !hookFileExists(chain) {
		t.Errorf("the clone's own snippet:\n%s", own)
	}
	// Now that nothing else names it, the original's goes with its remove.
	mustRun(t, "--root", root, "pve", "hook", "remove", "--vm", "131", "--apply")
	if hookFileExists(chain) {
		t.Error("a snippet no guest names is left")
	}
	// A snapshot that names a snippet keeps it: a rollback sets it again.
	edit(t, root, "etc/pve/nodes/kpro6/qemu-server/132.conf", func(s string) string {
		return s + "\n[before]\nhookscript: local:snippets/gpusplit-hook-132\n"
	})
	out = mustRun(t, "--root", root, "pve", "hook", "remove", "--vm", "132", "--apply")
	if !hookFileExists(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-132")) || !strings.Contains(out, "VM 132 (snapshot before) still names it") {
		t.Errorf("the snapshot's snippet:\n%s", out)
	}
}

// The snippet runs the installed gpusplit, checked as persist checks the boot unit's.
func TestPVEHookBinary(t *testing.T) {
	root := pveHookRoot(t, localSnippets)
	snippet := filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook")
	if err := os.Remove(filepath.Join(root, persist.DefaultBinary)); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
	if err == nil || !strings.Contains(err.Error(), persist.DefaultBinary+" does not exist") || !strings.Contains(err.Error(), "--binary PATH") {
		t.Errorf("a missing binary: %v", err)
	}
	out, _, err := run(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--dry-run")
	if err == nil || !strings.Contains(out, "the write would stop") || !strings.Contains(out, "does not exist") {
		t.Errorf("the dry run: %v\n%s", err, out)
	}
	putBinary(t, root, "/opt/gpusplit", 0o755)
	if err := os.Chown(filepath.Join(root, "opt/gpusplit"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply", "--binary", "/opt/gpusplit")
	if err == nil || !strings.Contains(err.Error(), "/opt/gpusplit is owned by uid 65534, not root") {
		t.Errorf("not root's: %v", err)
	}
	if hookFileExists(snippet) {
		t.Fatal("a snippet was written for a binary refused")
	}
	putBinary(t, root, "/usr/sbin/gpusplit", 0o755)
	mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply", "--binary", "/usr/sbin/gpusplit")
	if body := readHookFile(t, snippet); !strings.Contains(body, "exec '/usr/sbin/gpusplit' hook \"$@\"") {
		t.Errorf("the snippet:\n%s", body)
	}
	var doc pve.HookReport
	if err := json.Unmarshal([]byte(mustRun(t, "--root", root, "-o", "json", "pve", "hook", "show", "--vm", "131")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Binary == nil || doc.Binary.Path != "/usr/sbin/gpusplit" || !doc.Binary.OK {
		t.Errorf("show's binary: %+v", doc.Binary)
	}
}

// --deadline passes gpusplit hook --deadline; a value out of range is refused.
func TestPVEHookDeadline(t *testing.T) {
	root := pveHookRoot(t, localSnippets)
	for _, bad := range []string{"0", "-1s", "31m", "soon"} {
		if _, _, err := run(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--deadline", bad); err == nil || !strings.Contains(err.Error(), "at most 30m") {
			t.Errorf("--deadline %s: %v", bad, err)
		}
	}
	mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--deadline", "5m", "--apply")
	body := readHookFile(t, filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-131"))
	if !strings.Contains(body, "exec '"+persist.DefaultBinary+"' hook --deadline '5m0s' \"$@\"") || !strings.Contains(body, "# guest: 131\n") {
		t.Errorf("the snippet:\n%s", body)
	}
	// Without it again, the guest goes back to the shared snippet and its own goes.
	mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
	if hookFileExists(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook-131")) || !strings.Contains(readHookFile(t, filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server/131.conf")), "hookscript: local:snippets/gpusplit-hook\n") {
		t.Error("the deadline's snippet is left")
	}
}

// The chained script runs in every phase but a pre-start gpusplit refused; gpusplit's
// non-zero status wins, else the script's. Run for real with /bin/sh.
func TestPVEHookChainRuns(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	// The snippet names paths as the host sees them. A link inside the root, at the
	// root's own path, leads back to the root, so that those paths are the same files
	// under the root (where install looks) and on this machine (where sh runs them).
	root := pveHookRoot(t, "dir: local\n\tpath STORE\n\tcontent snippets\n")
	self := filepath.Join(root, root)
	if err := os.MkdirAll(filepath.Dir(self), 0o755); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Dir(self), root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, self); err != nil {
		t.Fatal(err)
	}
	edit(t, root, "etc/pve/storage.cfg", func(s string) string { return strings.Replace(s, "STORE", root+"/store", 1) })
	log, gsStatus, ownStatus := filepath.Join(root, "log"), filepath.Join(root, "gs-status"), filepath.Join(root, "own-status")
	putHookScript(t, root, "bin/gpusplit", "#!/bin/sh\necho \"gpusplit $*\" >> "+shellQuote(log)+"\nexit $(cat "+shellQuote(gsStatus)+")\n")
	putHookScript(t, root, "store/snippets/mine.sh", "#!/bin/sh\necho \"own $*\" >> "+shellQuote(log)+"\nexit $(cat "+shellQuote(ownStatus)+")\n")
	edit(t, root, "etc/pve/nodes/kpro6/qemu-server/131.conf", func(s string) string { return "hookscript: local:snippets/mine.sh\n" + s })
	mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply", "--binary", root+"/bin/gpusplit", "--deadline", "90s")
	snippet := filepath.Join(root, "store/snippets/gpusplit-hook-131")
	for _, phase := range []string{"pre-start", "post-start", "pre-stop", "post-stop"} {
		for _, gs := range []int{0, 1, 3} {
			for _, own := range []int{0, 2} {
				os.WriteFile(gsStatus, []byte(fmt.Sprint(gs)), 0o644)
				os.WriteFile(ownStatus, []byte(fmt.Sprint(own)), 0o644)
				os.Remove(log)
				err := exec.Command("/bin/sh", snippet, "131", phase).Run()
				status := 0
				if ee, ok := err.(*exec.ExitError); ok {
					status = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				want := "gpusplit hook --deadline 1m30s 131 " + phase + "\n"
				wantStatus := gs
				if gs == 0 || phase != "pre-start" {
					want += "own 131 " + phase + "\n"
					if gs == 0 {
						wantStatus = own
					}
				}
				got, _ := os.ReadFile(log)
				if string(got) != want || status != wantStatus {
					t.Errorf("%s, gpusplit %d, script %d: ran %q exit %d, want %q exit %d", phase, gs, own, got, status, want, wantStatus)
				}
			}
		}
	}
}

// Snippets are per node: install and show name the other nodes where the guest may start
// when the storage is not shared, and none when it is.
func TestPVEHookNodes(t *testing.T) {
	root := pveHookRoot(t, localSnippets)
	out := mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
	if !strings.Contains(out, "Snippets are per node: storage local is this node's own") || !strings.Contains(out, "VM 131 may also start on kpro5 (a migration may move it there), kpro7 (a migration may move it there): install the snippet there too") {
		t.Errorf("install:\n%s", out)
	}
	var doc pve.HookReport
	if err := json.Unmarshal([]byte(mustRun(t, "--root", root, "-o", "json", "pve", "hook", "show", "--vm", "131")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Shared || len(doc.InstallOn) != 2 || doc.InstallOn[0].Node != "kpro5" || doc.InstallOn[1].Node != "kpro7" || doc.Storage != "local" {
		t.Errorf("show -o json: %+v", doc)
	}
	// VM 171 is kept on kpro6 and kpro7 by a strict HA rule; a shared storage serves both.
	shared := pveHookRoot(t, "nfs: nas\n\texport /x\n\tserver 10.0.0.5\n\tcontent snippets\n\tnodes kpro6\n")
	out = mustRun(t, "--root", shared, "-o", "json", "pve", "hook", "install", "--vm", "131", "--dry-run")
	doc = pve.HookReport{}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.Shared || len(doc.InstallOn) != 0 || len(doc.StorageMissingOn) != 2 {
		t.Errorf("a shared storage on kpro6 alone: %+v", doc)
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
			root := pveHookRoot(t, c.storage)
			_, _, err := run(t, append([]string{"--root", root, "pve", "hook", "install", "--apply"}, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if hookFileExists(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook")) {
				t.Error("a snippet was written")
			}
		})
	}
	t.Run("a locked VM", func(t *testing.T) {
		root := pveHookRoot(t, localSnippets)
		edit(t, root, "etc/pve/nodes/kpro6/qemu-server/131.conf", func(s string) string { return "lock: backup\n" + s })
		_, _, err := run(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
		// The check stops it before the snippet is written.
		if err == nil || !strings.Contains(err.Error(), "lock: backup") {
			t.Errorf("err = %v", err)
		}
		if hookFileExists(filepath.Join(root, "var/lib/vz/snippets/gpusplit-hook")) {
			t.Error("the snippet is left")
		}
	})
	t.Run("remove where the guest's snippet is missing", func(t *testing.T) {
		root := pveHookRoot(t, localSnippets)
		edit(t, root, "etc/pve/nodes/kpro6/qemu-server/131.conf", func(s string) string { return "hookscript: local:snippets/gpusplit-hook-131\n" + s })
		_, _, err := run(t, "--root", root, "pve", "hook", "remove", "--vm", "131", "--apply")
		if err == nil || !strings.Contains(err.Error(), "missing on this node") || !strings.Contains(err.Error(), "run remove on the node it was installed on") {
			t.Errorf("err = %v", err)
		}
	})
}

// shellQuote quotes a word for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
