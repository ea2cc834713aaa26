package vmlayout

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// VM 131's layout after the reference split: the diff moves its GPUs into an args line,
// each note a comment after it; a running VM is told when it takes effect; once
// written, the VM is laid out and nothing changes.
func TestPlanLayout(t *testing.T) {
	h, inv := afterSplit(t)
	r, err := PlanLayout(h, inv.Tree, 131, now)
	if err != nil {
		t.Fatal(err)
	}
	if r.LaidOut || r.Layout == nil || r.Path != "/etc/pve/qemu-server/131.conf" || r.Edit.Path != r.Path || r.Edit.Old == r.Edit.New ||
		!strings.Contains(r.Diff, "\n+args: -device pxb-pcie") || !strings.Contains(r.Edit.New, "\nargs: -device pxb-pcie") || len(r.Notes) == 0 {
		t.Fatalf("the layout: %+v", r)
	}
	var b strings.Builder
	r.WriteText(&b)
	if want := r.Diff + "# " + strings.Join(r.Notes, "\n# ") + "\n"; b.String() != want {
		t.Errorf("the text:\n%s\nwant:\n%s", b.String(), want)
	}
	if strings.Contains(strings.Join(r.Notes, "\n"), "running") {
		t.Errorf("a stopped VM is said to run: %q", r.Notes)
	}

	conf, err := h.OSPath("/etc/pve/nodes/kpro6/qemu-server/131.conf")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := h.OSPath("/run/qemu-server/131.pid")
	if err != nil {
		t.Fatal(err)
	}
	write(t, h.Root(), map[string]string{"/run/qemu-server/131.pid": "4242\n"})
	if r, err = PlanLayout(h, inv.Tree, 131, now); err != nil {
		t.Fatal(err)
	}
	if n := r.Notes[len(r.Notes)-1]; n != "VM 131 is running: the layout takes effect when it is stopped and started again" {
		t.Errorf("a running VM's last note: %q", n)
	}
	os.Remove(pid)

	if err := os.WriteFile(conf, []byte(r.Edit.New), 0o640); err != nil {
		t.Fatal(err)
	}
	if r, err = PlanLayout(h, inv.Tree, 131, now); err != nil || !r.LaidOut {
		t.Fatalf("laid out: %v %+v", err, r)
	}
	js, _ := json.Marshal(r)
	if want := `{"vmid":131,"path":"/etc/pve/qemu-server/131.conf","laid_out":true,"diff":"","layout":null,"notes":[],"applied":false,"problems":[],"files":[]}`; string(js) != want {
		t.Errorf("laid out, JSON:\n%s\nwant:\n%s", js, want)
	}
	b.Reset()
	r.WriteText(&b)
	if b.String() != "VM 131 already has gpusplit's layout: nothing to change.\n" {
		t.Errorf("laid out: %q", b.String())
	}
}
