package p2p

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Options tune a run; the zero value is the default run.
type Options struct {
	// Only, when set, are the PCI addresses of the GPUs to check; the others are left
	// alone.
	Only []string
	// Sizes are the copy sizes of the integrity check (default 4 KiB, 64 KiB, 1 MiB,
	// 16 MiB, 256 MiB), each checked Passes times (default 2) with a pattern of its own.
	Sizes  []int64
	Passes int
	// IntegrityOnly skips the measurements.
	IntegrityOnly bool
	// BandwidthSize is the size of the timed copies (default 256 MiB), each run copying
	// it Repeat times (default 5); LatencySize (default 16 bytes) is copied
	// LatencyRepeat times (default 100). Every figure is the median of Runs timed runs
	// (default 5), after one untimed run.
	BandwidthSize, LatencySize int64
	Repeat, LatencyRepeat      int
	Runs                       int
	// Relation gives the topology relation (X, PIX, PXB, PHB, NODE, SYS) of two GPUs by
	// PCI address; "" when unknown.
	Relation func(a, b string) string
	// LinkGBps gives the one-way rate of a GPU's PCIe link in GB/s (PCIe 5.0 x16: 63.0);
	// 0 when unknown.
	LinkGBps func(addr string) float64
	// Progress, when set, hears what is being done.
	Progress func(string)
}

func (o *Options) defaults() {
	if len(o.Sizes) == 0 {
		o.Sizes = []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20}
	}
	o.Passes = cmp.Or(o.Passes, 2)
	o.BandwidthSize = cmp.Or(o.BandwidthSize, 256<<20)
	o.LatencySize = cmp.Or(o.LatencySize, 16)
	o.Repeat = cmp.Or(o.Repeat, 5)
	o.LatencyRepeat = cmp.Or(o.LatencyRepeat, 100)
	o.Runs = cmp.Or(o.Runs, 5)
	if o.Relation == nil {
		o.Relation = func(a, b string) string { return "" }
	}
	if o.LinkGBps == nil {
		o.LinkGBps = func(string) float64 { return 0 }
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
}

// Paths of a copy.
const (
	PathLocal  = "local"  // within one GPU
	PathPeer   = "peer"   // between GPUs with peer access enabled: the GPUs move the bytes
	PathStaged = "staged" // between GPUs without peer access: through host memory
)

// Check is one integrity check: a copy of Size bytes along a path, Passes times.
type Check struct {
	Path     string  `json:"path"`
	Size     int64   `json:"size"`
	Bad      int64   `json:"bad_bytes"`        // over all passes
	FirstBad int64   `json:"first_bad_offset"` // -1 when none
	Fraction float64 `json:"fraction_bad"`
}

// Units of the figures.
const (
	UnitGBps = "GB/s" // 10^9 bytes a second
	UnitUs   = "us"   // microseconds
)

// Figures are a pair's measurements with peer access disabled and enabled (0 when not
// measured), in Unit.
type Figures struct {
	Unit     string  `json:"unit"`
	Disabled float64 `json:"disabled"`
	Enabled  float64 `json:"enabled"`
}

func (f *Figures) set(enabled bool, v float64) {
	if enabled {
		f.Enabled = v
	} else {
		f.Disabled = v
	}
}

// Pair is an ordered pair of GPUs, data going from Src to Dst (Src == Dst: within one).
type Pair struct {
	Src        string  `json:"src"`
	Dst        string  `json:"dst"`
	Relation   string  `json:"relation"`
	PeerAccess bool    `json:"peer_access"`
	Checks     []Check `json:"checks"`
	// Uni and Bi are bandwidths; Bi is both directions at once, their sum. Within a GPU
	// both count the bytes read and the bytes written, twice the bytes copied.
	Uni Figures `json:"unidirectional_gbps"`
	Bi  Figures `json:"bidirectional_gbps"`
	// Latency is the GPU's time for one small copy; HostLatency the host's time to queue
	// one (p2pBandwidthLatencyTest's GPU and CPU latency).
	Latency     Figures `json:"latency_us"`
	HostLatency Figures `json:"host_latency_us"`
	Verdict     string  `json:"verdict"`
	Why         string  `json:"why"`
	src, dst    int
}

// HostFigures are a GPU's copies to and from pinned host memory, in GB/s.
type HostFigures struct {
	GPU       string  `json:"gpu"`
	HostToGPU float64 `json:"host_to_device_gbps"`
	GPUToHost float64 `json:"device_to_host_gbps"`
}

// Report is what a run found.
type Report struct {
	Method  *Method       `json:"method,omitempty"` // how the figures were taken; nil with IntegrityOnly
	GPUs    []GPU         `json:"gpus"`
	Pairs   []Pair        `json:"pairs"`
	Host    []HostFigures `json:"host"`
	Summary Summary       `json:"summary"`
}

// Run checks and measures every ordered pair of the driver's GPUs. It returns what it
// found up to an error as well as the error; either way it frees what it allocated and
// disables the peer access it enabled.
func Run(d Driver, opt Options) (rep *Report, err error) {
	opt.defaults()
	gpus, err := d.GPUs()
	if err != nil {
		return nil, err
	}
	if len(gpus) == 0 {
		return nil, errors.New("the CUDA driver sees no GPU")
	}
	if len(opt.Only) > 0 {
		var seen []string
		gpus = slices.DeleteFunc(gpus, func(g GPU) bool {
			keep := slices.Contains(opt.Only, g.Address)
			if keep {
				seen = append(seen, g.Address)
			}
			return !keep
		})
		for _, a := range opt.Only {
			if !slices.Contains(seen, a) {
				return nil, fmt.Errorf("%s is not a GPU the CUDA driver sees (it may be on another driver than nvidia)", a)
			}
		}
	}
	r := &runner{d: d, opt: opt, gpus: gpus, enabled: map[[2]int]bool{}}
	rep = &Report{GPUs: gpus, Pairs: []Pair{}, Host: []HostFigures{}}
	if !opt.IntegrityOnly {
		rep.Method = method(opt)
	}
	defer func() {
		if cerr := r.cleanup(); err == nil {
			err = cerr
		}
		rep.Summary = summarize(rep.Pairs, opt)
	}()
	if err := r.alloc(); err != nil {
		return rep, err
	}
	for i := range gpus {
		for j := range gpus {
			p := Pair{Src: gpus[i].Address, Dst: gpus[j].Address, src: i, dst: j, Checks: []Check{},
				Uni: Figures{Unit: UnitGBps}, Bi: Figures{Unit: UnitGBps}, Latency: Figures{Unit: UnitUs}, HostLatency: Figures{Unit: UnitUs}}
			if i == j {
				p.Relation = "X"
			} else {
				p.Relation = opt.Relation(p.Src, p.Dst)
				if p.PeerAccess, err = d.CanAccessPeer(gpus[i].Index, gpus[j].Index); err != nil {
					return rep, err
				}
			}
			rep.Pairs = append(rep.Pairs, p)
		}
	}
	for k := range rep.Pairs {
		if err := r.integrity(&rep.Pairs[k]); err != nil {
			return rep, err
		}
	}
	if !opt.IntegrityOnly {
		for i := range gpus {
			h, err := r.hostFigures(i)
			if err != nil {
				return rep, err
			}
			rep.Host = append(rep.Host, h)
		}
		for k := range rep.Pairs {
			if err := r.measure(&rep.Pairs[k]); err != nil {
				return rep, err
			}
		}
	}
	for k := range rep.Pairs {
		verdict(&rep.Pairs[k], opt)
	}
	return rep, nil
}

type runner struct {
	d        Driver
	opt      Options
	gpus     []GPU
	src, dst []Mem // a source and a destination buffer on each GPU
	host     Mem   // pinned host memory for the host figures
	buf, out []byte
	allocs   []Mem
	enabled  map[[2]int]bool
}

func (r *runner) alloc() error {
	size := slices.Max(r.opt.Sizes)
	if !r.opt.IntegrityOnly {
		size = max(size, r.opt.BandwidthSize)
	}
	r.buf, r.out = make([]byte, size), make([]byte, size)
	get := func(dev int) (Mem, error) {
		m, err := r.d.Alloc(dev, size)
		if err == nil {
			r.allocs = append(r.allocs, m)
		}
		return m, err
	}
	for _, g := range r.gpus {
		s, err := get(g.Index)
		if err != nil {
			return err
		}
		t, err := get(g.Index)
		if err != nil {
			return err
		}
		r.src, r.dst = append(r.src, s), append(r.dst, t)
	}
	if !r.opt.IntegrityOnly {
		h, err := get(Host)
		if err != nil {
			return err
		}
		r.host = h
	}
	return nil
}

// peer enables or disables peer access between GPUs i and j (both ways that the driver
// allows), keeping track so that cleanup can undo it.
func (r *runner) peer(i, j int, on bool) error {
	for _, e := range [][2]int{{i, j}, {j, i}} {
		if on {
			ok, err := r.d.CanAccessPeer(r.gpus[e[0]].Index, r.gpus[e[1]].Index)
			if err != nil || !ok {
				if err != nil {
					return err
				}
				continue
			}
		} else if !r.enabled[e] {
			continue
		}
		if err := r.d.SetPeerAccess(r.gpus[e[0]].Index, r.gpus[e[1]].Index, on); err != nil {
			return err
		}
		if on {
			r.enabled[e] = true
		} else {
			delete(r.enabled, e)
		}
	}
	return nil
}

func (r *runner) cleanup() error {
	var errs []error
	for e := range r.enabled {
		errs = append(errs, r.d.SetPeerAccess(r.gpus[e[0]].Index, r.gpus[e[1]].Index, false))
	}
	clear(r.enabled)
	for _, m := range r.allocs {
		errs = append(errs, r.d.Free(m))
	}
	r.allocs = nil
	return errors.Join(errs...)
}

// integrity copies a pattern along each path of a pair and compares what arrives.
func (r *runner) integrity(p *Pair) error {
	paths := []string{PathLocal}
	if p.src != p.dst {
		paths = []string{PathStaged}
		if p.PeerAccess {
			paths = append(paths, PathPeer)
		}
	}
	seed := uint64(p.src)<<8 | uint64(p.dst)
	for _, path := range paths {
		r.opt.Progress(fmt.Sprintf("integrity %s -> %s (%s)", p.Src, p.Dst, path))
		if err := r.peer(p.src, p.dst, path == PathPeer); err != nil {
			return err
		}
		for _, size := range r.opt.Sizes {
			c := Check{Path: path, Size: size, FirstBad: -1}
			for pass := range r.opt.Passes {
				in, out := r.buf[:size], r.out[:size]
				fill(in, seed, pass)
				if err := r.d.Write(r.src[p.src], in); err != nil {
					return err
				}
				// Something else in the destination first, so that a copy that does
				// not happen cannot pass.
				fill(out, ^seed, pass)
				if err := r.d.Write(r.dst[p.dst], out); err != nil {
					return err
				}
				if err := r.d.Copy(Copy{Dst: r.dst[p.dst], Src: r.src[p.src], N: size}); err != nil {
					return err
				}
				if err := r.d.Read(out, r.dst[p.dst]); err != nil {
					return err
				}
				bad, first := compare(out, seed, pass)
				if bad > 0 && c.FirstBad < 0 {
					c.FirstBad = first
				}
				c.Bad += bad
			}
			c.Fraction = float64(c.Bad) / float64(size*int64(r.opt.Passes))
			p.Checks = append(p.Checks, c)
		}
		if err := r.peer(p.src, p.dst, false); err != nil {
			return err
		}
	}
	return nil
}

// timed runs copies Runs times after an untimed warm-up.
func (r *runner) timed(copies []Copy, repeat int) ([]Timing, error) {
	if _, err := r.d.Time(copies, repeat); err != nil {
		return nil, err
	}
	out := make([]Timing, 0, r.opt.Runs)
	for range r.opt.Runs {
		t, err := r.d.Time(copies, repeat)
		if err != nil {
			return nil, err
		}
		if t.GPU <= 0 {
			return nil, fmt.Errorf("the driver timed %d copies at %s", repeat, t.GPU)
		}
		out = append(out, t)
	}
	return out, nil
}

func median(vals []float64) float64 {
	slices.Sort(vals)
	return vals[len(vals)/2]
}

// bandwidth is the median over the runs of the bytes of all copies, each copied Repeat
// times, over the GPU's time for them, in GB/s.
func (r *runner) bandwidth(copies []Copy) (float64, error) {
	runs, err := r.timed(copies, r.opt.Repeat)
	if err != nil {
		return 0, err
	}
	var bytes int64
	for _, c := range copies {
		bytes += c.N * int64(r.opt.Repeat)
	}
	vals := make([]float64, len(runs))
	for k, t := range runs {
		vals[k] = float64(bytes) / t.GPU.Seconds() / 1e9
	}
	return median(vals), nil
}

// latency is the median over the runs of the GPU's time per copy (a run's span over its
// LatencyRepeat copies, queued before the stream may start) and of the host's time to
// queue one, in µs.
func (r *runner) latency(c Copy) (gpu, host float64, err error) {
	runs, err := r.timed([]Copy{c}, r.opt.LatencyRepeat)
	if err != nil {
		return 0, 0, err
	}
	g, h := make([]float64, len(runs)), make([]float64, len(runs))
	for k, t := range runs {
		g[k] = float64(t.GPU) / float64(time.Microsecond) / float64(r.opt.LatencyRepeat)
		h[k] = float64(t.Host) / float64(time.Microsecond) / float64(r.opt.LatencyRepeat)
	}
	return median(g), median(h), nil
}

func (r *runner) hostFigures(i int) (HostFigures, error) {
	r.opt.Progress("host <-> " + r.gpus[i].Address)
	n := r.opt.BandwidthSize
	h := HostFigures{GPU: r.gpus[i].Address}
	var err error
	if h.HostToGPU, err = r.bandwidth([]Copy{{Dst: r.dst[i], Src: r.host, N: n}}); err != nil {
		return h, err
	}
	h.GPUToHost, err = r.bandwidth([]Copy{{Dst: r.host, Src: r.src[i], N: n}})
	return h, err
}

// measure times a pair: unidirectional and bidirectional bandwidth and latency, with
// peer access disabled, then enabled where the driver allows it. A GPU with itself is
// measured in both, as p2pBandwidthLatencyTest does: its copies never use peer access.
func (r *runner) measure(p *Pair) error {
	i, j := p.src, p.dst
	n := r.opt.BandwidthSize
	there := Copy{Dst: r.dst[j], Src: r.src[i], N: n}
	back := Copy{Dst: r.dst[i], Src: r.src[j], N: n}
	// Within a GPU every byte copied is read from its memory and written to it, and
	// p2pBandwidthLatencyTest counts both: twice the bytes. Both ways is then between
	// the GPU's two buffers.
	scale := 1.0
	if i == j {
		back, scale = Copy{Dst: r.src[i], Src: r.dst[i], N: n}, 2
	}
	small := Copy{Dst: r.dst[j], Src: r.src[i], N: r.opt.LatencySize}
	for _, on := range []bool{false, true} {
		if on && i != j && !p.PeerAccess {
			break
		}
		if i == j {
			r.opt.Progress(fmt.Sprintf("bandwidth within %s (%s matrix)", p.Src, map[bool]string{false: "P2P disabled", true: "P2P enabled"}[on]))
		} else {
			r.opt.Progress(fmt.Sprintf("bandwidth %s -> %s, peer access %v", p.Src, p.Dst, on))
			if err := r.peer(i, j, on); err != nil {
				return err
			}
		}
		uni, err := r.bandwidth([]Copy{there})
		if err != nil {
			return err
		}
		bi, err := r.bandwidth([]Copy{there, back})
		if err != nil {
			return err
		}
		gpu, host, err := r.latency(small)
		if err != nil {
			return err
		}
		p.Uni.set(on, scale*uni)
		p.Bi.set(on, scale*bi)
		p.Latency.set(on, gpu)
		p.HostLatency.set(on, host)
	}
	if i == j {
		return nil
	}
	return r.peer(i, j, false)
}
