// Package cuda drives NVIDIA GPUs through the CUDA driver API (libcuda.so.1), loaded at
// run time, for gpusplit p2p: just the calls that checks and measurements of copies
// between GPUs need.
//
// Loading a shared library needs a dynamically linked program, and gpusplit's default
// build is static (it has to run in an initramfs and on any host). So the binding is
// compiled only with the build tag cuda (go build -tags cuda: the gpusplit-cuda binary,
// which purego links dynamically without cgo); in the static build Open says so, and
// gpusplit p2p hands over to gpusplit-cuda when it is installed beside it.
package cuda

import "errors"

// ErrStatic is Open's error in a build without the CUDA binding.
var ErrStatic = errors.New("this gpusplit is the static build, which cannot load the CUDA driver (libcuda.so.1)")

// ErrNoDriver wraps the failure to load or initialise the CUDA driver.
var ErrNoDriver = errors.New("the CUDA driver is not available")

// Library is the CUDA driver's library, as the NVIDIA driver installs it.
const Library = "libcuda.so.1"

// Symbols are the driver's entry points that gpusplit-cuda binds, by their exported
// names (cuda.h maps several to versioned ones: cuMemAlloc is cuMemAlloc_v2). Open needs
// every one of them.
var Symbols = []string{
	"cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute",
	"cuDeviceTotalMem_v2", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent",
	"cuDeviceCanAccessPeer", "cuCtxEnablePeerAccess", "cuCtxDisablePeerAccess",
	"cuMemAlloc_v2", "cuMemFree_v2", "cuMemHostAlloc", "cuMemFreeHost", "cuMemHostGetDevicePointer_v2",
	"cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyPeer", "cuMemcpyPeerAsync", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2",
	"cuStreamCreate", "cuStreamDestroy_v2", "cuStreamWaitEvent", "cuStreamWaitValue32_v2", "cuStreamSynchronize",
	"cuEventCreate", "cuEventRecord", "cuEventElapsedTime", "cuEventDestroy_v2",
	"cuGetErrorName", "cuGetErrorString",
}

// Device attributes (CUdevice_attribute in cuda.h).
const (
	attrPCIBus  = 33
	attrPCIDev  = 34
	attrPCIDom  = 50
	attrCCMajor = 75
	attrCCMinor = 76
)

// Result codes gpusplit treats specially (CUresult in cuda.h).
const (
	errNoDevice                 = 100
	errPeerAccessAlreadyEnabled = 704
	errPeerAccessNotEnabled     = 705
)
