package host

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// What a Host reads is bounded, so that a hostile root (a bug-report archive from a
// stranger, a directory unpacked from one) costs seconds and tens of megabytes, never a
// hang or an out-of-memory kill on a hypervisor. A real host's files are far below every
// cap; each is chosen from what the kernel or Proxmox can produce.
const (
	// MaxFileBytes caps a file that no other cap names: sysfs attributes (a text
	// attribute is one page, 4 KiB on x86-64 and at most 64 KiB on arm64; the binary
	// "config" is 4 KiB of PCIe configuration space), /etc, /run and /var/lib/gpusplit,
	// and Proxmox's files, which its file system holds to 1 MiB each.
	MaxFileBytes = 1 << 20
	// MaxProcFileBytes caps a file under /proc: /proc/cpuinfo takes about 1.6 KB per
	// CPU (500 KB for 256 threads, 13 MB at the kernel's NR_CPUS of 8,192), mountinfo
	// grows with every mount of a container host, and a process's cmdline is at most
	// 6 MiB (the kernel's limit on arguments).
	MaxProcFileBytes = 16 << 20
	// MaxKernelLogBytes caps the kernel log: /dev/kmsg prints the ring buffer with a
	// header per record, about 1.5 times the ring; Debian's and Proxmox's kernels keep
	// 256 KiB of it and CONFIG_LOG_BUF_SHIFT allows at most 32 MiB.
	MaxKernelLogBytes = 32 << 20
	// MaxModuleListBytes caps modules.dep and the other lists of /lib/modules, which
	// are streamed (a distribution kernel's modules.dep is under 1 MiB).
	MaxModuleListBytes = 32 << 20

	// MaxArchiveBytes caps what a snapshot archive holds in memory: the sizes of its
	// files (a hard link counted at the size of the file it links to, a file over its
	// own cap counted though it is not kept) and the lengths of its names and link
	// targets. A real snapshot is a few MiB, the synthetic 4,096-function host of the
	// benchmarks as a whole tree 31 MiB.
	MaxArchiveBytes = 64 << 20
	// MaxArchiveEntries caps the entries of a snapshot archive, the directories its
	// names imply included: the whole tree of the synthetic 4,096-function host has
	// 160,000. An entry costs about 100 bytes besides its name, so a million empty
	// directories are refused having cost about 60 MB.
	MaxArchiveEntries = 1 << 18
	// MaxArchiveStream caps the unpacked tar stream, headers included, which bounds
	// the time budget unpacking (about a second per GiB).
	MaxArchiveStream = 1 << 30
	// MaxPathBytes and MaxNameBytes cap a name in an archive as Linux caps a path
	// (PATH_MAX) and a file name (NAME_MAX), which bounds how deep an archive nests.
	MaxPathBytes = 4096
	MaxNameBytes = 255

	// MaxFDEntries caps a listing of /proc/PID/fd: a process may hold 1,048,576 files
	// open by default (fs.nr_open).
	MaxFDEntries = 1 << 20
	// MaxProcEntries caps a listing of /proc and of its other directories: /proc lists
	// a directory per process, and a host running 262,144 processes (the kernel's
	// default pid_max for 256 CPUs) spends tens of GiB on them.
	MaxProcEntries = 1 << 18
	// MaxPVEDirEntries caps a listing under /etc/pve: Proxmox's cluster file system
	// holds at most 262,144 files and directories in all (MEMDB_MAX_INODES).
	MaxPVEDirEntries = 1 << 18
	// MaxSysDirEntries caps every other listing: one PCI segment holds at most 65,536
	// functions (256 buses of 32 devices of 8), and no directory of sysfs, /etc or
	// /run that gpusplit lists comes near it on a real host.
	MaxSysDirEntries = 1 << 16

	// MaxRootBytes and MaxRootEntries cap what one Host reads of a directory root in
	// all: the bytes of its files and the names of its listings. Each file and listing
	// is capped above; these bound how many there can be, so that 65,536 devices of
	// 1 MiB attributes cost a fraction of a second, not an hour. The largest reader, a
	// snapshot of a real host, reads a few MiB and lists tens of thousands of names (the
	// synthetic 4,096-function host of the benchmarks: 21 MiB for a snapshot, 4 MiB for
	// inventory). A Host of an archive is bounded by the archive's caps instead.
	MaxRootBytes   = 256 << 20
	MaxRootEntries = 1 << 22
)

// maxRootBytes and maxRootEntries are MaxRootBytes and MaxRootEntries, lowered by tests.
var maxRootBytes, maxRootEntries int64 = MaxRootBytes, MaxRootEntries

// dirCapScale divides the caps on listings, for tests.
var dirCapScale = 1

// dirCap returns the most names a listing of the directory at p, a resolved path, holds.
func dirCap(p string) int {
	switch {
	case strings.HasPrefix(p, "/proc/") && strings.HasSuffix(p, "/fd"):
		return MaxFDEntries / dirCapScale
	case p == "/proc" || strings.HasPrefix(p, "/proc/"):
		return MaxProcEntries / dirCapScale
	case p == "/etc/pve" || strings.HasPrefix(p, "/etc/pve/"):
		return MaxPVEDirEntries / dirCapScale
	}
	return MaxSysDirEntries / dirCapScale
}

func tooManyEntries(limit int) error {
	return fmt.Errorf("holds more than %d entries, more than any directory of its kind on a real host", limit)
}

// ErrRootSpent is the error once a Host has read MaxRootBytes or listed MaxRootEntries
// of a directory root: it reads no more of it.
var ErrRootSpent = errors.New("gpusplit has read all it reads of one root")

func rootSpent(what string) error {
	return fmt.Errorf("%w (%s, far more than a real host's files): not reading more of it", ErrRootSpent, what)
}

// fileCap is the most a Host reads of one file, and what kind of file that is for.
type fileCap struct {
	max  int64
	what string
}

// capOf returns the cap of the file at p, a resolved path: where the file really lies
// decides its kind.
func capOf(p string) fileCap {
	switch {
	case p == KernelLogPath:
		return fileCap{MaxKernelLogBytes, "the kernel log"}
	case strings.HasPrefix(p, "/proc/"):
		return fileCap{MaxProcFileBytes, "a /proc file"}
	case strings.HasPrefix(p, "/lib/modules/"), strings.HasPrefix(p, "/usr/lib/modules/"):
		return fileCap{MaxModuleListBytes, "a module list"}
	case strings.HasPrefix(p, "/sys/"):
		return fileCap{MaxFileBytes, "a sysfs attribute"}
	case strings.HasPrefix(p, "/etc/pve/"):
		return fileCap{MaxFileBytes, "a Proxmox file (its file system holds no more)"}
	}
	return fileCap{MaxFileBytes, "a configuration file"}
}

// ErrTooLarge is what a *TooLargeError is, for errors.Is.
var ErrTooLarge = errors.New("file over its size cap")

// TooLargeError is the error for a file larger than its cap.
type TooLargeError struct {
	Size int64 // its size, or -1 when it was found larger while reading
	Cap  int64
	What string // what kind of file the cap is for
}

func (e *TooLargeError) Error() string {
	size := "is"
	if e.Size >= 0 {
		size = "is " + byteSize(e.Size) + ":"
	}
	return fmt.Sprintf("%s larger than %s, the most gpusplit reads of %s", size, byteSize(e.Cap), e.What)
}

func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

func (c fileCap) tooLarge(size int64) error {
	return &TooLargeError{Size: size, Cap: c.max, What: c.what}
}

// ErrNotRegular is what a *NotRegularError is, for errors.Is.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError is the error for a FIFO, device or socket where a file is read.
type NotRegularError struct {
	Type string // "a FIFO", "a character device", …
}

func (e *NotRegularError) Error() string {
	return "is " + e.Type + ", not a regular file: gpusplit reads only regular files (and the live host's /dev/kmsg)"
}

func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// byteSize writes n in the largest binary unit that keeps it at least 1: "3.0 GiB".
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return trimZero(float64(n)/(1<<30)) + " GiB"
	case n >= 1<<20:
		return trimZero(float64(n)/(1<<20)) + " MiB"
	case n >= 1<<10:
		return trimZero(float64(n)/(1<<10)) + " KiB"
	}
	return fmt.Sprintf("%d bytes", n)
}

func trimZero(f float64) string {
	s := fmt.Sprintf("%.1f", f)
	return strings.TrimSuffix(s, ".0")
}

// ReadUserFile reads a file named on the command line (a manifest, a saved result): a
// regular file of at most max bytes, what says what it is for; never a FIFO, which
// would hang the read, or a device, which could fill memory. Links are followed: the
// user named the file.
func ReadUserFile(name string, max int64, what string) ([]byte, error) {
	real, err := filepath.EvalSymlinks(name)
	if err != nil {
		return nil, err
	}
	data, err := readRegular(real, fileCap{max: max, what: what}, true)
	if err != nil {
		return nil, &PathError{Op: "read", Path: name, Err: err}
	}
	return data, nil
}
