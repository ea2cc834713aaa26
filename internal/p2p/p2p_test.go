package p2p_test

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/p2p"
	"github.com/gpusplit/gpusplit/internal/testutils/p2ptest"
)

// small keeps the runs quick: the fake copies real bytes.
var small = p2p.Options{Sizes: []int64{4 << 10, 1 << 20}, BandwidthSize: 64 << 20, Runs: 3}

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

func check(t *testing.T, f *p2ptest.Fake) {
	t.Helper()
	if f.Live != 0 {
		t.Errorf("%d allocations left", f.Live)
	}
	if len(f.PeerOn) != 0 {
		t.Errorf("peer access left enabled: %v", f.PeerOn)
	}
}

func near(got, want float64) bool { return math.Abs(got-want) < 0.02*want }

func TestAllIntact(t *testing.T) {
	f := p2ptest.New(4)
	opt := small
	opt.Relation = relations(nil, "NODE")
	opt.LinkGBps = func(string) float64 { return 63 }
	rep, err := p2p.Run(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	check(t, f)
	if len(rep.Pairs) != 16 || rep.Summary.Verdicts[p2p.OK] != 16 || rep.Summary.Corrupt || len(rep.Summary.Environment) != 0 {
		t.Fatalf("summary %+v", rep.Summary)
	}
	p := rep.Pair(0, 1)
	if len(p.Checks) != 4 || p.Checks[0].Path != p2p.PathStaged || p.Checks[2].Path != p2p.PathPeer {
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
	// The host's time to queue a copy is its own figure, not folded into the GPU's.
	if p.HostLatency.Enabled != 5 || p.HostLatency.Disabled != 5 || p.Latency.Unit != "us" || p.HostLatency.Unit != "us" || p.Uni.Unit != "GB/s" {
		t.Errorf("host latency %+v, units %q %q %q", p.HostLatency, p.Latency.Unit, p.HostLatency.Unit, p.Uni.Unit)
	}
	// Within a GPU the bytes count twice (read and written), in both matrices, and both
	// ways at once twice again.
	self := rep.Pair(2, 2)
	local := float64(64<<20) / (float64(64<<20)/1000e9 + 1e-6) / 1e9
	if self.Checks[0].Path != p2p.PathLocal || self.Verdict != p2p.OK || !near(self.Uni.Disabled, 2*local) || !near(self.Uni.Enabled, 2*local) ||
		!near(self.Bi.Disabled, 4*local) || !near(self.Bi.Enabled, 4*local) || self.Latency.Enabled == 0 || self.HostLatency.Disabled == 0 {
		t.Errorf("within GPU2: %+v; want %.1f GB/s one way", self, 2*local)
	}
	if m := rep.Method; m == nil || m.WithinGPUFactor != 2 || m.GB != 1e9 || m.Runs != 3 || m.LatencyRepeat != 100 || m.BandwidthBytes != 64<<20 || !strings.Contains(m.Bidirectional, "sum") {
		t.Errorf("method %+v", m)
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
			f := p2ptest.New(4)
			f.Corrupt[c.corrupt] = p2p.PathPeer
			opt := small
			opt.IntegrityOnly = true
			opt.Relation = relations(c.rel, "PXB")
			rep, err := p2p.Run(f, opt)
			if err != nil {
				t.Fatal(err)
			}
			check(t, f)
			p := rep.Pair(c.corrupt[0], c.corrupt[1])
			if p.Verdict != p2p.Corrupt || !strings.Contains(p.Why, "peer copy of 1 MiB: 510 of 2097152 bytes wrong over 2 passes") || !strings.Contains(p.Why, "offset 0x1000") {
				t.Errorf("verdict %s: %s", p.Verdict, p.Why)
			}
			if p.Checks[0].Bad != 0 {
				t.Errorf("the staged copy is intact, yet %+v", p.Checks[0])
			}
			if back := rep.Pair(c.corrupt[1], c.corrupt[0]); back.Verdict != p2p.OK {
				t.Errorf("the other direction: %s", back.Verdict)
			}
			var env []string
			for k, v := range rep.Summary.Environment {
				env = append(env, k+"="+v)
			}
			if strings.Join(env, " ") != c.env || !rep.Summary.Corrupt || rep.Summary.Verdicts[p2p.Corrupt] != 1 {
				t.Errorf("environment %v, want %s; summary %+v", env, c.env, rep.Summary)
			}
		})
	}
}

// edgeFlipper is the fake driver with peer copies from GPU 0 to GPU 1 that arrive with
// the bytes at the offsets chosen from the copy's length flipped.
type edgeFlipper struct {
	*p2ptest.Fake
	at func(n int64) []int64
}

func (d edgeFlipper) Copy(c p2p.Copy) error {
	if err := d.Fake.Copy(c); err != nil {
		return err
	}
	if c.Src.Dev != 0 || c.Dst.Dev != 1 || !d.PeerOn[[2]int{0, 1}] && !d.PeerOn[[2]int{1, 0}] {
		return nil
	}
	b := make([]byte, c.N)
	if err := d.Fake.Read(b, c.Dst); err != nil {
		return err
	}
	for _, off := range d.at(c.N) {
		b[off] ^= 0xff
	}
	return d.Fake.Write(c.Dst, b)
}

// A wrong byte at either end of a buffer is found and counted exactly: one per pass in
// each size checked, the first at its offset.
func TestCorruptPeerEdges(t *testing.T) {
	for _, c := range []struct {
		name  string
		at    func(n int64) []int64
		bad   int64 // per pass
		first func(n int64) int64
		why   string
	}{
		{"the first byte", func(n int64) []int64 { return []int64{0} }, 1,
			func(n int64) int64 { return 0 }, "peer copy of 4 KiB: 2 of 8192 bytes wrong over 2 passes (0.0244%), the first at offset 0x0"},
		{"the last byte", func(n int64) []int64 { return []int64{n - 1} }, 1,
			func(n int64) int64 { return n - 1 }, "peer copy of 4 KiB: 2 of 8192 bytes wrong over 2 passes (0.0244%), the first at offset 0xfff"},
		{"both ends", func(n int64) []int64 { return []int64{0, n - 1} }, 2,
			func(n int64) int64 { return 0 }, "peer copy of 4 KiB: 4 of 8192 bytes wrong over 2 passes (0.0488%), the first at offset 0x0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := p2ptest.New(2)
			opt := small
			opt.IntegrityOnly = true
			rep, err := p2p.Run(edgeFlipper{f, c.at}, opt)
			if err != nil {
				t.Fatal(err)
			}
			check(t, f)
			p := rep.Pair(0, 1)
			if p.Verdict != p2p.Corrupt || p.Why != c.why {
				t.Errorf("verdict %s: %s\nwant %s", p.Verdict, p.Why, c.why)
			}
			var peer int
			for _, k := range p.Checks {
				want, first := int64(0), int64(-1)
				if k.Path == p2p.PathPeer {
					peer++
					want, first = 2*c.bad, c.first(k.Size)
				}
				if k.Bad != want || k.FirstBad != first {
					t.Errorf("%s copy of %d bytes: %d wrong, the first at %d; want %d, the first at %d", k.Path, k.Size, k.Bad, k.FirstBad, want, first)
				}
			}
			if peer != len(small.Sizes) {
				t.Errorf("%d peer checks, want %d", peer, len(small.Sizes))
			}
			if back := rep.Pair(1, 0); back.Verdict != p2p.OK {
				t.Errorf("the other direction: %s", back.Verdict)
			}
		})
	}
}

// Corruption without peer access is no P2P setting's business.
func TestCorruptStaged(t *testing.T) {
	f := p2ptest.New(2)
	f.Corrupt[[2]int{1, 0}] = p2p.PathStaged
	opt := small
	opt.IntegrityOnly = true
	rep, err := p2p.Run(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pair(1, 0).Verdict != p2p.Corrupt || len(rep.Summary.Environment) != 0 || !strings.Contains(rep.Summary.Advice[0], "no NCCL setting cures that") {
		t.Errorf("%+v", rep.Summary)
	}
}

func TestNoPeerAccess(t *testing.T) {
	f := p2ptest.New(3)
	f.NoPeer[[2]int{0, 1}] = true
	f.NoPeer[[2]int{1, 0}] = true
	rep, err := p2p.Run(f, small)
	if err != nil {
		t.Fatal(err)
	}
	check(t, f)
	p := rep.Pair(0, 1)
	if p.Verdict != p2p.NoPeerAccess || p.PeerAccess || len(p.Checks) != 2 || p.Uni.Enabled != 0 || p.Uni.Disabled == 0 {
		t.Errorf("%+v", p)
	}
	if rep.Pair(0, 2).Verdict != p2p.OK || !strings.Contains(strings.Join(rep.Summary.Advice, "\n"), "2 pairs have no peer access") {
		t.Errorf("%+v", rep.Summary)
	}
}

func TestSlow(t *testing.T) {
	f := p2ptest.New(2)
	f.PeerGBps = 12
	opt := small
	opt.Relation = relations(nil, "PIX")
	opt.LinkGBps = func(string) float64 { return 31.5 }
	rep, err := p2p.Run(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Pair(0, 1); p.Verdict != p2p.Slow || !strings.Contains(p.Why, "under 60% of the 31.5 GB/s of the link, expected of a PIX pair") {
		t.Errorf("%s: %s", p.Verdict, p.Why)
	}
	// The same rate across sockets is what such a path gives.
	opt.Relation = relations(nil, "SYS")
	if rep, err = p2p.Run(p2ptest.New(2), p2p.Options{Sizes: small.Sizes, BandwidthSize: small.BandwidthSize, Runs: 1, Relation: opt.Relation, LinkGBps: opt.LinkGBps}); err != nil {
		t.Fatal(err)
	}
	if p := rep.Pair(0, 1); p.Verdict != p2p.OK {
		t.Errorf("SYS at 50 GB/s: %s", p.Verdict)
	}
}

// A driver that fails half-way: the error names the call and the GPU, and everything
// allocated or enabled is undone.
func TestFailsHalfWay(t *testing.T) {
	for _, call := range []string{"cuMemcpyPeer", "cuMemAlloc", "cuEventElapsedTime", "cuCtxEnablePeerAccess"} {
		t.Run(call, func(t *testing.T) {
			f := p2ptest.New(3)
			f.FailCall, f.FailAfter = call, 5
			rep, err := p2p.Run(f, small)
			if err == nil || !strings.Contains(err.Error(), call+" on GPU") {
				t.Fatalf("err = %v", err)
			}
			check(t, f)
			if rep == nil || rep.Summary.Verdicts[p2p.OK] != 0 {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

func TestOneGPU(t *testing.T) {
	f := p2ptest.New(1)
	rep, err := p2p.Run(f, small)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pairs) != 1 || rep.Pairs[0].Verdict != p2p.OK || rep.Pairs[0].Uni.Disabled == 0 || len(rep.Host) != 1 || rep.Host[0].GPUToHost == 0 {
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
	f := p2ptest.New(4)
	f.Corrupt[[2]int{0, 2}] = p2p.PathPeer
	opt := small
	opt.Relation = relations(map[[2]int]string{{0, 2}: "SYS", {0, 3}: "SYS", {1, 2}: "SYS", {1, 3}: "SYS"}, "NODE")
	rep, err := p2p.Run(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	out := b.String()
	for _, want := range []string{
		"GPU0  0000:10:00.0  NVIDIA H200  sm 90  141 GiB",
		"Unidirectional bandwidth, P2P enabled (GB/s)",
		"Latency, P2P disabled, GPU (us)",
		"Latency, P2P enabled, CPU (us)",
		"bidirectional: both directions at once, each on a stream of its own: the sum of the two",
		"within a GPU: a GPU with itself (the diagonal): bytes read plus bytes written",
		"Host <-> GPU bandwidth (GB/s)",
		"GPU0 -> GPU2 (SYS, 0000:10:00.0 -> 0000:30:00.0): corrupt: peer copy of 1 MiB",
		"export NCCL_P2P_LEVEL=PHB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The diagonal is in the P2P enabled matrices too, with the same figure.
	for _, title := range []string{"Unidirectional bandwidth", "Bidirectional bandwidth", "Latency"} {
		for i := range 4 {
			off, on := cell(t, out, title+", P2P disabled", i, i), cell(t, out, title+", P2P enabled", i, i)
			if off == "-" || off != on {
				t.Errorf("%s GPU%d with itself: %q disabled, %q enabled", title, i, off, on)
			}
		}
	}
}

// cell reads row i, column j of the first matrix whose title starts with title.
func cell(t *testing.T, out, title string, i, j int) string {
	t.Helper()
	lines := strings.Split(out, "\n")
	for k, l := range lines {
		if !strings.HasPrefix(l, title) || k+2+i >= len(lines) {
			continue
		}
		row := strings.Fields(lines[k+2+i])
		if len(row) > j+1 && row[0] == fmt.Sprintf("GPU%d", i) {
			return row[j+1]
		}
	}
	t.Fatalf("no matrix %q with row %d in\n%s", title, i, out)
	return ""
}
