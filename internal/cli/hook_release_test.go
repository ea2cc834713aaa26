package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// quarantinedGPU is the sample host's GPU 0000:81:00.0 as a VM's post-stop quarantined
// it; its sysfs directory in the unpacked sample host.
var quarantinedGPU = pci.Address{Bus: 0x81}

const quarantinedDir = "sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0"

// quarantine writes the record a post-stop writes for a GPU whose reset failed.
func quarantine(t *testing.T, h *host.Host) health.Record {
	t.Helper()
	r := health.Record{
		Device: quarantinedGPU, GPU: quarantinedGPU, Guest: 131, Phase: "post-stop", Driver: "nvidia",
		Time:     time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC),
		Evidence: []health.Evidence{{Check: health.ConfigSpace, Text: "0000:81:00.0: config space reads ffff"}},
		Baseline: health.Baseline{Width: 16, Speed: "32.0 GT/s PCIe", MaxWidth: 16, MaxSpeed: "32.0 GT/s PCIe"},
	}
	if err := health.Quarantine(h, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// breakLink takes the quarantined GPU's link down, as a failed reset leaves it.
func breakLink(t *testing.T, root string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, quarantinedDir, "current_link_width"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// release runs runHookRelease as gpusplit hook release would, on a --root directory.
func release(root, output, addr string, force bool) (string, error) {
	var out, errOut bytes.Buffer
	g := &globals{root: root, output: output, stdout: &out, stderr: &errOut}
	err := runHookRelease(g, addr, force)
	return out.String(), err
}

func recordExists(t *testing.T, root string) bool {
	t.Helper()
	_, err := os.Lstat(filepath.Join(root, health.RecordPath(quarantinedGPU)))
	return err == nil
}

// A GPU that works again is released: its record goes, and the output says what runs
// next.
func TestHookReleaseHealthy(t *testing.T) {
	root, h := hookRoot(t)
	quarantine(t, h)
	out, err := release(root, "table", "0000:81:00.0", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"0000:81:00.0 released from quarantine (the post-stop of VM 131 found it broken at 2026-03-14 09:26:53 UTC); it answers and its link is up now.",
		"Next: gpusplit hook 131 post-stop gives 0000:81:00.0 back to nvidia",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if recordExists(t, root) {
		t.Error("the record is still there")
	}
	// Released already: there is nothing to release.
	if _, err := release(root, "table", "0000:81:00.0", false); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "0000:81:00.0 is not quarantined") {
		t.Errorf("a second release: %v", err)
	}
}

// A GPU still broken stays quarantined, with the evidence and the way out; force
// releases it all the same and says so.
func TestHookReleaseStillBroken(t *testing.T) {
	root, h := hookRoot(t)
	quarantine(t, h)
	breakLink(t, root)
	_, err := release(root, "table", "0000:81:00.0", false)
	if err == nil {
		t.Fatal("a GPU whose link is down was released")
	}
	for _, want := range []string{"0000:81:00.0 stays quarantined", "current_link_width reads 0", "echo 1 > /sys/bus/pci/devices/0000:81:00.0/reset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q: %v", want, err)
		}
	}
	if !recordExists(t, root) {
		t.Fatal("a refused release removed the record")
	}
	out, err := release(root, "json", "0000:81:00.0", true)
	if err != nil {
		t.Fatal(err)
	}
	var doc health.ReleaseReport
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if doc.Device != "0000:81:00.0" || doc.GPU != "0000:81:00.0" || doc.Guest != 131 || !doc.Forced || len(doc.Evidence) != 1 || !strings.Contains(doc.Evidence[0], "current_link_width reads 0") || doc.Next == "" {
		t.Errorf("doc %+v", doc)
	}
	if recordExists(t, root) {
		t.Error("a forced release left the record")
	}
}

// A damaged record is released after the check, against the GPU's full width; the JSON
// says the record was damaged, and its lists are [].
func TestHookReleaseDamagedRecord(t *testing.T) {
	root, _ := hookRoot(t)
	dir := filepath.Join(root, health.Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "0000:81:00.0.json"), []byte("{cut"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := release(root, "json", "0000:81:00.0", false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"evidence": []`) || !strings.Contains(out, `"damaged": "/run/gpusplit/quarantine/0000:81:00.0.json is not a record`) || !strings.Contains(out, `"forced": false`) {
		t.Errorf("json:\n%s", out)
	}
	if recordExists(t, root) {
		t.Error("the damaged record is still there")
	}
}

// Bad input is refused before anything is read; a snapshot cannot be changed.
func TestHookReleaseRefusals(t *testing.T) {
	if _, err := release(t.TempDir(), "table", "81:00", false); err == nil || !strings.Contains(err.Error(), "invalid PCI address") {
		t.Errorf("a bad address: %v", err)
	}
	var out bytes.Buffer
	err := runHookRelease(&globals{root: sampleArchive(t), output: "table", stdout: &out, stderr: &out}, "0000:81:00.0", false)
	if err == nil || !strings.Contains(err.Error(), "a snapshot cannot be changed") {
		t.Errorf("on the sample host, a snapshot: %v", err)
	}
	if _, err := release(t.TempDir(), "table", "0000:81:00.0", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("on a host that quarantines nothing: %v", err)
	}
	if os.Geteuid() != 0 {
		err := runHookRelease(&globals{root: "/", output: "table", stdout: &out, stderr: &out}, "0000:81:00.0", false)
		if err == nil || !strings.Contains(err.Error(), "hook release needs root") {
			t.Errorf("the live host without root: %v", err)
		}
	}
}
