package health

import (
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
)

func releaseText(r *ReleaseReport) string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

// A healthy GPU's release names the VM whose stop quarantined it and the hook phase
// that gives it back; a broken one is refused, and forced it is released with what the
// check found; a device that is not quarantined is an error that says so.
func TestFreeReport(t *testing.T) {
	root, h := sample(t)
	a := pci.Address{Bus: 0x01}
	if _, err := FreeReport(h, a, false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a device not quarantined: %v", err)
	}
	if err := Quarantine(h, record(a)); err != nil {
		t.Fatal(err)
	}
	r, err := FreeReport(h, a, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "0000:01:00.0 released from quarantine (the post-stop of VM 131 found it broken at 2026-03-14 09:26:53 UTC); it answers and its link is up now.\n" +
		"Next: gpusplit hook 131 post-stop gives 0000:01:00.0 back to nvidia, with the containers' devN entries (VM 131's journal keeps it), once VM 131 is stopped; or gpusplit apply.\n"
	if got := releaseText(r); got != want {
		t.Errorf("a healthy GPU:\n%s\nwant:\n%s", got, want)
	}
	if b, _ := json.Marshal(r); !strings.Contains(string(b), `"guest":131,"damaged":"","forced":false,"evidence":[],"next":"gpusplit hook 131 post-stop`) {
		t.Errorf("JSON: %s", b)
	}

	// Force on a healthy GPU forces nothing.
	if err := Quarantine(h, record(a)); err != nil {
		t.Fatal(err)
	}
	if r, err = FreeReport(h, a, true); err != nil || r.Forced || strings.Contains(releaseText(r), "forced") {
		t.Errorf("force on a healthy GPU: %v %+v", err, r)
	}

	write(t, root, gpuDir+"/current_link_width", "0\n")
	rec := record(a)
	rec.Guest, rec.Driver = 0, ""
	if err := Quarantine(h, rec); err != nil {
		t.Fatal(err)
	}
	var broken *StillBrokenError
	if _, err := FreeReport(h, a, false); !errors.As(err, &broken) {
		t.Fatalf("a broken GPU: %v", err)
	}
	if r, err = FreeReport(h, a, true); err != nil || !r.Forced || len(r.Evidence) != 1 {
		t.Fatalf("forced: %v %+v", err, r)
	}
	got := releaseText(r)
	if !strings.Contains(got, ", forced while it is still broken:\n  "+r.Evidence[0]+"\n") ||
		!strings.HasSuffix(got, "Next: gpusplit apply gives 0000:01:00.0 back to its driver and, with sync_proxmox, its containers their devN entries; so does the next start and stop of a VM that uses it.\n") {
		t.Errorf("forced:\n%s", got)
	}
	if got := releaseText(&ReleaseReport{Device: "0000:02:00.0", Damaged: "cut", Next: "n"}); got != "0000:02:00.0 released from quarantine (its record was damaged: cut); it answers and its link is up now.\nNext: n.\n" {
		t.Errorf("a damaged record: %q", got)
	}
}
