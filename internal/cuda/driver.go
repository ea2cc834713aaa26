//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpusplit/gpusplit/internal/p2p"
)

// api holds the driver's entry points, bound by their exported names: several are
// versioned (_v2) behind cuda.h's #defines.
type api struct {
	cuInit                    func(flags uint32) uint32
	cuDriverGetVersion        func(v *int32) uint32
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
	cuEventCreate             func(ev *uintptr, flags uint32) uint32
	cuEventRecord             func(ev, s uintptr) uint32
	cuEventSynchronize        func(ev uintptr) uint32
	cuEventElapsedTime        func(ms *float32, start, end uintptr) uint32
	cuEventDestroy            func(ev uintptr) uint32
	cuGetErrorName            func(res uint32, s **byte) uint32
	cuGetErrorString          func(res uint32, s **byte) uint32
}

// symbols names each entry point's exported symbol.
func (a *api) symbols() map[string]any {
	return map[string]any{
		"cuInit": &a.cuInit, "cuDriverGetVersion": &a.cuDriverGetVersion, "cuDeviceGetCount": &a.cuDeviceGetCount,
		"cuDeviceGet": &a.cuDeviceGet, "cuDeviceGetName": &a.cuDeviceGetName, "cuDeviceGetAttribute": &a.cuDeviceGetAttribute,
		"cuDeviceTotalMem_v2": &a.cuDeviceTotalMem, "cuDevicePrimaryCtxRetain": &a.cuDevicePrimaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2": &a.cuDevicePrimaryCtxRelease, "cuCtxSetCurrent": &a.cuCtxSetCurrent,
		"cuDeviceCanAccessPeer": &a.cuDeviceCanAccessPeer, "cuCtxEnablePeerAccess": &a.cuCtxEnablePeerAccess,
		"cuCtxDisablePeerAccess": &a.cuCtxDisablePeerAccess, "cuMemAlloc_v2": &a.cuMemAlloc, "cuMemFree_v2": &a.cuMemFree,
		"cuMemHostAlloc": &a.cuMemHostAlloc, "cuMemFreeHost": &a.cuMemFreeHost, "cuMemcpyHtoD_v2": &a.cuMemcpyHtoD,
		"cuMemcpyDtoH_v2": &a.cuMemcpyDtoH, "cuMemcpyPeer": &a.cuMemcpyPeer, "cuMemcpyPeerAsync": &a.cuMemcpyPeerAsync,
		"cuMemcpyHtoDAsync_v2": &a.cuMemcpyHtoDAsync, "cuMemcpyDtoHAsync_v2": &a.cuMemcpyDtoHAsync,
		"cuStreamCreate": &a.cuStreamCreate, "cuStreamDestroy_v2": &a.cuStreamDestroy, "cuStreamWaitEvent": &a.cuStreamWaitEvent,
		"cuEventCreate": &a.cuEventCreate, "cuEventRecord": &a.cuEventRecord, "cuEventSynchronize": &a.cuEventSynchronize,
		"cuEventElapsedTime": &a.cuEventElapsedTime, "cuEventDestroy_v2": &a.cuEventDestroy,
		"cuGetErrorName": &a.cuGetErrorName, "cuGetErrorString": &a.cuGetErrorString,
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
	streams map[int]uintptr
	host    map[uint64]unsafe.Pointer
}

// Open loads libcuda.so.1, initialises it and retains every device's primary context.
func Open() (p2p.Driver, error) {
	lib, err := purego.Dlopen(Library, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v: the NVIDIA driver's CUDA library is not installed here (a host without an NVIDIA GPU, a container without the driver's libraries mounted, or the GPUs on vfio-pci only)", ErrNoDriver, err)
	}
	d := &Driver{streams: map[int]uintptr{}, host: map[uint64]unsafe.Pointer{}}
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
	if err := d.use(m.Dev); err != nil {
		return err
	}
	return d.check("cuMemFree_v2", m.Dev, d.a.cuMemFree(m.Ptr))
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

// stream returns the stream of a device, made on first use: copies of a device go on
// its own non-blocking stream, so that copies of two devices overlap.
func (d *Driver) stream(dev int) (uintptr, error) {
	if s, ok := d.streams[dev]; ok {
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
	d.streams[dev] = s
	return s, nil
}

// owner is the device whose stream runs a copy: its source GPU, or its destination when
// the source is host memory.
func owner(c p2p.Copy) int {
	if c.Src.Dev == p2p.Host {
		return c.Dst.Dev
	}
	return c.Src.Dev
}

// Time runs each copy repeat times on its device's stream, the streams started together
// by an event and joined at the end, and returns the time between the two events.
func (d *Driver) Time(copies []p2p.Copy, repeat int) (time.Duration, error) {
	first := owner(copies[0])
	s0, err := d.stream(first)
	if err != nil {
		return 0, err
	}
	var events []uintptr
	defer func() {
		for _, ev := range events {
			d.a.cuEventDestroy(ev)
		}
	}()
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
		return 0, err
	}
	stop, err := event(first)
	if err != nil {
		return 0, err
	}
	if err := d.check("cuEventRecord", first, d.a.cuEventRecord(start, s0)); err != nil {
		return 0, err
	}
	var ends []uintptr
	for _, c := range copies {
		dev := owner(c)
		s, err := d.stream(dev)
		if err != nil {
			return 0, err
		}
		if s != s0 {
			if err := d.check("cuStreamWaitEvent", dev, d.a.cuStreamWaitEvent(s, start, 0)); err != nil {
				return 0, err
			}
		}
		if err := d.use(dev); err != nil {
			return 0, err
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
				return 0, err
			}
		}
		if s != s0 {
			end, err := event(dev)
			if err != nil {
				return 0, err
			}
			if err := d.check("cuEventRecord", dev, d.a.cuEventRecord(end, s)); err != nil {
				return 0, err
			}
			ends = append(ends, end)
		}
	}
	for _, end := range ends {
		if err := d.check("cuStreamWaitEvent", first, d.a.cuStreamWaitEvent(s0, end, 0)); err != nil {
			return 0, err
		}
	}
	if err := d.use(first); err != nil {
		return 0, err
	}
	if err := d.check("cuEventRecord", first, d.a.cuEventRecord(stop, s0)); err != nil {
		return 0, err
	}
	if err := d.check("cuEventSynchronize", first, d.a.cuEventSynchronize(stop)); err != nil {
		return 0, err
	}
	var ms float32
	if err := d.check("cuEventElapsedTime", first, d.a.cuEventElapsedTime(&ms, start, stop)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the streams, releases the contexts and unlocks the thread.
func (d *Driver) Close() error {
	var errs []error
	for dev, s := range d.streams {
		errs = append(errs, d.check("cuStreamDestroy_v2", dev, d.a.cuStreamDestroy(s)))
	}
	clear(d.streams)
	for dev := range d.ctx {
		errs = append(errs, d.check("cuDevicePrimaryCtxRelease_v2", dev, d.a.cuDevicePrimaryCtxRelease(d.dev[dev])))
	}
	d.ctx = nil
	runtime.UnlockOSThread()
	return errors.Join(errs...)
}
