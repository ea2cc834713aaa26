package doctor

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/kmsg"
)

// maxKept bounds what a log can make the doctor keep of each kind of line: a log that
// repeats a fault a million times is summed up, not held.
const maxKept = 200

// LogFacts is what the doctor keeps of a kernel log: the lines it recognised.
type LogFacts struct {
	Records int
	// KernelRecords counts the records that are a kernel log's for sure: a line in one
	// of its forms (kmsg.Record.Kernel), or a bare line that is a kernel message by its
	// prefix (kernelMessage). A file without any is no kernel log (CheckLogFile).
	KernelRecords int
	// Cut says why only the log's first part was read (the live log past its cap);
	// empty when it was read to its end.
	Cut            string
	BARFailures    []kmsg.BARFailure
	BARLines       []string
	ReallocHint    []string
	NVRMBars       []kmsg.NVRMBar
	NVRMLines      []string
	Probes         []kmsg.ProbeFailure
	ProbeLines     []string
	Faults         []kmsg.IOMMUFault
	FaultLines     []string
	FaultCount     int
	SEV            []kmsg.SEVState
	SEVLines       []string
	SNPIOMMU       []string // the AMD-Vi lines about SNP support
	SNPUnsupported bool
	// SNPPlatform holds the platform's SEV-SNP lines (the RMP table, the firmware's
	// API, a failed INIT); SNPInitFailed says whether its firmware failed to start it.
	SNPPlatform    []string
	SNPInitFailed  bool
	SNPUp          bool   // the firmware reported its SNP API: SNP is initialised
	DefaultDomain  string // "Translated", "Passthrough", … from "iommu: Default domain type"
	DomainLine     string
	EncryptionNoPT string // "Memory encryption detected - Disabling default IOMMU Passthrough"
	UnknownOptions []string
	Mismatches     []kmsg.APIMismatch
	MismatchLines  []string
	LinkLimits     []kmsg.LinkLimit
	LinkLines      []string
	Loaded         string // the nvidia version the driver announced when it loaded
	// Enumerated is the PCI functions the log says the kernel found, by address; at
	// most maxEnumerated.
	Enumerated map[string]kmsg.Enumerated
	// Bound is the driver the log last shows printing about each PCI device by its
	// dev_printk prefix, where that driver is one that does not bind GPUs alike (nvme,
	// xhci_hcd…): such a device is no GPU, whatever the address is on the host at hand.
	// At most maxEnumerated.
	Bound map[string]string
	// Failures is what the log says went wrong with devices at run time, in the order
	// it happened: Xids, GPUs that fell off the bus, AER errors; at most maxFailures,
	// with FailureCount counting them all.
	Failures     []Failure
	FailureCount int
	lastAER      string // the device of the last AER severity line, whose bits follow it
	// InitFailures are NVIDIA's and the PCI core's lines for GPUs that did not come
	// up: RmInitAdapter failures, power states a device could not leave, and the
	// driver's summary lines (no device); at most maxKept.
	InitFailures []InitFailure
	// SuppressedFaults counts the IOMMU fault messages the kernel did not print.
	SuppressedFaults int
	splitEvent       string // an AMD-Vi "Event logged [" whose event is on the next line
	mismatch         string // an API mismatch message still missing lines
	mismatchLines    int
	// VFIO are the lines of devices that could not be given to a VM, or did not come
	// back from a reset: QEMU's and the kernel's; at most maxKept.
	VFIO []VFIOLine
	// Cmdline is the last "Kernel command line" of the log (of the boot it records),
	// CmdlineLine its record; Unknown the parameters the kernel said it did not know.
	Cmdline, CmdlineLine  string
	cmdlineEarly          bool
	Unknown, UnknownLines []string
}

// VFIOLine is a line about a device that a VM could not have.
type VFIOLine struct {
	Err      *kmsg.VFIOError
	NotReady *kmsg.NotReady
	Line     string
}

// InitFailure is one line of the log about a GPU that did not come up.
type InitFailure struct {
	Device string // "" for the driver's summary lines
	RM     *kmsg.InitFailure
	Power  string // the power state a device could not leave
	Line   string
}

// Failure is one line of the log about a device failing.
type Failure struct {
	Device string
	Driver string // as the line names it, "" for NVIDIA's NVRM lines
	Xid    int    // an Xid's code; 0 for the other kinds
	Fallen bool   // "fallen off the bus"
	AER    kmsg.AER
	Line   string
	Time   time.Duration // since boot; -1 when the log has no such stamp
}

// maxFailures bounds the failure lines kept: a link that flaps prints thousands.
const maxFailures = 1000

// maxEnumerated bounds the functions kept of a log's enumeration: every function of a
// PCI segment.
const maxEnumerated = 1 << 16

func keep[T any](list []T, v T) []T {
	if len(list) >= maxKept {
		return list
	}
	return append(list, v)
}

// CollectLog reads a kernel log in one pass and keeps the lines the checks look for.
func CollectLog(r io.Reader) (*LogFacts, error) {
	f := &LogFacts{Enumerated: map[string]kmsg.Enumerated{}, Bound: map[string]string{}}
	err := kmsg.Scan(r, func(rec kmsg.Record) bool {
		f.Records++
		m := rec.Message
		if rec.Kernel || kernelMessage(m) {
			f.KernelRecords++
		}
		// Kernels before 5.5 printed an AMD-Vi event in two: "AMD-Vi: Event logged ["
		// and, as a line of its own, "IO_PAGE_FAULT device=05:00.0 … flags=0x0070]".
		if f.splitEvent != "" {
			m, f.splitEvent = f.splitEvent+m, ""
		}
		if strings.HasSuffix(m, "Event logged [") {
			f.splitEvent = m
			return true
		}
		// NVIDIA's multi-line messages are a record a line where the log has no stamps
		// to tell continuations by (journalctl -o cat, a paste): an API mismatch that
		// stops before the module's version takes the NVRM lines after it.
		if f.mismatch != "" {
			if strings.HasPrefix(m, "NVRM: ") && f.mismatchLines < 5 {
				f.mismatch += "\n" + m
				f.mismatchLines++
				if !wholeMismatch(f.mismatch) {
					return true
				}
				m = f.mismatch
			}
			f.mismatch, f.mismatchLines = "", 0
		} else if strings.HasPrefix(m, "NVRM: API mismatch") && !wholeMismatch(m) {
			f.mismatch = m
			return true
		}
		if b, ok := kmsg.ParseBARFailure(m); ok {
			f.BARFailures = keep(f.BARFailures, b)
			f.BARLines = keep(f.BARLines, m)
		}
		if kmsg.IsReallocHint(m) {
			f.ReallocHint = keep(f.ReallocHint, m)
		}
		if b, ok := kmsg.ParseNVRMBar(m); ok {
			f.NVRMBars = keep(f.NVRMBars, b)
			f.NVRMLines = keep(f.NVRMLines, m)
		}
		if p, ok := kmsg.ParseProbeFailure(m); ok {
			f.Probes = keep(f.Probes, p)
			f.ProbeLines = keep(f.ProbeLines, m)
		}
		if n, ok := kmsg.ParseSuppressedFaults(m); ok {
			f.FaultCount += n
			f.SuppressedFaults += n
		}
		if x, ok := kmsg.ParseIOMMUFault(m); ok {
			f.FaultCount++
			f.Faults = keep(f.Faults, x)
			f.FaultLines = keep(f.FaultLines, m)
		}
		if s, ok := kmsg.ParseSEV(m); ok {
			f.SEV = keep(f.SEV, s)
			f.SEVLines = keep(f.SEVLines, m)
		}
		if kind, _, ok := kmsg.ParseSNPPlatform(m); ok {
			f.SNPPlatform = keep(f.SNPPlatform, m)
			f.SNPInitFailed = f.SNPInitFailed || kind == "init-failed"
			f.SNPUp = f.SNPUp || kind == "api"
		}
		if supported, _, ok := kmsg.ParseSNPIOMMU(m); ok {
			f.SNPIOMMU = keep(f.SNPIOMMU, m)
			f.SNPUnsupported = f.SNPUnsupported || !supported
		}
		if t, _, ok := kmsg.ParseDefaultDomain(m); ok {
			f.DefaultDomain, f.DomainLine = t, m
		}
		if kmsg.IsPassthroughDisabledByEncryption(m) {
			f.EncryptionNoPT = m
		}
		if _, _, ok := kmsg.ParseUnknownIOMMUOption(m); ok {
			f.UnknownOptions = keep(f.UnknownOptions, m)
		}
		if a, ok := kmsg.ParseAPIMismatch(m); ok {
			f.Mismatches = keep(f.Mismatches, a)
			f.MismatchLines = keep(f.MismatchLines, m)
		}
		if l, ok := kmsg.ParseLinkLimit(m); ok {
			f.LinkLimits = keep(f.LinkLimits, l)
			f.LinkLines = keep(f.LinkLines, m)
		}
		if v, ok := kmsg.ParseNVRMLoading(m); ok {
			f.Loaded = v
		}
		if v, ok := kmsg.ParseEnumerated(m); ok && len(f.Enumerated) < maxEnumerated {
			f.Enumerated[v.Device] = v
		}
		if drv, dev, ok := kmsg.ParseDriverPrefix(m); ok && !slices.Contains(sharedDrivers, drv) && !slices.Contains(gpuDrivers, drv) &&
			drv != "pcieport" && // a port's own lines; the AER checks read ports apart

			(len(f.Bound) < maxEnumerated || f.Bound[dev] != "") {
			f.Bound[dev] = drv
		}
		f.failure(m, rec.Time)
		f.initFailure(m)
		if v, ok := kmsg.ParseVFIOError(m); ok {
			f.VFIO = keep(f.VFIO, VFIOLine{Err: &v, Line: m})
		} else if v, ok := kmsg.ParseNotReady(m); ok && v.GaveUp {
			if strings.Contains(v.After, "FLR") || v.After == "bus reset" {
				f.VFIO = keep(f.VFIO, VFIOLine{NotReady: &v, Line: m})
			} else {
				// After resume or a power transition: a GPU that did not come back
				// from a power state, not from a reset.
				f.InitFailures = keep(f.InitFailures, InitFailure{Device: v.Device, Power: v.After, Line: m})
			}
		}
		if b, ok := kmsg.ParseBootLine(m); ok {
			// The kernel's own line, or x86's earlier one until it comes.
			if b.Cmdline != "" && (!b.Early || f.Cmdline == "" || f.cmdlineEarly) {
				f.Cmdline, f.CmdlineLine, f.cmdlineEarly = b.Cmdline, m, b.Early
			}
			if len(f.Unknown) < maxKept {
				f.Unknown = append(f.Unknown, b.Unknown...)
				if len(b.Unknown) > 0 {
					f.UnknownLines = keep(f.UnknownLines, m)
				}
			}
		}
		return true
	})
	if errors.Is(err, host.ErrLogCut) {
		f.Cut, err = err.Error(), nil
	}
	return f, err
}

// kernelTags are prefixes only the kernel prints: NVIDIA's driver, the IOMMU drivers,
// the PCI core, the boot banner.
var kernelTags = []string{"NVRM: ", "AMD-Vi: ", "DMAR: ", "DMAR-IR: ", "iommu: ", "pci_bus ", "Linux version ", "nvidia-nvlink: ", "vfio-pci "}

// kernelMessage says whether a bare line (journalctl -o cat, a paste without stamps) is
// a kernel message: a dev_printk prefix with a PCI address, a kernel tag, the command line.
func kernelMessage(m string) bool {
	if _, _, ok := kmsg.ParseDriverPrefix(m); ok {
		return true
	}
	if _, ok := kmsg.ParseBootLine(m); ok {
		return true
	}
	for _, t := range kernelTags {
		if strings.HasPrefix(m, t) {
			return true
		}
	}
	return false
}

// CheckLogFile refuses a kernel log file (name, as given) that holds no kernel log
// record: the checks would read it as a log where nothing happened, and say so.
func CheckLogFile(name string, f *LogFacts) error {
	if f == nil || f.KernelRecords > 0 {
		return nil
	}
	e := &LogFileError{Name: name, What: "holds no kernel log record"}
	if f.Records == 0 {
		e.What = "is empty"
	}
	return e
}

// LogFileError is a kernel log file given to read that holds no kernel log record.
type LogFileError struct {
	Name string
	What string // "is empty", "holds no kernel log record"
}

func (e *LogFileError) Error() string { return e.Message("the kernel log") }

// Message names the file as the command line took it (its flag).
func (e *LogFileError) Message(given string) string {
	return fmt.Sprintf("%s %s %s (a record reads \"[   12.345678] pci 0000:81:00.0: ...\" or \"... kernel: ...\")\n"+
		"capture one with journalctl -k -b > kernel.log or dmesg > kernel.log, and give that file", given, e.Name, e.What)
}

// failure keeps m when it says a device failed.
func (f *LogFacts) failure(m string, t time.Duration) {
	var x Failure
	if v, ok := kmsg.ParseXid(m); ok {
		x = Failure{Device: v.Device, Xid: v.Code}
	} else if d, ok := kmsg.ParseFallenOff(m); ok {
		x = Failure{Device: d, Fallen: true}
	} else if a, ok := kmsg.ParseAER(m); ok {
		switch {
		case a.Severity != "":
			f.lastAER = a.Device
		case a.Bit != "" && a.Device != f.lastAER:
			return // not the bits of an error just reported: some other "[n] …" line
		}
		x = Failure{Device: a.Device, Driver: a.Driver, AER: a}
	} else {
		return
	}
	f.FailureCount++
	if len(f.Failures) < maxFailures {
		x.Line, x.Time = m, t
		f.Failures = append(f.Failures, x)
	}
}

// initFailure keeps m when it says a GPU did not come up.
func (f *LogFacts) initFailure(m string) {
	var x InitFailure
	if v, ok := kmsg.ParseRmInitFailed(m); ok {
		x = InitFailure{Device: v.Device, RM: &v}
	} else if d, st, ok := kmsg.ParsePowerFailure(m); ok {
		x = InitFailure{Device: d, Power: st}
	} else if _, ok := kmsg.ParseNVRMProbeFailed(m); ok || kmsg.IsNVRMNoneInitialized(m) {
		x = InitFailure{}
	} else {
		return
	}
	x.Line = m
	f.InitFailures = keep(f.InitFailures, x)
}

// wholeMismatch reports whether an API mismatch message has come as far as the module's
// version.
func wholeMismatch(m string) bool {
	a, ok := kmsg.ParseAPIMismatch(m)
	return ok && a.KernelVersion != ""
}
