package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// The tests of this file run Debian's Prometheus (package prometheus, which has
// promtool) and node_exporter (prometheus-node-exporter); scripts/vm-deps installs
// both. Without them they are skipped, saying so.

// tool finds one of names on the PATH, or skips the test.
func tool(t *testing.T, pkg string, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skipf("%s is not installed (Debian's %s; ./scripts/vm-deps installs it): the test runs the real one", names[0], pkg)
	return ""
}

// richHost is the sample host with a bit of everything: a quarantined GPU, the
// hand-offs of a container and a VM, and AER counters.
func richHost(t *testing.T) *host.Host {
	t.Helper()
	_, h := sampleDir(t, true, map[string]string{
		gpuDir + "aer_dev_correctable":  "RxErr 5\nTOTAL_ERR_COR 5\n",
		gpuDir + "aer_dev_nonfatal":     "CmpltTO 1\nTOTAL_ERR_NONFATAL 1\n",
		gpuDir + "aer_dev_fatal":        "TOTAL_ERR_FATAL 0\n",
		portDir + "aer_dev_correctable": "TOTAL_ERR_COR 9\n",
		portDir + "aer_dev_nonfatal":    "TOTAL_ERR_NONFATAL 0\n",
		portDir + "aer_dev_fatal":       "TOTAL_ERR_FATAL 0\n",
		"/etc/gpusplit/split.toml":      "sync_proxmox = false\npersist = false\n[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\n",
	})
	a, _ := pci.ParseAddress("0000:e1:00.0")
	if err := health.Quarantine(h, health.Record{Device: a, GPU: a, Guest: 131, Phase: hook.PostStop, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := hook.Run(context.Background(), hook.Config{H: h, Split: loadSplit}, 129, hook.PreStart); err != nil {
		t.Fatal(err)
	}
	refuse := func(*host.Host) (bind.Kernel, error) { return nil, errors.New("no kernel") }
	hook.Run(context.Background(), hook.Config{H: h, Split: loadSplit, Kernel: refuse}, 131, hook.PreStart)
	return h
}

// promtool, Prometheus's own linter, passes what gpusplit writes: of the sample host as
// --demo shows it, and of a host with every kind of metric.
func TestPromtoolChecksMetrics(t *testing.T) {
	promtool := tool(t, "prometheus", "promtool")
	demo, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]*host.Host{"sample host": demo, "every kind": richHost(t)} {
		var b bytes.Buffer
		s := Collect(h, Options{Split: loadSplit, Version: "v0.0.0-test"})
		if err := s.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if name == "every kind" {
			for _, f := range s.Families {
				if len(f.Samples) == 0 {
					t.Errorf("%s: no sample of %s: the check does not see it", name, f.Name)
				}
			}
		}
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(b.Bytes())
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("%s: promtool check metrics: %v\n%s", name, err, out)
		}
	}
}

// The whole way a node's metrics go: gpusplit writes the sample host's textfile,
// node_exporter serves it, Prometheus scrapes node_exporter every second, and its query
// API gives each GPU's driver and holders, joined as a dashboard joins them.
func TestThroughPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node_exporter and Prometheus")
	}
	nodeExporter := tool(t, "prometheus-node-exporter", "prometheus-node-exporter", "node_exporter")
	prometheus := tool(t, "prometheus", "prometheus")

	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	textDir := t.TempDir()
	if _, err := WriteTextfile(textDir, Collect(h, Options{})); err != nil {
		t.Fatal(err)
	}

	exporter := freeAddr(t)
	start(t, nodeExporter, "--web.listen-address="+exporter, "--collector.disable-defaults",
		"--collector.textfile", "--collector.textfile.directory="+textDir)
	body := waitFor(t, 30*time.Second, "node_exporter serving the textfile", func() (string, bool) {
		b, err := get("http://" + exporter + "/metrics")
		return b, err == nil && strings.Contains(b, "gpusplit_gpu_driver_info{")
	})
	if !strings.Contains(body, "\nnode_textfile_scrape_error 0\n") {
		t.Fatalf("node_exporter could not read the textfile:\n%s", body)
	}

	server := freeAddr(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ['%s']
`, exporter)), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, prometheus, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+server)

	query := func(q string) []promSample {
		b, err := get("http://" + server + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil
		}
		var r struct {
			Status string `json:"status"`
			Data   struct {
				Result []promSample `json:"result"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(b), &r) != nil || r.Status != "success" {
			return nil
		}
		return r.Data.Result
	}
	drivers := waitFor(t, 60*time.Second, "Prometheus's first scrape of the GPUs", func() ([]promSample, bool) {
		r := query("gpusplit_gpu_driver_info")
		return r, len(r) == len(sampleGPUs)
	})
	for _, g := range sampleGPUs {
		i := slices.IndexFunc(drivers, func(s promSample) bool { return s.Metric["address"] == g.addr })
		if i < 0 {
			t.Errorf("Prometheus has no driver of %s: %v", g.addr, drivers)
			continue
		}
		m := drivers[i].Metric
		if m["driver"] != "nvidia" || m["job"] != "node" || m["instance"] != exporter || drivers[i].Value[1] != "1" {
			t.Errorf("the driver of %s in Prometheus: %v %v", g.addr, m, drivers[i].Value)
		}
	}
	// Who holds each GPU, with its driver beside it: the join the dashboard makes.
	held := query(`gpusplit_gpu_holders * on (instance, address) group_left (driver) gpusplit_gpu_driver_info`)
	byGPU := map[string][]string{}
	for _, s := range held {
		if s.Metric["driver"] != "nvidia" || s.Metric["kind"] != "process" || s.Value[1] != "1" {
			t.Errorf("holder %v %v", s.Metric, s.Value)
		}
		byGPU[s.Metric["address"]] = append(byGPU[s.Metric["address"]], s.Metric["name"]+"@"+s.Metric["guest"])
	}
	for _, g := range sampleGPUs {
		got := byGPU[g.addr]
		slices.Sort(got)
		if !slices.Equal(got, []string{"nvidia-persistenced@", "python3@lxc/129"}) {
			t.Errorf("Prometheus says %s is held by %q, want nvidia-persistenced and python3 of container 129", g.addr, got)
		}
	}
	if r := query(`node_textfile_scrape_error`); len(r) != 1 || r[0].Value[1] != "0" {
		t.Errorf("node_textfile_scrape_error: %v", r)
	}

	// Every query of the Grafana dashboard runs, all nodes chosen, and those of the
	// GPUs' table that need no desired state find the sample host's eight.
	for _, q := range dashboardQueries(t) {
		expr := strings.NewReplacer("$instance", ".*", "$__rate_interval", "1m").Replace(q.expr)
		b, err := get("http://" + server + "/api/v1/query?query=" + url.QueryEscape(expr))
		var r struct {
			Status string `json:"status"`
			Data   struct {
				Result []promSample `json:"result"`
			} `json:"data"`
		}
		if err != nil || json.Unmarshal([]byte(b), &r) != nil || r.Status != "success" {
			t.Errorf("panel %q: %s: %v\n%.300s", q.panel, expr, err, b)
			continue
		}
		if strings.HasPrefix(q.panel, "GPUs") && !strings.Contains(q.expr, "in_place") && len(r.Data.Result) != len(sampleGPUs) {
			t.Errorf("panel %q: %s gives %d series, want one per GPU", q.panel, expr, len(r.Data.Result))
		}
	}
}

// promSample is one series of a query's result: its labels, and [time, value].
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// freeAddr is a loopback address with a port no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs a server for the rest of the test, in a process group of its own, which
// the test's cleanup ends: whatever it started goes with it. Its output is shown when
// the test fails.
func start(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("%s said:\n%s", filepath.Base(name), out.tail(4000))
		}
	})
}

// waitFor polls f every 200 ms until it reports done, for at most limit.
func waitFor[T any](t *testing.T, limit time.Duration, what string, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		v, ok := f()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last: %v", limit, what, v)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// get fetches a page, with a timeout: a server that hangs must not hang the test.
func get(u string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("%s: %s", u, resp.Status)
	}
	return string(b), err
}

// lockedBuffer collects a server's output, written from its pipes' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // enough to say what went wrong
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	return s[max(0, len(s)-n):]
}

// dashboardPath is the Grafana dashboard the package ships.
const dashboardPath = "../../packaging/grafana/gpusplit-dashboard.json"

type dashboardQuery struct{ panel, expr string }

// dashboardQueries are the PromQL expressions of the dashboard's panels.
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var out []dashboardQuery
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, dashboardQuery{p.Title, tg.Expr})
		}
	}
	return out
}

// The alerting rules docs/metrics.md offers load in Prometheus: promtool check rules.
func TestDocsAlertRules(t *testing.T) {
	promtool := tool(t, "prometheus", "promtool")
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\ngroups:")
	rules, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/metrics.md has no rules (```yaml groups:)")
	}
	p := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(p, []byte("groups:"+rules), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", p).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS: 6 rules found") {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}
