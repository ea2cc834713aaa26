package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// inSyncSplit is a desired state the sample host is in: every GPU on nvidia.
// driversOnly leaves Proxmox's files and the boot files out of a split on a Proxmox
// node, where they are in it unless the file says no.
const driversOnly = "sync_proxmox = false\npersist = false\n"

const inSyncSplit = driversOnly + "rest = \"keep\"\n[[group]]\nname = \"ct\"\nselect = [\"numa:0\"]\ndriver = \"nvidia\"\n"

// A quarantined GPU takes a host in sync out of it: status lists it with its evidence
// and the way to release it, exits 3, and its JSON carries it in quarantined[].
func TestStatusQuarantined(t *testing.T) {
	root, h := hookRoot(t)
	p := filepath.Join(root, "etc/gpusplit/split.toml")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(inSyncSplit), 0o644); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		InSync      *bool             `json:"in_sync"`
		Quarantined []json.RawMessage `json:"quarantined"`
	}
	out := mustRun(t, "--root", root, "status", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.InSync == nil || !*doc.InSync || doc.Quarantined == nil || len(doc.Quarantined) != 0 {
		t.Fatalf("before: in_sync %v, quarantined %v\n%s", doc.InSync, doc.Quarantined, out)
	}

	quarantine(t, h)
	out, _, err := run(t, "--root", root, "status")
	if code := status(err); code != ExitDrift {
		t.Errorf("exit status %d (%v), want %d", code, err, ExitDrift)
	}
	for _, want := range []string{
		"NOT IN SYNC, 1 device is quarantined",
		"0000:81:00.0  found broken by the post-stop of VM 131 at 2026-03-14 09:26:53 UTC:",
		"      0000:81:00.0: config space reads ffff",
		"once it works again: gpusplit hook release 0000:81:00.0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	out, _, err = run(t, "--root", root, "status", "-o", "json")
	if code := status(err); code != ExitDrift {
		t.Errorf("json: exit status %d, want %d", code, ExitDrift)
	}
	var full struct {
		InSync      bool `json:"in_sync"`
		Empty       bool `json:"empty"`
		Quarantined []struct {
			Device   string `json:"device"`
			GPU      string `json:"gpu"`
			Guest    int    `json:"guest"`
			Phase    string `json:"phase"`
			Driver   string `json:"driver"`
			Time     string `json:"time"`
			Evidence []struct {
				Check string `json:"check"`
				Text  string `json:"text"`
			} `json:"evidence"`
			Baseline struct {
				Width int `json:"width"`
			} `json:"baseline"`
		} `json:"quarantined"`
	}
	if err := json.Unmarshal([]byte(out), &full); err != nil {
		t.Fatal(err)
	}
	if full.InSync || !full.Empty || len(full.Quarantined) != 1 {
		t.Fatalf("in_sync %v, empty %v, quarantined %+v", full.InSync, full.Empty, full.Quarantined)
	}
	q := full.Quarantined[0]
	if q.Device != "0000:81:00.0" || q.GPU != "0000:81:00.0" || q.Guest != 131 || q.Phase != "post-stop" || q.Driver != "nvidia" ||
		q.Time != "2026-03-14T09:26:53Z" || len(q.Evidence) != 1 || q.Evidence[0].Check != "config-space" || q.Baseline.Width != 16 {
		t.Errorf("quarantined[0] = %+v", q)
	}
}

// A move of a quarantined GPU, and of its functions, is marked in the drift list.
func TestStatusDriftOfQuarantined(t *testing.T) {
	root, h := hookRoot(t)
	quarantine(t, h)
	// A companion function's record holds its GPU too.
	audio := health.Record{Device: pci.Address{Bus: 0xe1, Function: 1}, GPU: pci.Address{Bus: 0xe1}, Guest: 140, Phase: "post-stop"}
	if err := health.Quarantine(h, audio); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "--root", root, "status", "--vfio", "0000:81:00.0", "--vfio", "0000:91:00.0", "--vfio", "0000:e1:00.0")
	if code := status(err); code != ExitDrift {
		t.Errorf("exit status %d, want %d", code, ExitDrift)
	}
	for _, want := range []string{
		"0000:81:00.0 (gpu): on nvidia, should be on vfio-pci, quarantined",
		"0000:81:00.1 (function of 0000:81:00.0): on snd_hda_intel, should be on vfio-pci, quarantined\n",
		"0000:91:00.0 (gpu): on nvidia, should be on vfio-pci\n",
		"0000:e1:00.0 (gpu): on nvidia, should be on vfio-pci, quarantined\n",
		"0000:e1:00.1 (of GPU 0000:e1:00.0)  found broken by the post-stop of VM 140",
		"gpusplit apply brings them there.\nA quarantined GPU moves once released (below).\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// Records that cannot be listed are a warning, on standard error and in the JSON, not a
// failure of status.
func TestStatusQuarantineUnreadable(t *testing.T) {
	root, _ := hookRoot(t)
	for p, body := range map[string]string{"etc/gpusplit/split.toml": inSyncSplit, health.Dir[1:]: "a file"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, err := run(t, "--root", root, "status", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "warning: quarantined GPUs cannot be seen") || !strings.Contains(out, `"quarantined": []`) || !strings.Contains(out, "quarantined GPUs cannot be seen") {
		t.Errorf("stderr %q\n%s", stderr, out)
	}
}
