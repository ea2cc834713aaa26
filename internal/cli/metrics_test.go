package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// metricLines are the samples of a text exposition, "name{labels}" → value.
func metricLines(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if i := strings.LastIndexByte(l, ' '); i > 0 && !strings.HasPrefix(l, "#") {
			out[l[:i]] = l[i+1:]
		}
	}
	return out
}

// metrics reads the split as status does, with split.toml loaded by the same flags'
// code: on a copy of the Proxmox node with a split not applied, each part's drift is
// the number of items status lists for it, and in_sync is status's exit status.
func TestMetricsDriftIsStatus(t *testing.T) {
	root, _ := hookRoot(t)
	p := filepath.Join(root, "etc/gpusplit/split.toml")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte("[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "--root", root, "status", "-o", "json")
	if status(err) != ExitDrift {
		t.Fatalf("status: %v, want drift", err)
	}
	var doc struct {
		Drift []struct {
			Part  string   `json:"part"`
			Items []string `json:"items"`
		} `json:"drift"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	text, stderr, err := run(t, "--root", root, "metrics")
	if err != nil {
		t.Fatalf("metrics: %v\n%s", err, stderr)
	}
	got := metricLines(t, text)
	if got["gpusplit_split_in_sync"] != "0" || got["gpusplit_split_configured"] != "1" {
		t.Errorf("in_sync %q, configured %q; status says drift", got["gpusplit_split_in_sync"], got["gpusplit_split_configured"])
	}
	if len(doc.Drift) < 2 {
		t.Fatalf("status finds drift in %d parts; the test wants the drivers' and another's", len(doc.Drift))
	}
	for _, d := range doc.Drift {
		if k := `gpusplit_split_drift{part="` + d.Part + `"}`; got[k] != strconv.Itoa(len(d.Items)) {
			t.Errorf("%s = %q, status lists %d: %v", k, got[k], len(d.Items), d.Items)
		}
	}
	if got[`gpusplit_gpu_driver_info{address="0000:81:00.0",driver="nvidia",desired="vfio-pci",target="vms"}`] != "1" {
		t.Errorf("GPU 0000:81:00.0 does not say where the split wants it:\n%s", text)
	}
}

// --textfile writes the file node_exporter reads, and nothing on standard output (the
// timer runs it every minute); -o json says where it went.
func TestMetricsTextfile(t *testing.T) {
	dir := t.TempDir()
	out, stderr, err := run(t, "--demo", "metrics", "--textfile", dir)
	if err != nil || out != "" {
		t.Fatalf("%v, standard output %q\n%s", err, out, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "gpusplit.prom"))
	if err != nil {
		t.Fatal(err)
	}
	got := metricLines(t, string(b))
	if got[`gpusplit_gpu_driver_info{address="0000:e1:00.0",driver="nvidia",desired="",target=""}`] != "1" || !strings.Contains(string(b), "# TYPE gpusplit_gpu_driver_info gauge\n") {
		t.Errorf("the textfile:\n%.2000s", b)
	}
	out, _, err = run(t, "--demo", "metrics", "--textfile", dir, "-o", "json")
	var doc struct {
		Textfile string `json:"textfile"`
		Families []struct {
			Name string `json:"name"`
		} `json:"families"`
	}
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || doc.Textfile != filepath.Join(dir, "gpusplit.prom") || len(doc.Families) < 20 {
		t.Errorf("-o json: %v\n%.500s", err, out)
	}
	_, _, err = run(t, "--demo", "metrics", "--textfile", filepath.Join(dir, "missing"))
	if err == nil || !strings.Contains(err.Error(), "--textfile: ") || !strings.Contains(err.Error(), "--collector.textfile.directory") {
		t.Errorf("a missing directory: %v", err)
	}
}
