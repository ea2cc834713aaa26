package doctor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// quarantined is the record a VM's post-stop writes for the sample host's GPU
// 0000:81:00.0 when its reset failed, as a file of the host.
func quarantined(t *testing.T) map[string]string {
	t.Helper()
	a := pci.Address{Bus: 0x81}
	b, err := json.Marshal(health.Record{
		Device: a, GPU: a, Guest: 131, Phase: "post-stop", Driver: "nvidia",
		Time: time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC),
		Evidence: []health.Evidence{
			{Check: health.ConfigSpace, Text: "0000:81:00.0: config space reads ffff (vendor id 0xffff in the first two bytes of config)"},
			{Check: health.LinkDown, Text: "0000:81:00.0: the PCIe link is down: current_link_width reads 0"},
		},
		Baseline: health.Baseline{Width: 16, Speed: "32.0 GT/s PCIe", MaxWidth: 16, MaxSpeed: "32.0 GT/s PCIe"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"run/gpusplit/quarantine/0000:81:00.0.json": string(b)}
}

// A quarantined GPU is an error, with the record's evidence, its baseline, and the way
// to check, reset and release it.
func TestQuarantinedGPU(t *testing.T) {
	r := run(t, sample(t, quarantined(t)), "")
	f := find(r, "gpu-quarantined", Error)
	if f == nil {
		t.Fatalf("no gpu-quarantined error: %+v", r.Findings)
	}
	if want := "GPU 0000:81:00.0 is quarantined: the post-stop of VM 131 found it broken"; f.Title != want {
		t.Errorf("title %q, want %q", f.Title, want)
	}
	evidence := strings.Join(f.Evidence, "\n")
	for _, want := range []string{
		"record: /run/gpusplit/quarantine/0000:81:00.0.json",
		"found at 2026-03-14 09:26:53 UTC, on its way back to nvidia",
		"0000:81:00.0: config space reads ffff",
		"current_link_width reads 0",
		"its link at the VM's start: x16 at 32.0 GT/s PCIe (max x16, 32.0 GT/s PCIe)",
	} {
		if !strings.Contains(evidence, want) {
			t.Errorf("evidence lacks %q:\n%s", want, evidence)
		}
	}
	for _, want := range []string{"dmesg", "AER", "Xid", "echo 1 > /sys/bus/pci/devices/0000:81:00.0/reset", "reboot", "gpusplit hook release 0000:81:00.0", "gpusplit apply"} {
		if !strings.Contains(f.Remedy, want) {
			t.Errorf("remedy lacks %q: %s", want, f.Remedy)
		}
	}
	if r.Worst() != Error {
		t.Errorf("worst %v", r.Worst())
	}
}

// A damaged record still names a quarantined GPU; a directory that cannot be listed
// makes the check partial, not a finding.
func TestQuarantineDamagedAndUnreadable(t *testing.T) {
	r := run(t, sample(t, map[string]string{"run/gpusplit/quarantine/0000:e1:00.0.json": "{cut"}), "")
	f := find(r, "gpu-quarantined", Error)
	if f == nil || f.Title != "GPU 0000:e1:00.0 is quarantined; its record is damaged" || !strings.Contains(strings.Join(f.Evidence, "\n"), "damaged: /run/gpusplit/quarantine/0000:e1:00.0.json is not a record") {
		t.Errorf("a damaged record: %+v", f)
	}
	r = run(t, sample(t, map[string]string{"run/gpusplit/quarantine": "a file"}), "")
	if has(r, "gpu-quarantined") || !strings.Contains(r.Partial["gpu-quarantined"], "/run/gpusplit/quarantine") {
		t.Errorf("an unreadable directory: findings %+v, partial %v", r.Findings, r.Partial)
	}
}
