package doctor

import (
	"errors"
	"io"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/kmsg"
)

// maxKept bounds what a log can make the doctor keep of each kind of line: a log that
// repeats a fault a million times is summed up, not held.
const maxKept = 200

// LogFacts is what the doctor keeps of a kernel log: the lines it recognised.
type LogFacts struct {
	Records int
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
	DefaultDomain  string // "Translated", "Passthrough", … from "iommu: Default domain type"
	DomainLine     string
	EncryptionNoPT string // "Memory encryption detected - Disabling default IOMMU Passthrough"
	UnknownOptions []string
	Mismatches     []kmsg.APIMismatch
	MismatchLines  []string
	LinkLimits     []kmsg.LinkLimit
	LinkLines      []string
	Loaded         string // the nvidia version the driver announced when it loaded
}

func keep[T any](list []T, v T) []T {
	if len(list) >= maxKept {
		return list
	}
	return append(list, v)
}

// CollectLog reads a kernel log in one pass and keeps the lines the checks look for.
func CollectLog(r io.Reader) (*LogFacts, error) {
	f := &LogFacts{}
	err := kmsg.Scan(r, func(rec kmsg.Record) bool {
		f.Records++
		m := rec.Message
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
		if x, ok := kmsg.ParseIOMMUFault(m); ok {
			f.FaultCount++
			f.Faults = keep(f.Faults, x)
			f.FaultLines = keep(f.FaultLines, m)
		}
		if s, ok := kmsg.ParseSEV(m); ok {
			f.SEV = keep(f.SEV, s)
			f.SEVLines = keep(f.SEVLines, m)
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
		return true
	})
	if errors.Is(err, host.ErrLogCut) {
		f.Cut, err = err.Error(), nil
	}
	return f, err
}
