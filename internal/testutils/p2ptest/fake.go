// Package p2ptest has a fake GPU driver for tests of gpusplit p2p: GPUs whose memory is
// Go slices, copies timed by a bandwidth model, and switches to refuse peer access,
// corrupt copies and fail a call. It stands in for internal/cuda above the C API; the
// CUDA binding itself is tested against internal/testutils/cudastub.
package p2ptest

import (
	"fmt"
	"time"

	"github.com/gpusplit/gpusplit/internal/p2p"
)

// Fake is a p2p.Driver whose GPUs keep their memory in Go slices and whose copies take the
// time a bandwidth model says. It can refuse peer access, corrupt copies and fail.
type Fake struct {
	N      int             // GPUs
	NoPeer map[[2]int]bool // from, to: no peer access
	// Corrupt makes copies from, to along a path (p2p.PathPeer, PathStaged, PathLocal)
	// deliver wrong bytes: every 4096th byte from offset 4096 on is flipped.
	Corrupt map[[2]int]string
	// PeerGBps and StagedGBps are the copy rates between GPUs; within one GPU copies run
	// at 1000 GB/s, to and from the host at 25.
	PeerGBps, StagedGBps float64
	// HostCall is the host's time to queue one copy, which Time reports beside the GPU's.
	HostCall  time.Duration
	FailCall  string // the method that fails, once
	FailAfter int    // after this many successful calls of it

	mem  map[uint64][]byte
	dev  map[uint64]int
	next uint64
	// PeerOn is the peer access enabled now, Live the allocations not freed.
	PeerOn map[[2]int]bool
	calls  map[string]int
	Live   int
}

// New returns a fake with n GPUs, 0000:10:00.0, 0000:20:00.0, …, all with peer access,
// copying at 50 GB/s with it and 20 without.
func New(n int) *Fake {
	return &Fake{N: n, NoPeer: map[[2]int]bool{}, Corrupt: map[[2]int]string{}, PeerGBps: 50, StagedGBps: 20, HostCall: 5 * time.Microsecond,
		mem: map[uint64][]byte{}, dev: map[uint64]int{}, next: 0x1000000, PeerOn: map[[2]int]bool{}, calls: map[string]int{}}
}

func (f *Fake) call(name string, dev int) error {
	f.calls[name]++
	if name == f.FailCall && f.calls[name] == f.FailAfter+1 {
		return fmt.Errorf("%s on GPU %d: CUDA_ERROR_LAUNCH_FAILED (719): unspecified launch failure", name, dev)
	}
	return nil
}

// GPUs lists the fake GPUs.
func (f *Fake) GPUs() ([]p2p.GPU, error) {
	var out []p2p.GPU
	for i := range f.N {
		out = append(out, p2p.GPU{Index: i, Name: "NVIDIA H200", Address: fmt.Sprintf("0000:%02x:00.0", 0x10*(i+1)), SM: 90, Memory: 141 << 30})
	}
	return out, nil
}

func (f *Fake) CanAccessPeer(from, to int) (bool, error) {
	return from != to && !f.NoPeer[[2]int{from, to}], f.call("cuDeviceCanAccessPeer", from)
}

func (f *Fake) SetPeerAccess(from, to int, on bool) error {
	if err := f.call("cuCtxEnablePeerAccess", from); err != nil {
		return err
	}
	if on && f.NoPeer[[2]int{from, to}] {
		return fmt.Errorf("cuCtxEnablePeerAccess on GPU %d for GPU %d: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217)", from, to)
	}
	if on {
		f.PeerOn[[2]int{from, to}] = true
	} else {
		delete(f.PeerOn, [2]int{from, to})
	}
	return nil
}

func (f *Fake) Alloc(dev int, n int64) (p2p.Mem, error) {
	if err := f.call("cuMemAlloc", dev); err != nil {
		return p2p.Mem{}, err
	}
	f.next += 1 << 32
	f.mem[f.next] = make([]byte, n)
	f.dev[f.next] = dev
	f.Live++
	return p2p.Mem{Dev: dev, Ptr: f.next, Size: n}, nil
}

func (f *Fake) Free(m p2p.Mem) error {
	if _, ok := f.mem[m.Ptr]; !ok {
		return fmt.Errorf("cuMemFree: %#x is not allocated", m.Ptr)
	}
	delete(f.mem, m.Ptr)
	f.Live--
	return nil
}

func (f *Fake) Write(dst p2p.Mem, src []byte) error {
	if err := f.call("cuMemcpyHtoD", dst.Dev); err != nil {
		return err
	}
	copy(f.mem[dst.Ptr], src)
	return nil
}

func (f *Fake) Read(dst []byte, src p2p.Mem) error {
	if err := f.call("cuMemcpyDtoH", src.Dev); err != nil {
		return err
	}
	copy(dst, f.mem[src.Ptr][:len(dst)])
	return nil
}

func (f *Fake) path(c p2p.Copy) string {
	switch {
	case c.Src.Dev == c.Dst.Dev:
		return p2p.PathLocal
	case f.PeerOn[[2]int{c.Src.Dev, c.Dst.Dev}] || f.PeerOn[[2]int{c.Dst.Dev, c.Src.Dev}]:
		return p2p.PathPeer
	}
	return p2p.PathStaged
}

func (f *Fake) Copy(c p2p.Copy) error {
	if err := f.call("cuMemcpyPeer", c.Src.Dev); err != nil {
		return err
	}
	dst := f.mem[c.Dst.Ptr][:c.N]
	copy(dst, f.mem[c.Src.Ptr][:c.N])
	if f.Corrupt[[2]int{c.Src.Dev, c.Dst.Dev}] == f.path(c) {
		for off := 4096; off < len(dst); off += 4096 {
			dst[off] ^= 0xff
		}
	}
	return nil
}

// rate is the model's GB/s and per-copy overhead of a copy.
func (f *Fake) rate(c p2p.Copy) (float64, time.Duration) {
	switch {
	case c.Src.Dev == p2p.Host || c.Dst.Dev == p2p.Host:
		return 25, 2 * time.Microsecond
	case c.Src.Dev == c.Dst.Dev:
		return 1000, time.Microsecond
	case f.path(c) == p2p.PathPeer:
		return f.PeerGBps, time.Microsecond
	}
	return f.StagedGBps, 10 * time.Microsecond
}

// Time gives the model's times: the copies overlap, each on a stream of its own, so the
// GPU's time is the longest copy's; the host's is HostCall a copy queued.
func (f *Fake) Time(copies []p2p.Copy, repeat int) (p2p.Timing, error) {
	if err := f.call("cuEventElapsedTime", copies[0].Src.Dev); err != nil {
		return p2p.Timing{}, err
	}
	var longest time.Duration
	for _, c := range copies {
		gbps, overhead := f.rate(c)
		t := time.Duration(float64(repeat) * (float64(overhead) + float64(c.N)/(gbps*1e9)*float64(time.Second)))
		longest = max(longest, t)
	}
	return p2p.Timing{GPU: longest, Host: time.Duration(repeat*len(copies)) * f.HostCall}, nil
}

// Close releases the fake's contexts: cuDevicePrimaryCtxRelease_v2 is the call that
// FailCall can make fail.
func (f *Fake) Close() error { return f.call("cuDevicePrimaryCtxRelease_v2", 0) }
