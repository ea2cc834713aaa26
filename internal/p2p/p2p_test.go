package p2p

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// fake is a driver whose GPUs keep their memory in Go slices and whose copies take the
// time a bandwidth model says. It can refuse peer access, corrupt copies and fail.
type fake struct {
	n      int
	noPeer map[[2]int]bool // from, to
	// corrupt makes copies from, to along a path deliver wrong bytes: every 4096th byte
	// from offset 4096 on is flipped.
	corrupt map[[2]int]string
	// peerGBps and stagedGBps are the copy rates between GPUs; within one GPU copies run
	// at 1000 GB/s, to and from the host at 25.
	peerGBps, stagedGBps float64
	failCall             string // the method that fails, once
	failAfter            int    // after this many successful calls of it

	mem    map[uint64][]byte
	dev    map[uint64]int
	next   uint64
	peerOn map[[2]int]bool
	calls  map[string]int
	live   int // allocations not freed
}

func newFake(n int) *fake {
	return &fake{n: n, noPeer: map[[2]int]bool{}, corrupt: map[[2]int]string{}, peerGBps: 50, stagedGBps: 20,
		mem: map[uint64][]byte{}, dev: map[uint64]int{}, next: 0x1000000, peerOn: map[[2]int]bool{}, calls: map[string]int{}}
}

func (f *fake) call(name string, dev int) error {
	f.calls[name]++
	if name == f.failCall && f.calls[name] == f.failAfter+1 {
		return fmt.Errorf("%s on GPU %d: CUDA_ERROR_LAUNCH_FAILED (719): unspecified launch failure", name, dev)
	}
	return nil
}

func (f *fake) GPUs() ([]GPU, error) {
	var out []GPU
	for i := range f.n {
		out = append(out, GPU{Index: i, Name: "NVIDIA H200", Address: fmt.Sprintf("0000:%02x:00.0", 0x10*(i+1)), SM: 90, Memory: 141 << 30})
	}
	return out, nil
}

func (f *fake) CanAccessPeer(from, to int) (bool, error) {
	return from != to && !f.noPeer[[2]int{from, to}], f.call("cuDeviceCanAccessPeer", from)
}

func (f *fake) SetPeerAccess(from, to int, on bool) error {
	if err := f.call("cuCtxEnablePeerAccess", from); err != nil {
		return err
	}
	if on && f.noPeer[[2]int{from, to}] {
		return fmt.Errorf("cuCtxEnablePeerAccess on GPU %d for GPU %d: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217)", from, to)
	}
	if on {
		f.peerOn[[2]int{from, to}] = true
	} else {
		delete(f.peerOn, [2]int{from, to})
	}
	return nil
}

func (f *fake) Alloc(dev int, n int64) (Mem, error) {
	if err := f.call("cuMemAlloc", dev); err != nil {
		return Mem{}, err
	}
	f.next += 1 << 32
	f.mem[f.next] = make([]byte, n)
	f.dev[f.next] = dev
	f.live++
	return Mem{Dev: dev, Ptr: f.next, Size: n}, nil
}

func (f *fake) Free(m Mem) error {
	if _, ok := f.mem[m.Ptr]; !ok {
		return fmt.Errorf("cuMemFree: %#x is not allocated", m.Ptr)
	}
	delete(f.mem, m.Ptr)
	f.live--
	return nil
}

func (f *fake) Write(dst Mem, src []byte) error {
	if err := f.call("cuMemcpyHtoD", dst.Dev); err != nil {
		return err
	}
	copy(f.mem[dst.Ptr], src)
	return nil
}

func (f *fake) Read(dst []byte, src Mem) error {
	if err := f.call("cuMemcpyDtoH", src.Dev); err != nil {
		return err
	}
	copy(dst, f.mem[src.Ptr][:len(dst)])
	return nil
}

func (f *fake) path(c Copy) string {
	switch {
	case c.Src.Dev == c.Dst.Dev:
		return PathLocal
	case f.peerOn[[2]int{c.Src.Dev, c.Dst.Dev}] || f.peerOn[[2]int{c.Dst.Dev, c.Src.Dev}]:
		return PathPeer
	}
	return PathStaged
}

func (f *fake) Copy(c Copy) error {
	if err := f.call("cuMemcpyPeer", c.Src.Dev); err != nil {
		return err
	}
	dst := f.mem[c.Dst.Ptr][:c.N]
	copy(dst, f.mem[c.Src.Ptr][:c.N])
	if f.corrupt[[2]int{c.Src.Dev, c.Dst.Dev}] == f.path(c) {
		for off := 4096; off < len(dst); off += 4096 {
			dst[off] ^= 0xff
		}
	}
	return nil
}

// rate is the model's GB/s and per-copy overhead of a copy.
func (f *fake) rate(c Copy) (float64, time.Duration) {
	switch {
	case c.Src.Dev == Host || c.Dst.Dev == Host:
		return 25, 2 * time.Microsecond
	case c.Src.Dev == c.Dst.Dev:
		return 1000, time.Microsecond
	case f.path(c) == PathPeer:
		return f.peerGBps, time.Microsecond
	}
	return f.stagedGBps, 10 * time.Microsecond
}

func (f *fake) Time(copies []Copy, repeat int) (time.Duration, error) {
	if err := f.call("cuEventElapsedTime", copies[0].Src.Dev); err != nil {
		return 0, err
	}
	var longest time.Duration
	for _, c := range copies {
		gbps, overhead := f.rate(c)
		t := time.Duration(float64(repeat) * (float64(overhead) + float64(c.N)/(gbps*1e9)*float64(time.Second)))
		longest = max(longest, t)
	}
	return longest, nil
}

func (f *fake) Close() error { return nil }

// small keeps the runs quick: the fake copies real bytes.
var small = Options{Sizes: []int64{4 << 10, 1 << 20}, BandwidthSize: 64 << 20, Runs: 3}

func relations(rel map[[2]int]string, def string) func(a, b string) string {
	return func(a, b string) string {
		var i, j int
		fmt.Sscanf(a, "0000:%02x:00.0", &i)
		fmt.Sscanf(b, "0000:%02x:00.0", &j)
		if r, ok := rel[[2]int{i/0x10 - 1, j/0x10 - 1}]; ok {
			return r
		}
		if r, ok := rel[[2]int{j/0x10 - 1, i/0x10 - 1}]; ok {
			return r
		}
		return def
	}
}

func check(t *testing.T, f *fake) {
	t.Helper()
	if f.live != 0 {
		t.Errorf("%d allocations left", f.live)
	}
	if len(f.peerOn) != 0 {
		t.Errorf("peer access left enabled: %v", f.peerOn)
	}
}

func near(got, want float64) bool { return math.Abs(got-want) < 0.02*want }

func TestAllIntact(t *testing.T) {
	f := newFake(4)
	opt := small
	opt.Relation = relations(nil, "NODE")
	opt.LinkGBps = func(string) float64 { return 63 }
	rep, err := Run(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	check(t, f)
	if len(rep.Pairs) != 16 || rep.Summary.Verdicts[OK] != 16 || rep.Summary.Corrupt || len(rep.Summary.Environment) != 0 {
		t.Fatalf("summary %+v", rep.Summary)
	}
	p := rep.pair(0, 1)
	if len(p.Checks) != 4 || p.Checks[0].Path != PathStaged || p.Checks[2].Path != PathPeer {
		t.Errorf("checks %+v", p.Checks)
	}
	// 64 MiB at 50 GB/s plus 1 µs a copy; both ways at once count both directions.
	want := float64(64<<20) / (float64(64<<20)/50e9 + 1e-6) / 1e9
	if !near(p.Uni.Enabled, want) || !near(p.Bi.Enabled, 2*want) || !near(p.Uni.Disabled, float64(64<<20)/(float64(64<<20)/20e9+10e-6)/1e9) {
		t.Errorf("figures %+v %+v, want about %.2f", p.Uni, p.Bi, want)
	}
	if p.Latency.Enabled < 1 || p.Latency.Enabled > 1.01 || p.Latency.Disabled < 10 || p.Latency.Disabled > 10.01 {
		t.Errorf("latency %+v", p.Latency)
	}
	if self := rep.pair(2, 2); self.Checks[0].Path != PathLocal || self.Uni.Disabled < 900 || self.Verdict != OK {
		t.Errorf("within GPU2: %+v", self)
	}
	if len(rep.Host) != 4 || !near(rep.Host[0].HostToGPU, float64(64<<20)/(float64(64<<20)/25e9+2e-6)/1e9) {
		t.Errorf("host %+v", rep.Host)
	}
	if !strings.Contains(strings.Join(rep.Summary.Advice, "\n"), "every copy arrived intact") {
		t.Errorf("advice %q", rep.Summary.Advice)
	}
}

// Peer copies that corrupt: the pair is corrupt with where and how much; NCCL's P2P is
// limited to the paths below the lowest corrupt one, or disabled.
func TestCorruptPeer(t *testing.T) {
	for _, c := range []struct {
		name    string
		rel     map[[2]int]string
		corrupt [2]int
		env     string
	}{
		{"across sockets", map[[2]int]string{{0, 2}: "SYS", {0, 3}: "SYS", {1, 2}: "SYS", {1, 3}: "SYS"}, [2]int{0, 2}, "NCCL_P2P_LEVEL=PHB"},
		{"between root complexes", map[[2]int]string{{0, 1}: "NODE"}, [2]int{1, 0}, "NCCL_P2P_LEVEL=PXB"},
		{"behind one switch", map[[2]int]string{{0, 1}: "PIX"}, [2]int{0, 1}, "NCCL_P2P_DISABLE=1"},
		{"unknown relation", map[[2]int]string{{0, 1}: ""}, [2]int{0, 1}, "NCCL_P2P_DISABLE=1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(4)
			f.corrupt[c.corrupt] = PathPeer
			opt := small
			opt.IntegrityOnly = true
			opt.Relation = relations(c.rel, "PXB")
			rep, err := Run(f, opt)
			if err != nil {
				t.Fatal(err)
			}
			check(t, f)
			p := rep.pair(c.corrupt[0], c.corrupt[1])
			if p.Verdict != Corrupt || !strings.Contains(p.Why, "peer copy of 1 MiB: 510 of 2097152 bytes wrong over 2 passes") || !strings.Contains(p.Why, "offset 0x1000") {
				t.Errorf("verdict %s: %s", p.Verdict, p.Why)
			}
			if p.Checks[0].Bad != 0 {
				t.Errorf("the staged copy is intact, yet %+v", p.Checks[0])
			}
			if back := rep.pair(c.corrupt[1], c.corrupt[0]); back.Verdict != OK {
				t.Errorf("the other direction: %s", back.Verdict)
			}
			var env []string
			for k, v := range rep.Summary.Environment {
				env = append(env, k+"="+v)
			}
			if strings.Join(env, " ") != c.env || !rep.Summary.Corrupt || rep.Summary.Verdicts[Corrupt] != 1 {
				t.Errorf("environment %v, want %s; summary %+v", env, c.env, rep.Summary)
			}
		})
	}
}

// Corruption without peer access is no P2P setting's business.
func TestCorruptStaged(t *testing.T) {
	f := newFake(2)
	f.corrupt[[2]int{1, 0}] = PathStaged
	opt := small
	opt.IntegrityOnly = true
	rep, err := Run(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	if rep.pair(1, 0).Verdict != Corrupt || len(rep.Summary.Environment) != 0 || !strings.Contains(rep.Summary.Advice[0], "no NCCL setting cures that") {
		t.Errorf("%+v", rep.Summary)
	}
}

func TestNoPeerAccess(t *testing.T) {
	f := newFake(3)
	f.noPeer[[2]int{0, 1}] = true
	f.noPeer[[2]int{1, 0}] = true
	rep, err := Run(f, small)
	if err != nil {
		t.Fatal(err)
	}
	check(t, f)
	p := rep.pair(0, 1)
	if p.Verdict != NoPeerAccess || p.PeerAccess || len(p.Checks) != 2 || p.Uni.Enabled != 0 || p.Uni.Disabled == 0 {
		t.Errorf("%+v", p)
	}
	if rep.pair(0, 2).Verdict != OK || !strings.Contains(strings.Join(rep.Summary.Advice, "\n"), "2 pairs have no peer access") {
		t.Errorf("%+v", rep.Summary)
	}
}

func TestSlow(t *testing.T) {
	f := newFake(2)
	f.peerGBps = 12
	opt := small
	opt.Relation = relations(nil, "PIX")
	opt.LinkGBps = func(string) float64 { return 31.5 }
	rep, err := Run(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.pair(0, 1); p.Verdict != Slow || !strings.Contains(p.Why, "under 60% of the 31.5 GB/s of the link, expected of a PIX pair") {
		t.Errorf("%s: %s", p.Verdict, p.Why)
	}
	// The same rate across sockets is what such a path gives.
	opt.Relation = relations(nil, "SYS")
	if rep, err = Run(newFake(2), Options{Sizes: small.Sizes, BandwidthSize: small.BandwidthSize, Runs: 1, Relation: opt.Relation, LinkGBps: opt.LinkGBps}); err != nil {
		t.Fatal(err)
	}
	if p := rep.pair(0, 1); p.Verdict != OK {
		t.Errorf("SYS at 50 GB/s: %s", p.Verdict)
	}
}

// A driver that fails half-way: the error names the call and the GPU, and everything
// allocated or enabled is undone.
func TestFailsHalfWay(t *testing.T) {
	for _, call := range []string{"cuMemcpyPeer", "cuMemAlloc", "cuEventElapsedTime", "cuCtxEnablePeerAccess"} {
		t.Run(call, func(t *testing.T) {
			f := newFake(3)
			f.failCall, f.failAfter = call, 5
			rep, err := Run(f, small)
			if err == nil || !strings.Contains(err.Error(), call+" on GPU") {
				t.Fatalf("err = %v", err)
			}
			check(t, f)
			if rep == nil || rep.Summary.Verdicts[OK] != 0 {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

func TestOneGPU(t *testing.T) {
	f := newFake(1)
	rep, err := Run(f, small)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pairs) != 1 || rep.Pairs[0].Verdict != OK || rep.Pairs[0].Uni.Disabled == 0 || len(rep.Host) != 1 || rep.Host[0].GPUToHost == 0 {
		t.Errorf("%+v", rep)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "all 1 pairs ok") {
		t.Errorf("%s", b.String())
	}
}

func TestWriteText(t *testing.T) {
	f := newFake(4)
	f.corrupt[[2]int{0, 2}] = PathPeer
	opt := small
	opt.Relation = relations(map[[2]int]string{{0, 2}: "SYS", {0, 3}: "SYS", {1, 2}: "SYS", {1, 3}: "SYS"}, "NODE")
	rep, err := Run(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	out := b.String()
	for _, want := range []string{
		"GPU0  0000:10:00.0  NVIDIA H200  sm 90  141 GiB",
		"Unidirectional bandwidth, P2P enabled (GB/s)",
		"Latency, P2P disabled (us)",
		"Host <-> GPU bandwidth (GB/s)",
		"GPU0 -> GPU2 (SYS, 0000:10:00.0 -> 0000:30:00.0): corrupt: peer copy of 1 MiB",
		"export NCCL_P2P_LEVEL=PHB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The pattern differs by position, pass and seed, and a wrong copy cannot match it.
func TestPattern(t *testing.T) {
	a, b := make([]byte, 4099), make([]byte, 4099)
	fill(a, 1, 0)
	fill(b, 1, 1)
	if bytes.Equal(a, b) {
		t.Fatal("two passes fill the same bytes")
	}
	if bad, first := compare(a, 1, 0); bad != 0 || first != -1 {
		t.Fatalf("the pattern does not match itself: %d at %d", bad, first)
	}
	if bad, _ := compare(make([]byte, 4099), 1, 0); bad < 4000 {
		t.Errorf("zeros match the pattern in all but %d bytes", bad)
	}
	shifted := append([]byte{0}, a[:4098]...)
	if bad, first := compare(shifted, 1, 0); bad < 4000 || first != 0 {
		t.Errorf("a copy shifted by a byte: %d wrong, first at %d", bad, first)
	}
	c := make([]byte, 4099)
	fill(c, 2, 0)
	if bad, _ := compare(c, 1, 0); bad < 4000 {
		t.Errorf("another seed matches in all but %d bytes", bad)
	}
}
