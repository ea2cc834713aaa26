//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpusplit/gpusplit/internal/p2p"
)

// api holds the driver's entry points, bound by their exported names: several are
// versioned (_v2) behind cuda.h's #defines.
type api struct {
	cuInit                    func(flags uint32) uint32
	cuDeviceGetCount          func(n *int32) uint32
	cuDeviceGet               func(dev *int32, ordinal int32) uint32
	cuDeviceGetName           func(name *byte, n int32, dev int32) uint32
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) uint32
	cuDeviceTotalMem          func(bytes *uint64, dev int32) uint32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) uint32
	cuDevicePrimaryCtxRelease func(dev int32) uint32
	cuCtxSetCurrent           func(ctx uintptr) uint32
	cuDeviceCanAccessPeer     func(ok *int32, dev, peer int32) uint32
	cuCtxEnablePeerAccess     func(peer uintptr, flags uint32) uint32
	cuCtxDisablePeerAccess    func(peer uintptr) uint32
	cuMemAlloc                func(p *uint64, n uint64) uint32
	cuMemFree                 func(p uint64) uint32
	cuMemHostAlloc            func(p *unsafe.Pointer, n uint64, flags uint32) uint32
	cuMemFreeHost             func(p unsafe.Pointer) uint32
	cuMemcpyHtoD              func(dst uint64, src unsafe.Pointer, n uint64) uint32
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, n uint64) uint32
	cuMemcpyPeer              func(dst uint64, dstCtx uintptr, src uint64, srcCtx uintptr, n uint64) uint32
	cuMemcpyPeerAsync         func(dst uint64, dstCtx uintptr, src uint64, srcCtx uintptr, n uint64, stream uintptr) uint32
	cuMemcpyHtoDAsync         func(dst uint64, src uintptr, n uint64, stream uintptr) uint32
	cuMemcpyDtoHAsync         func(dst uintptr, src uint64, n uint64, stream uintptr) uint32
	cuStreamCreate            func(s *uintptr, flags uint32) uint32
	cuStreamDestroy           func(s uintptr) uint32
	cuStreamWaitEvent         func(s, ev uintptr, flags uint32) uint32
	cuStreamWaitValue32       func(s uintptr, addr uint64, value, flags uint32) uint32
	cuStreamSynchronize       func(s uintptr) uint32
	cuMemHostGetDevicePointer func(d *uint64, p unsafe.Pointer, flags uint32) uint32
	cuEventCreate             func(ev *uintptr, flags uint32) uint32
	cuEventRecord             func(ev, s uintptr) uint32
	cuEventElapsedTime        func(ms *float32, start, end uintptr) uint32
	cuEventDestroy            func(ev uintptr) uint32
	cuGetErrorName            func(res uint32, s **byte) uint32
	cuGetErrorString          func(res uint32, s **byte) uint32
}

// symbols names each entry point's exported symbol. Symbols (cuda.go) lists the same
// names for the tests, which check both libraries against it.
func (a *api) symbols() map[string]any {
	return map[string]any{
		"cuInit": &a.cuInit, "cuDeviceGetCount": &a.cuDeviceGetCount,
		"cuDeviceGet": &a.cuDeviceGet, "cuDeviceGetName": &a.cuDeviceGetName, "cuDeviceGetAttribute": &a.cuDeviceGetAttribute,
		"cuDeviceTotalMem_v2": &a.cuDeviceTotalMem, "cuDevicePrimaryCtxRetain": &a.cuDevicePrimaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2": &a.cuDevicePrimaryCtxRelease, "cuCtxSetCurrent": &a.cuCtxSetCurrent,
		"cuDeviceCanAccessPeer": &a.cuDeviceCanAccessPeer, "cuCtxEnablePeerAccess": &a.cuCtxEnablePeerAccess,
		"cuCtxDisablePeerAccess": &a.cuCtxDisablePeerAccess, "cuMemAlloc_v2": &a.cuMemAlloc, "cuMemFree_v2": &a.cuMemFree,
		"cuMemHostAlloc": &a.cuMemHostAlloc, "cuMemFreeHost": &a.cuMemFreeHost,
		"cuMemHostGetDevicePointer_v2": &a.cuMemHostGetDevicePointer, "cuMemcpyHtoD_v2": &a.cuMemcpyHtoD,
		"cuMemcpyDtoH_v2": &a.cuMemcpyDtoH, "cuMemcpyPeer": &a.cuMemcpyPeer, "cuMemcpyPeerAsync": &a.cuMemcpyPeerAsync,
		"cuMemcpyHtoDAsync_v2": &a.cuMemcpyHtoDAsync, "cuMemcpyDtoHAsync_v2": &a.cuMemcpyDtoHAsync,
		"cuStreamCreate": &a.cuStreamCreate, "cuStreamDestroy_v2": &a.cuStreamDestroy, "cuStreamWaitEvent": &a.cuStreamWaitEvent,
		"cuStreamWaitValue32_v2": &a.cuStreamWaitValue32, "cuStreamSynchronize": &a.cuStreamSynchronize,
		"cuEventCreate": &a.cuEventCreate, "cuEventRecord": &a.cuEventRecord,
		"cuEventElapsedTime": &a.cuEventElapsedTime, "cuEventDestroy_v2": &a.cuEventDestroy,
		"cuGetErrorName": &a.cuGetErrorName, "cuGetErrorString": &a.cuGetErrorString,
	}
}

// checkSymbols panics unless the binding and the list the tests check the libraries
// against name the same symbols. Open runs it: a mismatch is a bug of the build, found
// before any call through the binding.
func checkSymbols() {
	var a api
	m := a.symbols()
	for _, name := range Symbols {
		delete(m, name)
	}
	if len(m) != 0 || len(a.symbols()) != len(Symbols) {
		panic(fmt.Sprintf("cuda: the binding's symbols and Symbols differ: %v", m))
	}
}

// Driver is the CUDA driver, with a primary context retained on every device. CUDA
// makes a context current per OS thread, so Open locks the calling goroutine to its
// thread until Close.
type Driver struct {
	a       api
	gpus    []p2p.GPU
	dev     []int32 // CUdevice of each ordinal
	ctx     []uintptr
	streams map[[2]int]uintptr // by device and the copy's place in a timed run
	host    map[uint64]unsafe.Pointer
	// hold is a pinned host word that a timed run's first stream waits on
	// (cuStreamWaitValue32) until every copy is queued; holdDev is its address in each
	// device's context.
	hold    unsafe.Pointer
	holdDev []uint64
}

// Open loads libcuda.so.1, initialises it and retains every device's primary context.
func Open() (p2p.Driver, error) {
	checkSymbols()
	lib, err := purego.Dlopen(Library, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v: the NVIDIA driver's CUDA library is not installed here (a host without an NVIDIA GPU, a container without the driver's libraries mounted, or the GPUs on vfio-pci only)", ErrNoDriver, err)
	}
	d := &Driver{streams: map[[2]int]uintptr{}, host: map[uint64]unsafe.Pointer{}}
	for name, fp := range d.a.symbols() {
		sym, err := purego.Dlsym(lib, name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s has no %s: the driver is older than gpusplit needs", ErrNoDriver, Library, name)
		}
		purego.RegisterFunc(fp, sym)
	}
	runtime.LockOSThread()
	if err := d.check("cuInit", -1, d.a.cuInit(0)); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	var n int32
	if err := d.check("cuDeviceGetCount", -1, d.a.cuDeviceGetCount(&n)); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	for i := range n {
		if err := d.addDevice(i); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

func (d *Driver) addDevice(ordinal int32) error {
	var dev int32
	if err := d.check("cuDeviceGet", int(ordinal), d.a.cuDeviceGet(&dev, ordinal)); err != nil {
		return err
	}
	name := make([]byte, 256)
	if err := d.check("cuDeviceGetName", int(ordinal), d.a.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return err
	}
	attr := func(a int32) (int32, error) {
		var v int32
		return v, d.check("cuDeviceGetAttribute", int(ordinal), d.a.cuDeviceGetAttribute(&v, a, dev))
	}
	var vals [5]int32
	for k, a := range []int32{attrPCIDom, attrPCIBus, attrPCIDev, attrCCMajor, attrCCMinor} {
		v, err := attr(a)
		if err != nil {
			return err
		}
		vals[k] = v
	}
	var mem uint64
	if err := d.check("cuDeviceTotalMem_v2", int(ordinal), d.a.cuDeviceTotalMem(&mem, dev)); err != nil {
		return err
	}
	var ctx uintptr
	if err := d.check("cuDevicePrimaryCtxRetain", int(ordinal), d.a.cuDevicePrimaryCtxRetain(&ctx, dev)); err != nil {
		return err
	}
	d.ctx, d.dev = append(d.ctx, ctx), append(d.dev, dev)
	d.gpus = append(d.gpus, p2p.GPU{
		Index:   int(ordinal),
		Name:    cstring(name),
		Address: fmt.Sprintf("%04x:%02x:%02x.0", vals[0], vals[1], vals[2]),
		SM:      int(vals[3]*10 + vals[4]),
		Memory:  int64(mem),
	})
	return nil
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// check turns a CUresult into an error naming the call, the device and the driver's
// own words for the code.
func (d *Driver) check(call string, dev int, res uint32) error {
	if res == 0 {
		return nil
	}
	name, desc := fmt.Sprintf("CUresult %d", res), ""
	var s *byte
	if d.a.cuGetErrorName != nil && d.a.cuGetErrorName(res, &s) == 0 && s != nil {
		name = goString(s)
	}
	if d.a.cuGetErrorString != nil && d.a.cuGetErrorString(res, &s) == 0 && s != nil {
		desc = ": " + goString(s)
	}
	where := ""
	if dev >= 0 {
		where = fmt.Sprintf(" on GPU %d", dev)
		if dev < len(d.gpus) {
			where += " (" + d.gpus[dev].Address + ")"
		}
	}
	return &Error{Call: call, Code: res, Msg: fmt.Sprintf("%s%s: %s (%d)%s", call, where, name, res, desc)}
}

// Error is a failed driver call.
type Error struct {
	Call string
	Code uint32
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func goString(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0 && len(b) < 4096; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

func (d *Driver) use(dev int) error {
	return d.check("cuCtxSetCurrent", dev, d.a.cuCtxSetCurrent(d.ctx[dev]))
}

// GPUs lists the devices.
func (d *Driver) GPUs() ([]p2p.GPU, error) { return d.gpus, nil }

// CanAccessPeer says whether device from can map device to's memory.
func (d *Driver) CanAccessPeer(from, to int) (bool, error) {
	var ok int32
	err := d.check("cuDeviceCanAccessPeer", from, d.a.cuDeviceCanAccessPeer(&ok, d.dev[from], d.dev[to]))
	return ok == 1, err
}

// SetPeerAccess enables or disables device from's access to device to's memory.
func (d *Driver) SetPeerAccess(from, to int, on bool) error {
	if err := d.use(from); err != nil {
		return err
	}
	if on {
		res := d.a.cuCtxEnablePeerAccess(d.ctx[to], 0)
		if res == errPeerAccessAlreadyEnabled {
			return nil
		}
		return d.check(fmt.Sprintf("cuCtxEnablePeerAccess (to GPU %d)", to), from, res)
	}
	res := d.a.cuCtxDisablePeerAccess(d.ctx[to])
	if res == errPeerAccessNotEnabled {
		return nil
	}
	return d.check(fmt.Sprintf("cuCtxDisablePeerAccess (to GPU %d)", to), from, res)
}

// Alloc allocates device memory, or pinned host memory for p2p.Host.
func (d *Driver) Alloc(dev int, n int64) (p2p.Mem, error) {
	if dev == p2p.Host {
		if err := d.use(0); err != nil {
			return p2p.Mem{}, err
		}
		var p unsafe.Pointer
		const portable = 1 // CU_MEMHOSTALLOC_PORTABLE: pinned for every context
		if err := d.check("cuMemHostAlloc", -1, d.a.cuMemHostAlloc(&p, uint64(n), portable)); err != nil {
			return p2p.Mem{}, err
		}
		d.host[uint64(uintptr(p))] = p
		return p2p.Mem{Dev: p2p.Host, Ptr: uint64(uintptr(p)), Size: n}, nil
	}
	if err := d.use(dev); err != nil {
		return p2p.Mem{}, err
	}
	var p uint64
	err := d.check("cuMemAlloc_v2", dev, d.a.cuMemAlloc(&p, uint64(n)))
	return p2p.Mem{Dev: dev, Ptr: p, Size: n}, err
}

// Free frees what Alloc gave.
func (d *Driver) Free(m p2p.Mem) error {
	if m.Dev == p2p.Host {
		p := d.host[m.Ptr]
		delete(d.host, m.Ptr)
		return d.check("cuMemFreeHost", -1, d.a.cuMemFreeHost(p))
	}
	// The memory is freed even when its context cannot be made current: under unified
	// addressing cuMemFree finds the allocation by its address, and a failed switch must
	// not leak it.
	err := d.use(m.Dev)
	return errors.Join(err, d.check("cuMemFree_v2", m.Dev, d.a.cuMemFree(m.Ptr)))
}

// Write copies src into device memory.
func (d *Driver) Write(dst p2p.Mem, src []byte) error {
	if err := d.use(dst.Dev); err != nil {
		return err
	}
	return d.check("cuMemcpyHtoD_v2", dst.Dev, d.a.cuMemcpyHtoD(dst.Ptr, unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src))))
}

// Read copies device memory into dst.
func (d *Driver) Read(dst []byte, src p2p.Mem) error {
	if err := d.use(src.Dev); err != nil {
		return err
	}
	return d.check("cuMemcpyDtoH_v2", src.Dev, d.a.cuMemcpyDtoH(unsafe.Pointer(unsafe.SliceData(dst)), src.Ptr, uint64(len(dst))))
}

// Copy copies between device buffers with cuMemcpyPeer, which moves the bytes GPU to GPU
// when peer access is enabled and through host memory otherwise, and waits for it.
func (d *Driver) Copy(c p2p.Copy) error {
	if err := d.use(c.Src.Dev); err != nil {
		return err
	}
	return d.check("cuMemcpyPeer", c.Src.Dev, d.a.cuMemcpyPeer(c.Dst.Ptr, d.ctx[c.Dst.Dev], c.Src.Ptr, d.ctx[c.Src.Dev], uint64(c.N)))
}

// stream returns a device's stream for the k-th copy of a timed run, made on first use:
// each copy of a run has a non-blocking stream of its own, so that copies overlap, the
// two directions within one GPU included.
func (d *Driver) stream(dev, k int) (uintptr, error) {
	if s, ok := d.streams[[2]int{dev, k}]; ok {
		return s, nil
	}
	if err := d.use(dev); err != nil {
		return 0, err
	}
	var s uintptr
	const nonBlocking = 1 // CU_STREAM_NON_BLOCKING
	if err := d.check("cuStreamCreate", dev, d.a.cuStreamCreate(&s, nonBlocking)); err != nil {
		return 0, err
	}
	d.streams[[2]int{dev, k}] = s
	return s, nil
}

// holdWord allocates the word that holds timed runs back, mapped for every device.
func (d *Driver) holdWord() error {
	if d.hold != nil {
		return nil
	}
	if err := d.use(0); err != nil {
		return err
	}
	var p unsafe.Pointer
	const portableMapped = 1 | 2 // CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP
	if err := d.check("cuMemHostAlloc", -1, d.a.cuMemHostAlloc(&p, 4, portableMapped)); err != nil {
		return err
	}
	addrs := make([]uint64, len(d.ctx))
	for dev := range d.ctx {
		err := d.use(dev)
		if err == nil {
			// The device's address of the word need not be the host's (cuda.h,
			// cuMemHostGetDevicePointer), so each context is asked.
			err = d.check("cuMemHostGetDevicePointer_v2", dev, d.a.cuMemHostGetDevicePointer(&addrs[dev], p, 0))
		}
		if err != nil {
			return errors.Join(err, d.check("cuMemFreeHost", -1, d.a.cuMemFreeHost(p)))
		}
	}
	d.hold, d.holdDev = p, addrs
	return nil
}

// owner is the device whose stream runs a copy: its source GPU, or its destination when
// the source is host memory.
func owner(c p2p.Copy) int {
	if c.Src.Dev == p2p.Host {
		return c.Dst.Dev
	}
	return c.Src.Dev
}

// Time runs each copy repeat times on a stream of its own, as p2pBandwidthLatencyTest
// and nvbandwidth time copies: the first stream waits on the hold word, the others on an
// event recorded after that wait, the copies are queued (the host's time for that is
// Timing.Host), each other stream's end is joined into the first, and only then is the
// word released, so that the events time the copies back to back and not the host's
// pace of queuing them. Every stream it used is synchronised before it returns, on
// failure too, so that nothing still copies into buffers that are about to be freed.
func (d *Driver) Time(copies []p2p.Copy, repeat int) (t p2p.Timing, err error) {
	if err := d.holdWord(); err != nil {
		return t, err
	}
	first := owner(copies[0])
	streams := make([]uintptr, 0, len(copies))
	var events []uintptr
	hold := (*uint32)(d.hold)
	atomic.StoreUint32(hold, 0)
	defer func() {
		// Released in any case: a stream left waiting would never finish.
		atomic.StoreUint32(hold, 1)
		if err != nil {
			for k, s := range streams {
				err = errors.Join(err, d.check("cuStreamSynchronize", owner(copies[k]), d.a.cuStreamSynchronize(s)))
			}
		}
		for _, ev := range events {
			err = errors.Join(err, d.check("cuEventDestroy_v2", -1, d.a.cuEventDestroy(ev)))
		}
	}()
	for k, c := range copies {
		s, err := d.stream(owner(c), k)
		if err != nil {
			return t, err
		}
		streams = append(streams, s)
	}
	event := func(dev int) (uintptr, error) {
		if err := d.use(dev); err != nil {
			return 0, err
		}
		var ev uintptr
		err := d.check("cuEventCreate", dev, d.a.cuEventCreate(&ev, 0))
		if err == nil {
			events = append(events, ev)
		}
		return ev, err
	}
	start, err := event(first)
	if err != nil {
		return t, err
	}
	const geq = 0 // CU_STREAM_WAIT_VALUE_GEQ: until (int32_t)(*addr - value) >= 0
	if err := d.check("cuStreamWaitValue32_v2", first, d.a.cuStreamWaitValue32(streams[0], d.holdDev[first], 1, geq)); err != nil {
		return t, err
	}
	progress, stalled := watch(hold)
	defer progress(-1)
	if err := d.check("cuEventRecord", first, d.a.cuEventRecord(start, streams[0])); err != nil {
		return t, err
	}
	for k, s := range streams[1:] {
		if err := d.check("cuStreamWaitEvent", owner(copies[k+1]), d.a.cuStreamWaitEvent(s, start, 0)); err != nil {
			return t, err
		}
	}
	began := time.Now()
	for k, c := range copies {
		dev, s := owner(c), streams[k]
		if err := d.use(dev); err != nil {
			return t, err
		}
		for range repeat {
			var res uint32
			call := "cuMemcpyPeerAsync"
			switch {
			case c.Src.Dev == p2p.Host:
				call, res = "cuMemcpyHtoDAsync_v2", d.a.cuMemcpyHtoDAsync(c.Dst.Ptr, uintptr(c.Src.Ptr), uint64(c.N), s)
			case c.Dst.Dev == p2p.Host:
				call, res = "cuMemcpyDtoHAsync_v2", d.a.cuMemcpyDtoHAsync(uintptr(c.Dst.Ptr), c.Src.Ptr, uint64(c.N), s)
			default:
				res = d.a.cuMemcpyPeerAsync(c.Dst.Ptr, d.ctx[c.Dst.Dev], c.Src.Ptr, d.ctx[c.Src.Dev], uint64(c.N), s)
			}
			if err := d.check(call, dev, res); err != nil {
				return t, err
			}
			progress(1)
		}
	}
	t.Host = time.Since(began)
	for k, s := range streams[1:] {
		dev := owner(copies[k+1])
		end, err := event(dev)
		if err != nil {
			return t, err
		}
		if err := d.check("cuEventRecord", dev, d.a.cuEventRecord(end, s)); err != nil {
			return t, err
		}
		if err := d.check("cuStreamWaitEvent", first, d.a.cuStreamWaitEvent(streams[0], end, 0)); err != nil {
			return t, err
		}
	}
	stop, err := event(first)
	if err != nil {
		return t, err
	}
	if err := d.check("cuEventRecord", first, d.a.cuEventRecord(stop, streams[0])); err != nil {
		return t, err
	}
	progress(-1)
	if stalled() {
		return t, fmt.Errorf("the driver blocked for over %s queuing %d copies while the stream was held back, as it does when a stream's queue is full: the hold was let go and the run is not timed", stallTimeout, repeat*len(copies))
	}
	atomic.StoreUint32(hold, 1)
	for k, s := range streams {
		if err := d.check("cuStreamSynchronize", owner(copies[k]), d.a.cuStreamSynchronize(s)); err != nil {
			return t, err
		}
	}
	var ms float32
	if err := d.check("cuEventElapsedTime", first, d.a.cuEventElapsedTime(&ms, start, stop)); err != nil {
		return t, err
	}
	t.GPU = time.Duration(float64(ms) * float64(time.Millisecond))
	return t, nil
}

// stallTimeout is how long a call may block while a stream is held before the hold is let
// go: queuing a copy takes microseconds, unless the driver waits for room in a full
// queue, which a held stream never makes.
const stallTimeout = 2 * time.Second

// watch guards a hold, as the timeouts of p2pBandwidthLatencyTest's and nvbandwidth's
// spin kernels do theirs: the returned progress is called with 1 after each call that
// queues, and with -1 when the hold ends; when no call has returned for stallTimeout
// the word is written, and stalled says so from then on.
func watch(hold *uint32) (progress func(int), stalled func() bool) {
	var calls atomic.Int64
	var gave atomic.Bool
	done := make(chan struct{})
	var once sync.Once
	go func() {
		tick := time.NewTicker(stallTimeout / 8)
		defer tick.Stop()
		last, since := calls.Load(), time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				if n := calls.Load(); n != last {
					last, since = n, now
				} else if now.Sub(since) >= stallTimeout {
					gave.Store(true)
					atomic.StoreUint32(hold, 1)
					return
				}
			}
		}
	}()
	progress = func(n int) {
		if n < 0 {
			once.Do(func() { close(done) })
			return
		}
		calls.Add(1)
	}
	stalled = func() bool { return gave.Load() }
	return progress, stalled
}

// Close destroys the streams, releases the contexts and unlocks the thread.
func (d *Driver) Close() error {
	var errs []error
	for key, s := range d.streams {
		errs = append(errs, d.check("cuStreamDestroy_v2", key[0], d.a.cuStreamDestroy(s)))
	}
	clear(d.streams)
	if d.hold != nil {
		errs = append(errs, d.check("cuMemFreeHost", -1, d.a.cuMemFreeHost(d.hold)))
		d.hold, d.holdDev = nil, nil
	}
	for dev := range d.ctx {
		errs = append(errs, d.check("cuDevicePrimaryCtxRelease_v2", dev, d.a.cuDevicePrimaryCtxRelease(d.dev[dev])))
	}
	d.ctx = nil
	runtime.UnlockOSThread()
	return errors.Join(errs...)
}
