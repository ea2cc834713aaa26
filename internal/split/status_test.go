package split

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/demo"
	"github.com/gpusplit/gpusplit/internal/health"
)

func status(t *testing.T, r *runRig) (*StatusReport, string) {
	t.Helper()
	var warned []string
	req := r.request(t, true)
	pl, err := req.Plan()
	if err != nil {
		t.Fatal(err)
	}
	pl.Source.Warn = func(w []string) { warned = append(warned, w...) }
	st, err := pl.Status("test", "gpusplit apply NEXT")
	if err != nil {
		t.Fatal(err)
	}
	if len(warned) > 0 && !strings.Contains(strings.Join(st.Warnings, "\n"), warned[0]) {
		t.Errorf("warned %q, the report's warnings %q", warned, st.Warnings)
	}
	var b strings.Builder
	st.WriteText(&b, 100)
	return st, b.String()
}

// Before the split every part drifts and the next command is given; with the drivers
// moved alone, the drivers are as asked and the rest is not; once the whole split is
// made, every part is in sync and no command follows. Quarantine records that cannot be
// read are a warning, in the report too.
func TestStatus(t *testing.T) {
	r := newRunRig(t, demo.Options{})
	st, text := status(t, r)
	if st.InSync || st.Next != "gpusplit apply NEXT" || len(st.Drift) != 3 || !strings.HasSuffix(text, "\nnext: gpusplit apply NEXT\n") || !strings.Contains(text, "Proxmox: 3 files differ from the split") {
		t.Fatalf("before the split: %+v\n%s", st.Parts, text)
	}

	off := false
	r.proxmox = &off
	if _, err := Run(r.request(t, false)); err != nil {
		t.Fatal(err)
	}
	r.proxmox = nil
	st, text = status(t, r)
	if st.InSync || !strings.Contains(text, ": DRIFT: the drivers are as the split asks, the rest is not:\n") || st.Next == "" {
		t.Fatalf("the drivers alone:\n%s", text)
	}
	if b, _ := json.Marshal(st); !strings.Contains(string(b), `"in_sync":false`) || !strings.Contains(string(b), `"drift":[{"part":"proxmox"`) {
		t.Errorf("the drivers alone, JSON: %s", b)
	}

	if _, err := Run(r.request(t, false)); err != nil {
		t.Fatal(err)
	}
	st, text = status(t, r)
	if !st.InSync || st.Next != "" || strings.Contains(text, "next:") || !strings.Contains(text, "Proxmox's mappings, containers and VMs and the boot files: as the split asks.\n") {
		t.Fatalf("in sync: %+v\n%s", st.Parts, text)
	}

	// The records' directory is a file: the records cannot be listed.
	dir := filepath.Join(r.dir, health.Dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _ = status(t, r); !strings.Contains(strings.Join(st.Warnings, "\n"), "quarantined GPUs cannot be seen: ") {
		t.Errorf("unreadable records: warnings %q", st.Warnings)
	}
}
