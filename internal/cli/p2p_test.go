package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/p2p"
	"github.com/gpusplit/gpusplit/internal/testutils/p2ptest"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// withDriver makes p2p use a fake driver for the rest of the test.
func withDriver(t *testing.T, d p2p.Driver, err error) {
	t.Helper()
	old := openCUDA
	openCUDA = func() (p2p.Driver, error) { return d, err }
	t.Cleanup(func() { openCUDA = old })
}

var quick = []string{"p2p", "--sizes", "4K,1M", "--size", "1M", "--runs", "1"}

func TestP2P(t *testing.T) {
	withDriver(t, p2ptest.New(2), nil)
	out, stderr, err := run(t, quick...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"GPU1  0000:20:00.0  NVIDIA H200", "Bidirectional bandwidth, P2P enabled (GB/s)", "all 4 pairs ok", "NCCL needs no P2P setting"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "integrity 0000:10:00.0 -> 0000:20:00.0 (peer)") {
		t.Errorf("progress:\n%s", stderr)
	}
}

// A corrupt peer path: exit status 2, the pair and the setting in the output and JSON.
func TestP2PCorrupt(t *testing.T) {
	f := p2ptest.New(2)
	f.Corrupt[[2]int{0, 1}] = p2p.PathPeer
	withDriver(t, f, nil)
	out, _, err := run(t, append(quick, "-o", "json")...)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitCorrupt {
		t.Fatalf("err = %v, want exit status %d", err, ExitCorrupt)
	}
	var doc struct {
		Pairs []struct {
			Src, Dst, Verdict string
		} `json:"pairs"`
		Summary struct {
			Environment map[string]string `json:"environment"`
		} `json:"summary"`
		Doctor []any `json:"doctor"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Pairs[1].Verdict != "corrupt" || doc.Pairs[1].Src != "0000:10:00.0" || doc.Summary.Environment["NCCL_P2P_DISABLE"] != "1" || doc.Doctor == nil {
		t.Errorf("%+v", doc)
	}
}

// --save writes the result as -o json gives it, in the form nccl-topo --vm --p2p and pve
// p2p-clique --p2p read: the corrupt pair is there with its verdict.
func TestP2PSave(t *testing.T) {
	f := p2ptest.New(2)
	f.Corrupt[[2]int{0, 1}] = p2p.PathPeer
	withDriver(t, f, nil)
	saved := filepath.Join(t.TempDir(), "p2p.json")
	out, _, err := run(t, append(quick, "--save", saved)...)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitCorrupt {
		t.Fatalf("err = %v, want exit status %d", err, ExitCorrupt)
	}
	if !strings.Contains(out, "saved the result to "+saved) {
		t.Errorf("output:\n%s", out)
	}
	data, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Pairs []vmlayout.P2PPair `json:"pairs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Pairs) != 4 || doc.Pairs[1] != (vmlayout.P2PPair{Src: "0000:10:00.0", Dst: "0000:20:00.0", Verdict: "corrupt", Why: doc.Pairs[1].Why}) || doc.Pairs[1].Why == "" {
		t.Errorf("saved pairs %+v", doc.Pairs)
	}
}

// Without a CUDA driver, and in the static build without gpusplit-cuda: a message that
// says why and what to do, and exit status 4.
func TestP2PNoDriver(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, _, err := run(t, "p2p")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitNoCUDA || !strings.Contains(err.Error(), "static build") || !strings.Contains(err.Error(), "go build -tags cuda -o gpusplit-cuda") {
		t.Errorf("static build: %v", err)
	}
	withDriver(t, nil, errors.New("the CUDA driver is not available: libcuda.so.1: cannot open shared object file"))
	_, _, err = run(t, "p2p")
	if !errors.As(err, &ee) || ee.Code != ExitNoCUDA || !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Errorf("no driver: %v", err)
	}
	if _, _, err := run(t, "--demo", "p2p"); err == nil || !strings.Contains(err.Error(), "this machine's GPUs") {
		t.Errorf("--demo: %v", err)
	}
	if _, _, err := run(t, "p2p", "--sizes", "4X"); err == nil || !strings.Contains(err.Error(), "--sizes") {
		t.Errorf("--sizes 4X: %v", err)
	}
}

// A driver that fails half-way: the error, and what was measured before it.
func TestP2PFails(t *testing.T) {
	f := p2ptest.New(2)
	f.FailCall, f.FailAfter = "cuMemcpyPeer", 3
	withDriver(t, f, nil)
	_, _, err := run(t, quick...)
	if err == nil || !strings.Contains(err.Error(), "cuMemcpyPeer on GPU") {
		t.Errorf("err = %v", err)
	}
	if f.Live != 0 || len(f.PeerOn) != 0 {
		t.Errorf("left %d allocations, peer access %v", f.Live, f.PeerOn)
	}
}

// A driver that cannot release what it holds: the report comes out, then the error and
// exit status 1; on a corrupt run, status 2 stays and the error is said too.
func TestP2PCloseFails(t *testing.T) {
	f := p2ptest.New(2)
	f.FailCall = "cuDevicePrimaryCtxRelease_v2"
	withDriver(t, f, nil)
	out, _, err := run(t, quick...)
	if err == nil || !strings.Contains(err.Error(), "cuDevicePrimaryCtxRelease_v2 on GPU 0") || !strings.Contains(out, "all 4 pairs ok") {
		t.Errorf("err = %v\n%s", err, out)
	}
	f = p2ptest.New(2)
	f.FailCall = "cuDevicePrimaryCtxRelease_v2"
	f.Corrupt[[2]int{0, 1}] = p2p.PathPeer
	withDriver(t, f, nil)
	_, stderr, err := run(t, quick...)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitCorrupt || !strings.Contains(stderr, "cuDevicePrimaryCtxRelease_v2 on GPU 0") {
		t.Errorf("err = %v, stderr %q", err, stderr)
	}
}

// The JSON carries each figure's unit and the run's conventions.
func TestP2PJSONMethod(t *testing.T) {
	withDriver(t, p2ptest.New(2), nil)
	out, _, err := run(t, append(quick, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Method map[string]any `json:"method"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Method
	if m["bandwidth_unit"] != "GB/s" || m["latency_unit"] != "us" || m["gb_bytes"] != 1e9 || m["within_gpu_bytes_factor"] != 2.0 ||
		!strings.Contains(fmt.Sprint(m["bidirectional"]), "sum") || m["statistic"] != "median" || m["runs"] != 1.0 {
		t.Errorf("method %v", m)
	}
	if !strings.Contains(out, `"host_latency_us": {`) || !strings.Contains(out, `"unit": "us"`) || !strings.Contains(out, `"unit": "GB/s"`) {
		t.Errorf("figures without units:\n%s", out)
	}
}
