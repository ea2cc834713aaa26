package cudastub

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The stand-in's own rules, each broken on purpose: the call fails with the driver's
// code and the stand-in records why. Each case runs in a process of its own (this test
// binary again), since the library reads its configuration once, when it is loaded.

// api is the part of the stand-in the cases call, bound by purego as gpusplit-cuda binds
// the driver; the tag is the exported symbol.
type api struct {
	Init          func(flags uint32) uint32                                                            `sym:"cuInit"`
	CanAccessPeer func(ok *int32, dev, peer int32) uint32                                              `sym:"cuDeviceCanAccessPeer"`
	Retain        func(ctx *uintptr, dev int32) uint32                                                 `sym:"cuDevicePrimaryCtxRetain"`
	Release       func(dev int32) uint32                                                               `sym:"cuDevicePrimaryCtxRelease_v2"`
	SetCurrent    func(ctx uintptr) uint32                                                             `sym:"cuCtxSetCurrent"`
	EnablePeer    func(peer uintptr, flags uint32) uint32                                              `sym:"cuCtxEnablePeerAccess"`
	Alloc         func(p *uint64, n uint64) uint32                                                     `sym:"cuMemAlloc_v2"`
	Free          func(p uint64) uint32                                                                `sym:"cuMemFree_v2"`
	HostAlloc     func(p *unsafe.Pointer, n uint64, flags uint32) uint32                               `sym:"cuMemHostAlloc"`
	FreeHost      func(p unsafe.Pointer) uint32                                                        `sym:"cuMemFreeHost"`
	DevicePointer func(d *uint64, p unsafe.Pointer, flags uint32) uint32                               `sym:"cuMemHostGetDevicePointer_v2"`
	HtoD          func(dst uint64, src unsafe.Pointer, n uint64) uint32                                `sym:"cuMemcpyHtoD_v2"`
	DtoH          func(dst unsafe.Pointer, src uint64, n uint64) uint32                                `sym:"cuMemcpyDtoH_v2"`
	Peer          func(dst uint64, dctx uintptr, src uint64, sctx uintptr, n uint64) uint32            `sym:"cuMemcpyPeer"`
	PeerAsync     func(dst uint64, dctx uintptr, src uint64, sctx uintptr, n uint64, s uintptr) uint32 `sym:"cuMemcpyPeerAsync"`
	HtoDAsync     func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) uint32                     `sym:"cuMemcpyHtoDAsync_v2"`
	StreamCreate  func(s *uintptr, flags uint32) uint32                                                `sym:"cuStreamCreate"`
	StreamDestroy func(s uintptr) uint32                                                               `sym:"cuStreamDestroy_v2"`
	WaitValue     func(s uintptr, addr uint64, value, flags uint32) uint32                             `sym:"cuStreamWaitValue32_v2"`
	Synchronize   func(s uintptr) uint32                                                               `sym:"cuStreamSynchronize"`
	EventCreate   func(ev *uintptr, flags uint32) uint32                                               `sym:"cuEventCreate"`
	EventRecord   func(ev, s uintptr) uint32                                                           `sym:"cuEventRecord"`
	EventElapsed  func(ms *float32, a, b uintptr) uint32                                               `sym:"cuEventElapsedTime"`
	EventDestroy  func(ev uintptr) uint32                                                              `sym:"cuEventDestroy_v2"`
}

func bind(path string) (*api, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, err
	}
	a := &api{}
	v, ty := reflect.ValueOf(a).Elem(), reflect.TypeOf(a).Elem()
	for i := range ty.NumField() {
		purego.RegisterLibFunc(v.Field(i).Addr().Interface(), h, ty.Field(i).Tag.Get("sym"))
	}
	return a, nil
}

// setup is the usual start: initialised, device 0's context current, a buffer on each
// device.
type setup struct {
	a    *api
	ctx  [2]uintptr
	buf  [2]uint64
	size uint64
}

func start(a *api) *setup {
	s := &setup{a: a, size: 1 << 16}
	a.Init(0)
	for d := range 2 {
		a.Retain(&s.ctx[d], int32(d))
		a.SetCurrent(s.ctx[d])
		a.Alloc(&s.buf[d], s.size)
	}
	a.SetCurrent(s.ctx[0])
	return s
}

// heldStream is a stream of device 0 waiting on a mapped pinned word, and the word.
func (s *setup) heldStream() (stream uintptr, word *uint32) {
	var p unsafe.Pointer
	var dptr uint64
	s.a.HostAlloc(&p, 4, 3) // CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP
	s.a.DevicePointer(&dptr, p, 0)
	s.a.StreamCreate(&stream, 1)
	s.a.WaitValue(stream, dptr, 1, 0)
	return stream, (*uint32)(p)
}

// timedCopies records an event, queues n copies of 16 bytes within device 0, records
// another and returns the time between them once the stream is released.
func (s *setup) timedCopies(stream uintptr, release func(), n int) float32 {
	var start, stop uintptr
	s.a.EventCreate(&start, 0)
	s.a.EventCreate(&stop, 0)
	s.a.EventRecord(start, stream)
	for range n {
		s.a.PeerAsync(s.buf[0]+64, s.ctx[0], s.buf[0], s.ctx[0], 16, stream)
	}
	s.a.EventRecord(stop, stream)
	release()
	s.a.Synchronize(stream)
	var ms float32
	s.a.EventElapsed(&ms, start, stop)
	return ms
}

// cases are what each process does; each returns the results the parent checks, by name.
var cases = map[string]func(a *api) map[string]any{
	"before cuInit": func(a *api) map[string]any {
		var p uintptr
		return map[string]any{"retain": a.Retain(&p, 0)}
	},
	"no context": func(a *api) map[string]any {
		a.Init(0)
		var p uint64
		return map[string]any{"alloc": a.Alloc(&p, 4096)}
	},
	"context current on another thread": func(a *api) map[string]any {
		s := start(a)
		done := make(chan uint32)
		go func() {
			runtime.LockOSThread()
			var p uint64
			done <- a.Alloc(&p, 4096) // this thread has no context current
		}()
		r := <-done
		s.tidy()
		return map[string]any{"alloc": r}
	},
	"outside the allocation": func(a *api) map[string]any {
		s := start(a)
		b := make([]byte, 16)
		r := a.HtoD(s.buf[0]+s.size-8, unsafe.Pointer(&b[0]), 16)
		s.tidy()
		return map[string]any{"copy": r}
	},
	"another device's memory": func(a *api) map[string]any {
		s := start(a)
		r := a.Peer(s.buf[0], s.ctx[1], s.buf[1], s.ctx[0], 16) // contexts swapped
		s.tidy()
		return map[string]any{"copy": r}
	},
	"pageable memory in an async copy": func(a *api) map[string]any {
		s := start(a)
		var st uintptr
		a.StreamCreate(&st, 1)
		b := make([]byte, 16)
		r := a.HtoDAsync(s.buf[0], unsafe.Pointer(&b[0]), 16, st)
		a.StreamDestroy(st)
		s.tidy()
		return map[string]any{"copy": r}
	},
	"host address as the wait's": func(a *api) map[string]any {
		s := start(a)
		var p unsafe.Pointer
		var st uintptr
		a.HostAlloc(&p, 4, 3)
		a.StreamCreate(&st, 1)
		r := a.WaitValue(st, uint64(uintptr(p)), 1, 0)
		a.StreamDestroy(st)
		a.FreeHost(p)
		s.tidy()
		return map[string]any{"wait": r}
	},
	"freed while queued": func(a *api) map[string]any {
		s := start(a)
		st, word := s.heldStream()
		a.PeerAsync(s.buf[1], s.ctx[1], s.buf[0], s.ctx[0], 16, st)
		free := a.Free(s.buf[0])
		atomic.StoreUint32(word, 1)
		sync := a.Synchronize(st)
		return map[string]any{"free": free, "sync": sync, "free after": a.Free(s.buf[0])}
	},
	"synchronised while held": func(a *api) map[string]any {
		s := start(a)
		st, _ := s.heldStream()
		return map[string]any{"sync": a.Synchronize(st), "destroy": a.StreamDestroy(st)}
	},
	"held until released": func(a *api) map[string]any {
		s := start(a)
		st, word := s.heldStream()
		ms := s.timedCopies(st, func() { atomic.StoreUint32(word, 1) }, 100)
		return map[string]any{"us per copy": float64(ms) * 1e3 / 100}
	},
	"not held": func(a *api) map[string]any {
		s := start(a)
		var st uintptr
		a.StreamCreate(&st, 1)
		ms := s.timedCopies(st, func() {}, 100)
		return map[string]any{"us per copy": float64(ms) * 1e3 / 100}
	},
	"the second allocation fails": func(a *api) map[string]any {
		a.Init(0)
		var ctx uintptr
		var p [3]uint64
		a.Retain(&ctx, 0)
		a.SetCurrent(ctx)
		out := map[string]any{}
		for k := range 3 {
			out[fmt.Sprint("alloc ", k+1)] = a.Alloc(&p[k], 4096)
		}
		return out
	},
	"left alive": func(a *api) map[string]any {
		s := start(a)
		var st, ev uintptr
		a.StreamCreate(&st, 1)
		a.EventCreate(&ev, 0)
		a.EnablePeer(s.ctx[1], 0)
		return map[string]any{}
	},
	"corrupt peer copies": func(a *api) map[string]any {
		s := start(a)
		in, out := make([]byte, 8192), make([]byte, 8192)
		res := map[string]any{}
		for _, on := range []bool{false, true} {
			if on {
				a.EnablePeer(s.ctx[1], 0)
			}
			a.HtoD(s.buf[0], unsafe.Pointer(&in[0]), 8192)
			a.Peer(s.buf[1], s.ctx[1], s.buf[0], s.ctx[0], 8192)
			a.SetCurrent(s.ctx[1])
			a.DtoH(unsafe.Pointer(&out[0]), s.buf[1], 8192)
			a.SetCurrent(s.ctx[0])
			var wrong []int
			for i := range out {
				if out[i] != in[i] {
					wrong = append(wrong, i)
				}
			}
			res[fmt.Sprint("wrong with peer access ", on)] = wrong
		}
		return res
	},
	"no peer access": func(a *api) map[string]any {
		s := start(a)
		var ok, back int32
		a.CanAccessPeer(&ok, 0, 1)
		a.CanAccessPeer(&back, 1, 0)
		return map[string]any{"can": ok, "back": back, "enable": a.EnablePeer(s.ctx[1], 0)}
	},
}

// tidy releases what start took.
func (s *setup) tidy() {
	for d := range 2 {
		s.a.SetCurrent(s.ctx[d])
		s.a.Free(s.buf[d])
	}
	s.a.SetCurrent(0)
	for d := range 2 {
		s.a.Release(int32(d))
	}
}

func TestMain(m *testing.M) {
	if name := os.Getenv("CUDASTUB_CASE"); name != "" {
		// A case's process: contexts are current per thread, so one thread does it all.
		runtime.LockOSThread()
		a, err := bind(os.Getenv("CUDASTUB_LIBRARY"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		json.NewEncoder(os.Stdout).Encode(cases[name](a))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// run runs a case in a process of its own on a stand-in set up as cfg.
func run(t *testing.T, lib, name string, cfg Config) (map[string]any, *Report) {
	t.Helper()
	cfg.Report = filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "CUDASTUB_CASE="+name, "CUDASTUB_LIBRARY="+lib), cfg.Env()...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%s: %v: %s", name, err, out)
	}
	rep, err := ReadReport(cfg.Report)
	if err != nil {
		t.Fatal(err)
	}
	return res, rep
}

func TestRules(t *testing.T) {
	dir := t.TempDir()
	if err := Build(dir); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, Library)
	m := DefaultModel()
	m.CallUs = 20
	for _, c := range []struct {
		name       string
		cfg        Config
		want       map[string]any // JSON numbers are float64
		violations []string       // in order, each a part of one
		leaks      []string
	}{
		{"before cuInit", Config{GPUs: 2}, map[string]any{"retain": 3.0}, []string{"cuDevicePrimaryCtxRetain: called before cuInit"}, nil},
		{"no context", Config{GPUs: 2}, map[string]any{"alloc": 201.0}, []string{"cuMemAlloc_v2: no context is current on this thread"}, nil},
		{"context current on another thread", Config{GPUs: 2}, map[string]any{"alloc": 201.0}, []string{"cuMemAlloc_v2: no context is current on this thread"}, nil},
		{"outside the allocation", Config{GPUs: 2}, map[string]any{"copy": 1.0}, []string{"cuMemcpyHtoD_v2: dstDevice", "+16) is not inside device memory"}, nil},
		{"another device's memory", Config{GPUs: 2}, map[string]any{"copy": 1.0}, []string{"cuMemcpyPeer: dstDevice", "is on device 0, not 1"}, nil},
		{"pageable memory in an async copy", Config{GPUs: 2}, map[string]any{"copy": 1.0}, []string{"cuMemcpyHtoDAsync_v2: srcHost", "is not inside pinned memory"}, nil},
		{"host address as the wait's", Config{GPUs: 2}, map[string]any{"wait": 1.0}, []string{"cuStreamWaitValue32_v2: addr", "is a host address"}, nil},
		{"freed while queued", Config{GPUs: 2}, map[string]any{"free": 401.0, "sync": 0.0, "free after": 0.0},
			[]string{"cuMemFree_v2: ", "is freed while queued work that has not run yet uses it"},
			[]string{"context_references 2", "device_allocations 1", "host_allocations 1", "streams 1"}},
		{"synchronised while held", Config{GPUs: 2}, map[string]any{"sync": 401.0, "destroy": 401.0},
			[]string{"cuStreamSynchronize: would wait for ever", "cuStreamDestroy_v2: destroyed with work queued that can never run"},
			[]string{"context_references 2", "device_allocations 2", "host_allocations 1", "streams 1"}},
		{"the second allocation fails", Config{GPUs: 2, Fail: []Fail{{Call: "cuMemAlloc_v2", N: 2}}},
			map[string]any{"alloc 1": 0.0, "alloc 2": 2.0, "alloc 3": 0.0}, nil, []string{"context_references 1", "device_allocations 2"}},
		{"left alive", Config{GPUs: 2}, map[string]any{}, nil,
			[]string{"context_references 2", "device_allocations 2", "events 1", "peer_mappings 1", "streams 1"}},
		{"corrupt peer copies", Config{GPUs: 2, Corrupt: map[[2]int]string{{0, 1}: PathPeer}},
			map[string]any{"wrong with peer access false": nil, "wrong with peer access true": []any{7.0, 4103.0}}, nil,
			[]string{"context_references 2", "device_allocations 2", "peer_mappings 1"}},
		{"no peer access", Config{GPUs: 2, NoPeer: [][2]int{{0, 1}}}, map[string]any{"can": 0.0, "back": 1.0, "enable": 217.0}, nil,
			[]string{"context_references 2", "device_allocations 2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Model = m
			got, rep := run(t, lib, c.name, c.cfg)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("results %v, want %v", got, c.want)
			}
			all := strings.Join(rep.Violations, "\n")
			for _, v := range c.violations {
				if !strings.Contains(all, v) {
					t.Errorf("violations %q lack %q", rep.Violations, v)
				}
			}
			if len(c.violations) == 0 && len(rep.Violations) > 0 {
				t.Errorf("violations %q", rep.Violations)
			}
			if leaks := rep.Leaks(); !slices.Equal(leaks, c.leaks) {
				t.Errorf("alive %q, want %q", leaks, c.leaks)
			}
		})
	}
}

// A stream held until its copies are queued times the copies, whatever a call costs the
// host; one that runs as they are queued times the host's pace: the difference that the
// p2p latency figure depends on.
func TestClock(t *testing.T) {
	dir := t.TempDir()
	if err := Build(dir); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, Library)
	m := DefaultModel()
	m.CallUs = 10 * m.LocalUs
	copyUs := m.CopyNs(PathLocal, 16) / 1e3
	held, _ := run(t, lib, "held until released", Config{GPUs: 2, Model: m})
	free, _ := run(t, lib, "not held", Config{GPUs: 2, Model: m})
	// 100 copies over the events' resolution: within resolution/100 of the model.
	tol := m.ResolutionUs / 100
	if got := held["us per copy"].(float64); got < copyUs-tol || got > copyUs+tol {
		t.Errorf("held: %.4f us a copy, the model's copy takes %.4f", got, copyUs)
	}
	// Not held, the span is the host's 101 calls: the copies' and the stop event's.
	if got, pace := free["us per copy"].(float64), m.CallUs*101/100; got < pace-tol || got > pace+tol {
		t.Errorf("not held: %.4f us a copy, the host's pace gives %.4f", got, pace)
	}
}
