// Package cudastub builds and configures a stand-in for NVIDIA's CUDA driver library, for
// tests that run the real gpusplit-cuda binary on a machine without a GPU: a small C
// library (csrc/libcuda.c) compiled in the test with the system's C compiler and found by the
// binary through LD_LIBRARY_PATH, as the real libcuda.so.1 would be. It never ships, and
// gpusplit stays free of cgo: only the test machine needs a compiler.
//
// The library keeps GPU memory in host memory, times copies by a model on a virtual
// clock per stream, checks every call against the driver's rules (and a few stricter
// ones), fails, refuses or corrupts on request, and counts what is alive; csrc/libcuda.c says
// how. Config sets it up through the environment; ReadReport reads what it counted.
package cudastub

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

//go:embed csrc/libcuda.c
var source []byte

// Library is the file name Build writes, the one internal/cuda loads.
const Library = "libcuda.so.1"

// ErrNoCompiler is Build's error without a C compiler.
var ErrNoCompiler = errors.New("no C compiler (cc) on the PATH to build the CUDA stand-in: ./scripts/vm-deps installs gcc")

// Build compiles the stand-in into dir/libcuda.so.1, for LD_LIBRARY_PATH=dir.
func Build(dir string) error {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return ErrNoCompiler
	}
	src := filepath.Join(dir, "libcuda.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return err
	}
	cmd := exec.Command(cc, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden",
		"-shared", "-fPIC", "-o", filepath.Join(dir, Library), src)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the CUDA stand-in: %s: %v\n%s", cmd, err, out)
	}
	return nil
}

// Paths of a copy, as the stand-in times and corrupts them.
const (
	PathLocal  = "local"  // within a GPU
	PathPeer   = "peer"   // between GPUs with peer access enabled
	PathStaged = "staged" // between GPUs without it
	PathHost   = "host"   // to or from pinned host memory
)

// Model is the stand-in's timing: a copy takes its path's latency plus its bytes over its
// path's bandwidth (GB/s, 10^9 bytes), every call costs the host CallUs, and events are
// read to ResolutionUs.
type Model struct {
	PeerGBps, StagedGBps, LocalGBps, HostGBps float64
	PeerUs, StagedUs, LocalUs, HostUs         float64
	CallUs, ResolutionUs                      float64
}

// DefaultModel is the model the library starts with.
func DefaultModel() Model {
	return Model{PeerGBps: 50, StagedGBps: 20, LocalGBps: 1000, HostGBps: 25,
		PeerUs: 2, StagedUs: 10, LocalUs: 1, HostUs: 3, ResolutionUs: 0.5}
}

func (m Model) String() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return strings.Join([]string{
		"peer_gbps=" + f(m.PeerGBps), "staged_gbps=" + f(m.StagedGBps), "local_gbps=" + f(m.LocalGBps), "host_gbps=" + f(m.HostGBps),
		"peer_us=" + f(m.PeerUs), "staged_us=" + f(m.StagedUs), "local_us=" + f(m.LocalUs), "host_us=" + f(m.HostUs),
		"call_us=" + f(m.CallUs), "resolution_us=" + f(m.ResolutionUs),
	}, ",")
}

// CopyNs is the model's time for one copy of n bytes along a path, in ns.
func (m Model) CopyNs(path string, n int64) float64 {
	p := map[string]struct{ gbps, us float64 }{
		PathLocal: {m.LocalGBps, m.LocalUs}, PathPeer: {m.PeerGBps, m.PeerUs},
		PathStaged: {m.StagedGBps, m.StagedUs}, PathHost: {m.HostGBps, m.HostUs},
	}[path]
	return p.us*1e3 + float64(n)/p.gbps
}

// Corrupted is how many bytes a corrupting pair gets wrong in a copy of n bytes: every
// 4096th from offset 7.
func Corrupted(n int64) int64 {
	if n <= 7 {
		return 0
	}
	return (n - 7 + 4095) / 4096
}

// Fail makes the N-th call (from 1) of a function fail with Code (0:
// CUDA_ERROR_OUT_OF_MEMORY) and no effect.
type Fail struct {
	Call string
	N    int
	Code int
}

// Config is what the stand-in is to be.
type Config struct {
	GPUs    int // 0: none, and cuInit says so
	Model   Model
	NoPeer  [][2]int          // pairs (from, to) that cuDeviceCanAccessPeer refuses
	Corrupt map[[2]int]string // pairs (src, dst) whose copies along a path corrupt
	Fail    []Fail
	// Queue is how many operations a stream holds before a call that queues one more
	// blocks until there is room, as the driver's does (0: no limit).
	Queue  int
	Report string // the file the counters go to
}

// Env is the environment that sets the stand-in up as c says.
func (c Config) Env() []string {
	env := []string{"CUDASTUB_GPUS=" + strconv.Itoa(c.GPUs), "CUDASTUB_MODEL=" + c.Model.String(), "CUDASTUB_REPORT=" + c.Report,
		"CUDASTUB_QUEUE=" + strconv.Itoa(c.Queue)}
	var l []string
	for _, p := range c.NoPeer {
		l = append(l, fmt.Sprintf("%d>%d", p[0], p[1]))
	}
	env = append(env, "CUDASTUB_NOPEER="+strings.Join(l, ","))
	l = nil
	for p, path := range c.Corrupt {
		l = append(l, fmt.Sprintf("%d>%d:%s", p[0], p[1], path))
	}
	env = append(env, "CUDASTUB_CORRUPT="+strings.Join(l, ","))
	l = nil
	for _, f := range c.Fail {
		s := fmt.Sprintf("%s:%d", f.Call, f.N)
		if f.Code != 0 {
			s += fmt.Sprintf(":%d", f.Code)
		}
		l = append(l, s)
	}
	return append(env, "CUDASTUB_FAIL="+strings.Join(l, ","))
}

// Report is what the stand-in counted: calls by function, what is alive by kind
// (device_allocations, host_allocations, context_references, streams, events,
// peer_mappings), and the calls that broke the driver's rules.
type Report struct {
	Calls      map[string]int
	Live       map[string]int
	Violations []string
}

// ReadReport reads the report file of a run.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Report{Calls: map[string]int{}, Live: map[string]int{}}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		kind, rest, _ := strings.Cut(l, " ")
		switch kind {
		case "call", "live":
			name, n, _ := strings.Cut(rest, " ")
			v, err := strconv.Atoi(n)
			if err != nil {
				return nil, fmt.Errorf("%s: %q", path, l)
			}
			map[string]map[string]int{"call": r.Calls, "live": r.Live}[kind][name] = v
		case "violation":
			r.Violations = append(r.Violations, rest)
		default:
			return nil, fmt.Errorf("%s: %q", path, l)
		}
	}
	if len(r.Live) == 0 {
		return nil, fmt.Errorf("%s: no counters", path)
	}
	return r, nil
}

// Leaks lists what is still alive, "kind n", sorted.
func (r *Report) Leaks() []string {
	var out []string
	for k, n := range r.Live {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s %d", k, n))
		}
	}
	slices.Sort(out)
	return out
}
