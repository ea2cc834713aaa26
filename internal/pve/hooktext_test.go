package pve

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/persist"
)

func hookText(r *HookReport, t HookText) string {
	var b strings.Builder
	r.WriteText(&b, t)
	return b.String()
}

func hookShow(r *HookReport) string {
	var b strings.Builder
	r.WriteShow(&b)
	return b.String()
}

// An install's check prints the diff and the nodes the snippet must be on too; its dry
// run says nothing was written; the write names the config and its backup and when the
// GPUs follow the VM; show says what the VM runs; the clone's remove keeps the snippet
// the original names, and a remove names no nodes.
func TestHookReportText(t *testing.T) {
	root, h := hookHost(t, localSnippets)
	rep, err := InstallHook(h, QEMU, 131, HookOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	const nodes = "Snippets are per node: storage local is this node's own, so the snippet serves this node only.\n" +
		"note: VM 131 may also start on kpro5 (a migration may move it there), kpro7 (a migration may move it there): install the snippet there too (gpusplit pve hook install --vm 131 --yes on each), or use a shared storage (--storage).\n"
	if got := hookText(rep, HookText{Install: true}); got != rep.Diff+nodes {
		t.Errorf("the check:\n%s\nwant the diff, then:\n%s", got, nodes)
	}
	const dry = "dry run: nothing was written; without --dry-run this change is written.\n"
	if got := hookText(rep, HookText{Install: true, DryRun: true}); got != rep.Diff+dry+nodes {
		t.Errorf("the dry run:\n%s", got)
	}
	if rep, err = InstallHook(h, QEMU, 131, HookOptions{Apply: true, Command: "test"}); err != nil {
		t.Fatal(err)
	}
	const wrote = "wrote /etc/pve/qemu-server/131.conf; the previous version is in /b.\n" +
		"VM 131's GPUs follow it from its next start on this node (gpusplit hook 131 pre-start).\n"
	if got := hookText(rep, HookText{Install: true, Written: true, Backups: "/b"}); got != wrote+nodes {
		t.Errorf("the write:\n%s", got)
	}
	if rep, err = ShowHook(h, QEMU, 131); err != nil {
		t.Fatal(err)
	}
	if got, want := hookShow(rep), "VM 131 runs gpusplit hook (local:snippets/gpusplit-hook)\nIt runs "+persist.DefaultBinary+".\n"+nodes; got != want {
		t.Errorf("show:\n%s\nwant:\n%s", got, want)
	}
	if rep, err = InstallHook(h, QEMU, 131, HookOptions{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := hookText(rep, HookText{Install: true, DryRun: true}); got != "VM 131: nothing to change (hookscript: local:snippets/gpusplit-hook)\n"+nodes {
		t.Errorf("an install with nothing to do:\n%s", got)
	}

	// A clone names the original's snippet: its remove keeps it, and says who names it.
	putFile(t, root, "/etc/pve/nodes/kpro6/qemu-server/132.conf", readFile(t, filepath.Join(root, vm131)), 0o640)
	if rep, err = RemoveHook(h, QEMU, 132, HookOptions{Apply: true, Command: "test"}); err != nil {
		t.Fatal(err)
	}
	const kept = "wrote /etc/pve/qemu-server/132.conf; the previous version is in /b.\n" +
		"/var/lib/vz/snippets/gpusplit-hook is kept: VM 131 still names it.\n"
	if got := hookText(rep, HookText{Written: true, Backups: "/b"}); got != kept {
		t.Errorf("the clone's remove:\n%s\nwant:\n%s", got, kept)
	}
	if rep, err = RemoveHook(h, QEMU, 131, HookOptions{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	if got, want := hookText(rep, HookText{}), rep.Diff+"the change removes /var/lib/vz/snippets/gpusplit-hook: no guest names it any more.\n"; got != want {
		t.Errorf("the remove's check:\n%s\nwant:\n%s", got, want)
	}
}

// Each state of a guest's hookscript reads as what it means, and a container is named
// with --ct in the command that mends it.
func TestHookReportShow(t *testing.T) {
	for _, c := range []struct {
		rep  HookReport
		want string
	}{
		{HookReport{Guest: 7, Kind: "VM"}, "VM 7 has no hookscript: its GPUs do not follow it (gpusplit pve hook install)\n"},
		{HookReport{Guest: 7, Kind: "VM", Hookscript: "nas:snippets/gpusplit-hook"}, "VM 7 runs nas:snippets/gpusplit-hook, gpusplit's snippet, whose storage  holds no snippets on this node: the guest does not start here\n"},
		{HookReport{Guest: 7, Kind: "VM", Hookscript: "local:snippets/mine.sh", Snippet: "/s/mine.sh"}, "VM 7 runs local:snippets/mine.sh, which is not gpusplit's\n"},
		{HookReport{Guest: 7, Kind: "container", Hookscript: "local:snippets/gpusplit-hook", Snippet: "/s/gpusplit-hook", SnippetState: "missing"},
			"container 7 runs local:snippets/gpusplit-hook, gpusplit's snippet, which is missing on this node (/s/gpusplit-hook; snippets are per node): the guest does not start here until gpusplit pve hook install --ct 7 --yes writes it\n"},
		{HookReport{Guest: 7, Kind: "VM", Hookscript: "local:snippets/gpusplit-hook", Snippet: "/s/gpusplit-hook"}, "VM 7 runs /s/gpusplit-hook, which is named like gpusplit's snippet but was not written by gpusplit\n"},
		{HookReport{Guest: 7, Kind: "VM", Hookscript: "local:snippets/gpusplit-hook-5", Snippet: "/s/gpusplit-hook-5", SnippetState: "present", Chained: "local:snippets/mine.sh", MadeFor: 5, Deadline: "5m0s",
			Binary: &persist.BinaryReport{Path: "/opt/gpusplit", Checked: true, Problems: []string{"not root's"}}},
			"VM 7 runs gpusplit hook (local:snippets/gpusplit-hook-5), then local:snippets/mine.sh\n" +
				"The snippet was made for guest 5 (this one's config names it, as a clone's does): gpusplit pve hook install --vm 7 --yes gives it one of its own.\n" +
				"It runs /opt/gpusplit, which fails the check: not root's\n" +
				"It bounds each phase to 5m0s (gpusplit hook --deadline).\n"},
		{HookReport{Guest: 7, Kind: "VM", Hookscript: "nas:snippets/gpusplit-hook", Snippet: "/s/gpusplit-hook", SnippetState: "present", Storage: "nas", Shared: true,
			Binary: &persist.BinaryReport{Path: "/opt/gpusplit"}, StorageMissingOn: []HookNode{{Node: "kpro7", Why: []string{"HA", "replication"}}}, Notes: []string{"n"}},
			"VM 7 runs gpusplit hook (nas:snippets/gpusplit-hook)\n" +
				"It runs /opt/gpusplit (not checked: a snapshot holds no binaries).\n" +
				"Storage nas is shared: its snippet serves every node it is on.\n" +
				"note: VM 7 may also start on kpro7 (HA; replication), where storage nas is not: it does not start there with this hookscript.\n" +
				"note: n\n"},
	} {
		if got := hookShow(&c.rep); got != c.want {
			t.Errorf("%+v:\n%s\nwant:\n%s", c.rep, got, c.want)
		}
	}
}

// A container's install names no GPUs that follow it; a check that would stop lists
// why and says nothing of a dry run.
func TestHookReportTextContainer(t *testing.T) {
	rep := HookReport{Guest: 129, Kind: "container", Diff: "--- a\n+++ b\n", Storage: "local", InstallOn: []HookNode{{Node: "kpro5", Why: []string{"HA"}}}}
	want := "wrote /etc/pve/lxc/129.conf; the previous version is in /b.\n" +
		"Snippets are per node: storage local is this node's own, so the snippet serves this node only.\n" +
		"note: container 129 may also start on kpro5 (HA): install the snippet there too (gpusplit pve hook install --ct 129 --yes on each), or use a shared storage (--storage).\n"
	if got := hookText(&rep, HookText{Install: true, Written: true, Backups: "/b"}); got != want {
		t.Errorf("a container's install:\n%s\nwant:\n%s", got, want)
	}
	rep.Problems = []string{"one", "two"}
	want = "--- a\n+++ b\nnothing was written; the write would stop:\n  one\n  two\n"
	if got := hookText(&rep, HookText{DryRun: true}); got != want {
		t.Errorf("a stopped remove:\n%s\nwant:\n%s", got, want)
	}
}
