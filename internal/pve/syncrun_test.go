package pve

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// shortMapping is the sample host's pci.cfg without the line of GPU 0000:f1:00: the
// reference sync leaves VM 131 more hostpci entries than its mapping has GPUs, which the
// sync refuses.
func shortMapping(t *testing.T) string {
	t.Helper()
	sample, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	ref := string(must(sample.ReadFile(MappingPath)))
	for _, l := range strings.SplitAfter(ref, "\n") {
		if strings.Contains(l, "node=kpro6,path=0000:f1:00,") {
			return strings.Replace(ref, l, "", 1)
		}
	}
	t.Fatal("no line for 0000:f1:00")
	return ""
}

func planFor(t *testing.T, inv *inventory.Inventory, d plan.Desired) *plan.Plan {
	t.Helper()
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A sound sync: the check finds nothing to stop it, and the write changes the reference
// case's three files.
func TestRunSync(t *testing.T) {
	h, inv := demoDir(t, nil)
	d := vfio(t, "numa:1")
	p := planFor(t, inv, d)
	rep, err := RunSync(h, inv, p, d, SyncOptions{}, SyncMode{})
	if err != nil || rep.Applied || len(rep.Changes) != 3 || len(rep.Problems) != 0 || len(rep.Files) != 0 {
		t.Fatalf("check: %v %+v", err, rep)
	}
	rep, err = RunSync(h, inv, p, d, SyncOptions{}, SyncMode{Apply: true, Command: "test"})
	if err != nil || !rep.Applied || len(rep.Files) != 3 {
		t.Fatalf("apply: %v %+v", err, rep)
	}
	for _, f := range rep.Files {
		if f.Outcome != Written || f.Backup == "" {
			t.Errorf("%+v", f)
		}
	}
	rep, err = RunSync(h, inv, p, d, SyncOptions{}, SyncMode{Apply: true, Command: "test"})
	if err != nil || len(rep.Changes) != 0 || rep.Changes == nil || rep.Files == nil {
		t.Errorf("again: %v %+v", err, rep)
	}
}

// A refused result stops the check (ErrWouldStop) and the write (a *RefusedError, with
// every file untouched); forced, it is written, with the refusal as a note.
func TestRunSyncRefused(t *testing.T) {
	h, inv := demoDir(t, map[string]string{"etc/pve/mapping/pci.cfg": shortMapping(t)})
	d := vfio(t, "numa:1")
	p := planFor(t, inv, d)
	const want = "/etc/pve/qemu-server/131.conf: VM 131: 4 hostpci entries would use mapping pro6000-vm"
	rep, err := RunSync(h, inv, p, d, SyncOptions{}, SyncMode{})
	if !errors.Is(err, ErrWouldStop) || len(rep.Problems) != 1 || !strings.HasPrefix(rep.Problems[0], want) {
		t.Fatalf("check: %v %+v", err, rep)
	}
	before := mappingText(t, h)
	rep, err = RunSync(h, inv, p, d, SyncOptions{}, SyncMode{Apply: true, Command: "test"})
	var refused *RefusedError
	if !errors.As(err, &refused) || len(refused.Problems) != 1 || rep.Applied || len(rep.Files) != 3 {
		t.Fatalf("apply: %v %+v", err, rep)
	}
	for _, f := range rep.Files {
		if f.Outcome != Untouched {
			t.Errorf("%+v", f)
		}
	}
	if mappingText(t, h) != before {
		t.Error("a refused sync wrote pci.cfg")
	}
	rep, err = RunSync(h, inv, p, d, SyncOptions{}, SyncMode{Apply: true, Force: true, Command: "test"})
	if err != nil || !rep.Applied || !rep.Forced || len(rep.Problems) != 0 || !strings.Contains(strings.Join(rep.Notes, "\n"), "forced past: VM 131: 4 hostpci entries") {
		t.Fatalf("forced: %v %+v", err, rep)
	}
	if mappingText(t, h) == before {
		t.Error("a forced sync did not write pci.cfg")
	}
}

func mappingText(t *testing.T, h *host.Host) string {
	t.Helper()
	s, err := h.ReadString(MappingPath)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// What was shown is what is written: a container changed between the check a person
// confirmed and the write makes the write refuse, naming the file, and write nothing;
// the undo of an applied sync puts every file back.
func TestRunSyncShownAndUndo(t *testing.T) {
	h, inv := demoDir(t, nil)
	d := vfio(t, "numa:1")
	p := planFor(t, inv, d)
	shown, err := RunSync(h, inv, p, d, SyncOptions{}, SyncMode{})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for _, c := range shown.Changes {
		before[c.Path] = string(must(h.ReadFile(c.Path)))
	}
	ct := "/etc/pve/nodes/kpro6/lxc/129.conf"
	osPath, err := h.OSPath(ct)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(osPath, append(must(os.ReadFile(osPath)), "onboot: 1\n"...), 0o640); err != nil {
		t.Fatal(err)
	}
	rep, err := RunSync(h, inv, p, d, SyncOptions{}, SyncMode{Apply: true, Command: "test", Shown: shown.Changes})
	var se *ShownError
	if !errors.As(err, &se) || strings.Join(se.Paths, " ") != "/etc/pve/lxc/129.conf" || rep.Applied {
		t.Fatalf("after a change: %v %+v", err, rep)
	}
	for _, path := range []string{MappingPath, "/etc/pve/qemu-server/131.conf"} {
		if got := string(must(h.ReadFile(path))); got != before[path] {
			t.Errorf("%s was written", path)
		}
	}

	// Shown as it is now: written; then undone, every file as before.
	shown, err = RunSync(h, inv, p, d, SyncOptions{}, SyncMode{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range shown.Changes {
		before[c.Path] = string(must(h.ReadFile(c.Path)))
	}
	rep, err = RunSync(h, inv, p, d, SyncOptions{}, SyncMode{Apply: true, Command: "test", Shown: shown.Changes})
	if err != nil || !rep.Applied {
		t.Fatalf("as shown: %v", err)
	}
	if _, err := rep.Undo(h); err != nil {
		t.Fatal(err)
	}
	for path, was := range before {
		if got := string(must(h.ReadFile(path))); got != was {
			t.Errorf("%s after the undo:\n%s\nwant\n%s", path, got, was)
		}
	}
}
