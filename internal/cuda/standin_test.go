package cuda_test

import (
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpusplit/gpusplit/internal/cuda"
	"github.com/gpusplit/gpusplit/internal/p2p"
	"github.com/gpusplit/gpusplit/internal/testutils/cudastub"
)

// These tests run the real gpusplit-cuda binary (the CUDA build, as it ships) against the
// stand-in driver library of internal/testutils/cudastub, found through LD_LIBRARY_PATH
// as the NVIDIA driver's libcuda.so.1 would be.

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// binaries builds gpusplit-cuda and the stand-in once for all tests.
func binaries(t *testing.T) (bin, lib string) {
	t.Helper()
	buildOnce.Do(func() {
		// The binary is built from sources this package does not compile (the cuda build
		// tag, the command line): looking at each one makes go test's cache see them.
		if out, err := exec.Command("go", "env", "GOMOD").Output(); err == nil {
			filepath.WalkDir(filepath.Dir(strings.TrimSpace(string(out))), func(p string, e fs.DirEntry, err error) error {
				if err == nil && e.IsDir() && (e.Name() == ".git" || e.Name() == "testdata") {
					return filepath.SkipDir
				}
				if err == nil && (strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".c")) {
					os.Stat(p)
				}
				return nil
			})
		}
		buildDir, buildErr = os.MkdirTemp("", "gpusplit-cuda-test-")
		if buildErr != nil {
			return
		}
		if buildErr = cudastub.Build(buildDir); buildErr != nil {
			return
		}
		build := exec.Command("go", "build", "-tags", "cuda", "-o", filepath.Join(buildDir, "gpusplit-cuda"), "github.com/gpusplit/gpusplit/cmd/gpusplit")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build -tags cuda: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "gpusplit-cuda"), buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// result is a run of gpusplit-cuda p2p -o json on the stand-in.
type result struct {
	rep    p2p.Report
	error  string // the report's error field
	stderr string
	status int
	stub   *cudastub.Report
}

// runP2P runs gpusplit-cuda p2p -o json with args on a stand-in set up as cfg.
func runP2P(t *testing.T, cfg cudastub.Config, args ...string) result {
	t.Helper()
	bin, lib := binaries(t)
	cfg.Report = filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(bin, append([]string{"p2p", "-o", "json"}, args...)...)
	cmd.Env = append(append(os.Environ(), "LD_LIBRARY_PATH="+lib), cfg.Env()...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var res result
	res.stderr = stderr.String()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.status = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); out != "" {
		var doc struct {
			p2p.Report
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v\n%s\n%s", err, out, res.stderr)
		}
		res.rep, res.error = doc.Report, doc.Error
	}
	if res.stub, err = cudastub.ReadReport(cfg.Report); err != nil {
		t.Fatalf("%v\n%s", err, res.stderr)
	}
	return res
}

func addr(i int) string { return fmt.Sprintf("0000:%02x:00.0", 0x10*(i+1)) }

// pair finds the pair from GPU i to GPU j (by the stand-in's addresses).
func (r result) pair(t *testing.T, i, j int) p2p.Pair {
	t.Helper()
	for _, p := range r.rep.Pairs {
		if p.Src == addr(i) && p.Dst == addr(j) {
			return p
		}
	}
	t.Fatalf("no pair %d -> %d in %+v", i, j, r.rep.Pairs)
	return p2p.Pair{}
}

// clean fails the test when the stand-in saw a broken rule or was left with anything
// alive.
func (r result) clean(t *testing.T) {
	t.Helper()
	if len(r.stub.Violations) > 0 || len(r.stub.Leaks()) > 0 {
		t.Errorf("violations %q, left alive %q\n%s", r.stub.Violations, r.stub.Leaks(), r.stderr)
	}
}

// within says whether a bandwidth of bytes over a span of ns, as the GPU's events give
// it, is what the model's span makes of it: events are read to the model's resolution,
// so the span seen is within one resolution of the model's.
func within(t *testing.T, what string, got, bytes, spanNs float64, m cudastub.Model) {
	t.Helper()
	res := m.ResolutionUs * 1e3
	lo, hi := bytes/(spanNs+res), bytes/math.Max(spanNs-res, 1)
	if got < lo || got > hi {
		t.Errorf("%s: %.4f GB/s, the model gives %.4f (%.4f to %.4f with the events' resolution)", what, got, bytes/spanNs, lo, hi)
	}
}

// The figures are the model's: copies along each path at its bandwidth and latency, the
// diagonal counting read and write, both ways the sum, latency that of one copy however
// much each call costs the host, and the host's cost a figure of its own.
func TestStandInFigures(t *testing.T) {
	for _, callUs := range []float64{0, 20} {
		t.Run(fmt.Sprintf("call %g us", callUs), func(t *testing.T) {
			m := cudastub.DefaultModel()
			m.CallUs = callUs // 20: ten times the peer latency
			const n, repeat, small = 4 << 20, 5, 16
			res := runP2P(t, cudastub.Config{GPUs: 3, Model: m}, "--sizes", "4K,64K", "--size", "4M", "--runs", "3")
			if res.status != 0 || res.error != "" {
				t.Fatalf("exit status %d, %s\n%s", res.status, res.error, res.stderr)
			}
			res.clean(t)
			for i := range 3 {
				for j := range 3 {
					p := res.pair(t, i, j)
					name := fmt.Sprintf("GPU%d -> GPU%d", i, j)
					paths := map[bool]string{false: cudastub.PathStaged, true: cudastub.PathPeer}
					bytes := float64(n * repeat)
					if i == j {
						paths = map[bool]string{false: cudastub.PathLocal, true: cudastub.PathLocal}
						bytes *= 2 // read and written
					}
					for _, on := range []bool{false, true} {
						pick := func(f p2p.Figures) float64 { return map[bool]float64{false: f.Disabled, true: f.Enabled}[on] }
						span := repeat * m.CopyNs(paths[on], n)
						within(t, fmt.Sprintf("%s unidirectional, peer access %v", name, on), pick(p.Uni), bytes, span, m)
						within(t, fmt.Sprintf("%s bidirectional, peer access %v", name, on), pick(p.Bi), 2*bytes, span, m)
						lat := m.CopyNs(paths[on], small) / 1e3
						if got := pick(p.Latency); math.Abs(got-lat) > 0.05*lat {
							t.Errorf("%s latency, peer access %v: %.3f us, the model gives %.3f", name, on, got, lat)
						}
						// The host's cost: at least what the stand-in spins a call.
						if got := pick(p.HostLatency); got <= 0 || got < callUs {
							t.Errorf("%s host latency, peer access %v: %.3f us, at least %g spent a call", name, on, got, callUs)
						}
					}
				}
			}
			for i, h := range res.rep.Host {
				span := repeat * m.CopyNs(cudastub.PathHost, n)
				within(t, fmt.Sprintf("GPU%d host to GPU", i), h.HostToGPU, n*repeat, span, m)
				within(t, fmt.Sprintf("GPU%d GPU to host", i), h.GPUToHost, n*repeat, span, m)
			}
			if mt := res.rep.Method; mt == nil || mt.BandwidthUnit != "GB/s" || mt.LatencyUnit != "us" || mt.GB != 1e9 || mt.WithinGPUFactor != 2 ||
				mt.BandwidthBytes != n || mt.LatencyBytes != small || mt.LatencyRepeat != 100 || mt.Runs != 3 {
				t.Errorf("method %+v", mt)
			}
			if u := res.pair(t, 0, 1).Uni.Unit; u != "GB/s" {
				t.Errorf("unit %q", u)
			}
		})
	}
}

// Corrupted copies: the pair's verdict names the path, the size and the bytes, and the
// summary the NCCL setting that follows (the stand-in's GPUs are not in this machine's
// PCI tree, so their relation is unknown and only disabling P2P is safe).
func TestStandInCorruption(t *testing.T) {
	wrong := cudastub.Corrupted(4096)
	for _, c := range []struct {
		name    string
		corrupt [2]int
		path    string
		env     map[string]string
		advice  string
	}{
		{"peer", [2]int{0, 1}, cudastub.PathPeer, map[string]string{"NCCL_P2P_DISABLE": "1"}, "peer copies arrive corrupted (0000:10:00.0 -> 0000:20:00.0) even between the closest GPUs"},
		{"staged", [2]int{1, 0}, cudastub.PathStaged, map[string]string{}, "copies that do not use peer access arrive corrupted (0000:20:00.0 -> 0000:10:00.0): no NCCL setting cures that"},
		{"within a GPU", [2]int{1, 1}, cudastub.PathLocal, map[string]string{}, "copies that do not use peer access arrive corrupted (0000:20:00.0 -> 0000:20:00.0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := runP2P(t, cudastub.Config{GPUs: 2, Model: cudastub.DefaultModel(), Corrupt: map[[2]int]string{c.corrupt: c.path}},
				"--sizes", "4K,64K", "--size", "64K", "--runs", "1")
			if res.status != 2 || res.error != "" {
				t.Fatalf("exit status %d, want 2; %s\n%s", res.status, res.error, res.stderr)
			}
			res.clean(t)
			want := map[string]string{cudastub.PathPeer: p2p.PathPeer, cudastub.PathStaged: p2p.PathStaged, cudastub.PathLocal: p2p.PathLocal}[c.path]
			p := res.pair(t, c.corrupt[0], c.corrupt[1])
			why := fmt.Sprintf("%s copy of 4 KiB: %d of 8192 bytes wrong over 2 passes", want, 2*wrong)
			if p.Verdict != p2p.Corrupt || !strings.Contains(p.Why, why) || !strings.Contains(p.Why, "the first at offset 0x7") {
				t.Errorf("verdict %s: %s; want %q", p.Verdict, p.Why, why)
			}
			for _, k := range p.Checks {
				bad := int64(0)
				if k.Path == want {
					bad = 2 * cudastub.Corrupted(k.Size)
				}
				if k.Bad != bad {
					t.Errorf("%s check of %d bytes: %d wrong, want %d", k.Path, k.Size, k.Bad, bad)
				}
			}
			for _, q := range res.rep.Pairs {
				if q.Src != p.Src || q.Dst != p.Dst {
					if q.Verdict != p2p.OK {
						t.Errorf("%s -> %s: %s", q.Src, q.Dst, q.Verdict)
					}
				}
			}
			s := res.rep.Summary
			if !s.Corrupt || s.Verdicts[p2p.Corrupt] != 1 || fmt.Sprint(s.Environment) != fmt.Sprint(c.env) || !strings.Contains(strings.Join(s.Advice, "\n"), c.advice) {
				t.Errorf("summary %+v; want environment %v and advice %q", s, c.env, c.advice)
			}
		})
	}
}

// A pair the driver refuses peer access is measured staged only, and the rest as usual.
func TestStandInNoPeer(t *testing.T) {
	res := runP2P(t, cudastub.Config{GPUs: 3, Model: cudastub.DefaultModel(), NoPeer: [][2]int{{0, 2}, {2, 0}}},
		"--sizes", "4K", "--size", "64K", "--runs", "1")
	if res.status != 0 {
		t.Fatalf("exit status %d\n%s", res.status, res.stderr)
	}
	res.clean(t)
	p := res.pair(t, 0, 2)
	if p.Verdict != p2p.NoPeerAccess || p.PeerAccess || len(p.Checks) != 1 || p.Uni.Enabled != 0 || p.Uni.Disabled == 0 || p.Latency.Enabled != 0 {
		t.Errorf("%+v", p)
	}
	if q := res.pair(t, 0, 1); q.Verdict != p2p.OK || q.Uni.Enabled == 0 {
		t.Errorf("%+v", q)
	}
	if !strings.Contains(strings.Join(res.rep.Summary.Advice, "\n"), "2 pairs have no peer access") {
		t.Errorf("advice %q", res.rep.Summary.Advice)
	}
}

// A driver that blocks queuing, as it does when a stream's queue is full, would never get
// room from a held stream: the hold is let go after a while, and the run fails saying so,
// the streams drained and everything released.
func TestStandInFullQueue(t *testing.T) {
	// 50 operations a stream: the latency runs queue 100 copies.
	res := runP2P(t, cudastub.Config{GPUs: 2, Model: cudastub.DefaultModel(), Queue: 50}, "--sizes", "4K", "--size", "64K", "--runs", "1")
	if res.status != 1 || !strings.Contains(res.error, "the driver blocked for over 2s queuing 100 copies while the stream was held back") {
		t.Errorf("exit status %d, error %q\n%s", res.status, res.error, res.stderr)
	}
	res.clean(t)
	// What was measured before is in the report: the host figures come first.
	if len(res.rep.Host) != 2 || res.rep.Host[1].GPUToHost == 0 {
		t.Errorf("host figures %+v", res.rep.Host)
	}
}

// releases are the calls that give something back: when one fails, that one thing stays
// alive, and nothing else may. (Peer access whose disabling fails is disabled again by
// the run's cleanup, so it is not here.)
var releases = map[string]string{
	"cuMemFree_v2": "device_allocations", "cuMemFreeHost": "host_allocations", "cuStreamDestroy_v2": "streams",
	"cuEventDestroy_v2": "events", "cuDevicePrimaryCtxRelease_v2": "context_references",
}

// Every call gpusplit-cuda makes fails in turn, the first time, half-way and the last
// time it is made: the run stops with an error that names it (exit status 4 while
// opening the driver, 1 after), breaks none of the driver's rules on the way out, and
// leaves nothing alive but what the failed call itself could not release.
func TestStandInFailures(t *testing.T) {
	args := []string{"--sizes", "4K", "--size", "64K", "--runs", "1"}
	cfg := cudastub.Config{GPUs: 2, Model: cudastub.DefaultModel()}
	clean := runP2P(t, cfg, args...)
	if clean.status != 0 {
		t.Fatalf("exit status %d\n%s", clean.status, clean.stderr)
	}
	clean.clean(t)
	opening := []string{"cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute", "cuDeviceTotalMem_v2", "cuDevicePrimaryCtxRetain"}
	tried := 0
	for _, call := range cuda.Symbols {
		count := clean.stub.Calls[call]
		if call == "cuGetErrorName" || call == "cuGetErrorString" {
			continue // only called on failures: below
		}
		if count == 0 {
			t.Errorf("gpusplit-cuda never calls %s", call)
			continue
		}
		for _, n := range slices.Compact([]int{1, count/2 + 1, count}) {
			t.Run(fmt.Sprintf("%s %d of %d", call, n, count), func(t *testing.T) {
				cfg := cfg
				cfg.Fail = []cudastub.Fail{{Call: call, N: n}}
				res := runP2P(t, cfg, args...)
				tried++
				status := 1
				if slices.Contains(opening, call) {
					status = 4
				}
				msg := res.error + res.stderr
				if res.status != status || !strings.Contains(msg, call) || !strings.Contains(msg, "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory") {
					t.Errorf("exit status %d (want %d), error %q\n%s", res.status, status, res.error, res.stderr)
				}
				if len(res.stub.Violations) > 0 {
					t.Errorf("violations %q\n%s", res.stub.Violations, res.stderr)
				}
				want := []string{}
				if kind, ok := releases[call]; ok {
					want = []string{kind + " 1"}
				}
				if got := res.stub.Leaks(); !slices.Equal(got, want) {
					t.Errorf("left alive %q, want %q\n%s", got, want, res.stderr)
				}
			})
		}
	}
	// The driver's own words for a code may fail too: the code is still given.
	t.Run("cuGetErrorName and cuGetErrorString", func(t *testing.T) {
		cfg := cfg
		cfg.Fail = []cudastub.Fail{{Call: "cuMemAlloc_v2", N: 2}, {Call: "cuGetErrorName", N: 1}, {Call: "cuGetErrorString", N: 1}}
		res := runP2P(t, cfg, args...)
		if res.status != 1 || !strings.Contains(res.error, "cuMemAlloc_v2 on GPU 0 (0000:10:00.0): CUresult 2 (2)") {
			t.Errorf("exit status %d, error %q\n%s", res.status, res.error, res.stderr)
		}
		res.clean(t)
	})
	if tried < 2*len(cuda.Symbols) {
		t.Errorf("only %d failures tried", tried)
	}
}

// The stand-in exports exactly what the binding needs: a symbol the binding gains
// without the stand-in following, or the reverse, is caught here rather than as a
// failure to open.
func TestStandInSymbols(t *testing.T) {
	_, lib := binaries(t)
	got := exported(t, filepath.Join(lib, cudastub.Library))
	want := slices.Sorted(slices.Values(cuda.Symbols))
	if !slices.Equal(got, want) {
		t.Errorf("the stand-in exports %q\nthe binding needs %q", got, want)
	}
}

// exported lists the functions a shared library defines.
func exported(t *testing.T, path string) []string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF && strings.HasPrefix(s.Name, "cu") {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out
}
