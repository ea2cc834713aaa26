package pve

import (
	"strings"
	"testing"
)

func syncText(r *SyncReport, t SyncText) string {
	var b strings.Builder
	r.WriteText(&b, t)
	return b.String()
}

// The check of the reference sync prints each file's diff with its notes; a dry run says
// nothing was written, a snapshot that its locks are checked on the host; the write
// says what it did to each file and where the previous versions are; a second sync finds
// nothing to do.
func TestSyncReportText(t *testing.T) {
	h, inv := demoDir(t, nil)
	d := vfio(t, "numa:1")
	p := planFor(t, inv, d)
	rep, err := RunSync(h, inv, p, d, SyncOptions{}, SyncMode{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Refused() {
		t.Error("the reference sync is refused")
	}
	check := syncText(rep, SyncText{Root: "kpro6"})
	for _, c := range rep.Changes {
		if !strings.Contains(check, c.Diff) {
			t.Errorf("the check lacks the diff of %s:\n%s", c.Path, check)
		}
	}
	for _, want := range []string{
		"# container 129 passes through /dev/nvidia0, /dev/nvidia1, /dev/nvidia2, /dev/nvidia3\n\n",
		"# VM 131: guest NUMA nodes bound to host nodes [1], where its GPUs are\n",
	} {
		if !strings.Contains(check, want) {
			t.Errorf("the check lacks %q:\n%s", want, check)
		}
	}
	if strings.Contains(check, "dry run") || strings.Contains(check, "snapshot") || strings.Contains(check, "nothing was written") {
		t.Errorf("a plain check says more:\n%s", check)
	}
	dry := syncText(rep, SyncText{Root: "kpro6", DryRun: true, Snapshot: true})
	if !strings.HasSuffix(dry, "\nnote: kpro6 is a snapshot: the locks and the files' permissions are checked on the host itself.\n"+
		"dry run: nothing was written; without --dry-run these changes are written.\n") {
		t.Errorf("a dry run on a snapshot:\n%s", dry)
	}

	rep, err = RunSync(h, inv, p, d, SyncOptions{}, SyncMode{Apply: true, Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	const want = "written       /etc/pve/mapping/pci.cfg\n" +
		"written       /etc/pve/lxc/129.conf\n" +
		"written       /etc/pve/qemu-server/131.conf\n" +
		"wrote 3 files; the previous versions are in /b.\n"
	if got := syncText(rep, SyncText{Root: "kpro6", Written: true, Backups: "/b", DryRun: true}); got != want {
		t.Errorf("the write:\n%s\nwant:\n%s", got, want)
	}

	rep, err = RunSync(h, inv, p, d, SyncOptions{}, SyncMode{})
	if err != nil {
		t.Fatal(err)
	}
	if got := syncText(rep, SyncText{Root: "kpro6", DryRun: true}); got != "kpro6: Proxmox already matches the split.\n" {
		t.Errorf("a sync with nothing to do: %q", got)
	}
}

// A refused result is marked REFUSED after its file's diff and stops the write, with
// the problem listed; forced, it is marked FORCED and noted; a refused write says each
// file was left untouched, and not that it wrote any.
func TestSyncReportTextRefused(t *testing.T) {
	h, inv := demoDir(t, map[string]string{"etc/pve/mapping/pci.cfg": shortMapping(t)})
	d := vfio(t, "numa:1")
	p := planFor(t, inv, d)
	const refusal = "VM 131: 4 hostpci entries would use mapping pro6000-vm, which holds 3 GPUs on kpro6"
	rep, _ := RunSync(h, inv, p, d, SyncOptions{}, SyncMode{})
	if !rep.Refused() {
		t.Error("Refused() is false for a refused sync")
	}
	check := syncText(rep, SyncText{Root: "kpro6", DryRun: true})
	for _, want := range []string{
		"# REFUSED: " + refusal,
		"nothing was written; the write would stop (1 problem):\n  /etc/pve/qemu-server/131.conf: " + refusal,
	} {
		if !strings.Contains(check, want) {
			t.Errorf("the check lacks %q:\n%s", want, check)
		}
	}
	if strings.Contains(check, "FORCED") || strings.Contains(check, "dry run:") {
		t.Errorf("a refused check says it is forced, or would be written:\n%s", check)
	}

	rep, _ = RunSync(h, inv, p, d, SyncOptions{}, SyncMode{Apply: true, Command: "test"})
	const untouched = "untouched     /etc/pve/mapping/pci.cfg\nuntouched     /etc/pve/lxc/129.conf\nuntouched     /etc/pve/qemu-server/131.conf\n"
	if got := syncText(rep, SyncText{Written: true, Backups: "/b"}); got != untouched {
		t.Errorf("a refused write:\n%s", got)
	}

	rep, err := RunSync(h, inv, p, d, SyncOptions{}, SyncMode{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	forced := syncText(rep, SyncText{Root: "kpro6", DryRun: true})
	for _, want := range []string{"# FORCED: " + refusal, "\nnote: forced past: " + refusal, "\ndry run: nothing was written"} {
		if !strings.Contains(forced, want) {
			t.Errorf("the forced check lacks %q:\n%s", want, forced)
		}
	}
	if strings.Contains(forced, "REFUSED") {
		t.Errorf("the forced check says REFUSED:\n%s", forced)
	}
}
