// Package p2p checks that GPU-to-GPU copies deliver the bytes they were given, and
// measures them: for every ordered pair of GPUs, a copy through peer access and one
// through the driver's staged path, each compared byte for byte, then bandwidth and
// latency with and without peer access, and a verdict per pair with the NCCL settings
// that follow.
//
// It drives the GPUs through Driver, which internal/cuda implements with the CUDA driver
// API; tests give it drivers that corrupt, refuse or fail.
package p2p

import "time"

// Host is the device number of host (pinned) memory in a Mem.
const Host = -1

// GPU is a device as the driver sees it.
type GPU struct {
	Index   int    `json:"index"`        // the driver's device number
	Name    string `json:"name"`         // "NVIDIA H200"
	Address string `json:"address"`      // PCI address, lower case: "0000:81:00.0"
	SM      int    `json:"sm"`           // compute capability as major*10+minor
	Memory  int64  `json:"memory_bytes"` // bytes
}

// Mem is a buffer on a device (or, with Dev == Host, pinned host memory).
type Mem struct {
	Dev  int
	Ptr  uint64
	Size int64
}

// Copy is one transfer of N bytes from Src to Dst.
type Copy struct {
	Dst, Src Mem
	N        int64
}

// Driver is what the checks need from a GPU driver. Every method's error names the call
// and the device; a driver is used from one goroutine.
type Driver interface {
	// GPUs lists the devices.
	GPUs() ([]GPU, error)
	// CanAccessPeer says whether device from can map device to's memory.
	CanAccessPeer(from, to int) (bool, error)
	// SetPeerAccess enables or disables device from's access to device to's memory;
	// enabling what is enabled and disabling what is not are no errors.
	SetPeerAccess(from, to int, on bool) error
	// Alloc allocates n bytes on a device, or pinned host memory for Host.
	Alloc(dev int, n int64) (Mem, error)
	Free(m Mem) error
	// Write copies src into device memory at dst; Read copies device memory out.
	Write(dst Mem, src []byte) error
	Read(dst []byte, src Mem) error
	// Copy copies between devices (or within one) and waits for it: with peer access
	// enabled between the two the GPUs move the bytes themselves; without it the driver
	// stages them through host memory.
	Copy(c Copy) error
	// Time runs each copy repeat times, each copy on a stream of its own so that they
	// overlap. The streams are held back until every copy is queued, so that what the
	// GPU's events time is the copies and not the host's pace of queuing them. It
	// returns, error or not, only when nothing it queued is still running, so that the
	// buffers can be freed.
	Time(copies []Copy, repeat int) (Timing, error)
	Close() error
}

// Timing is one timed run of copies.
type Timing struct {
	// GPU is the time from the first copy's start to the last one's end, by the GPU's
	// events.
	GPU time.Duration
	// Host is the host's time to queue the copies: the calls alone, measured on the host.
	Host time.Duration
}
