package kmsg

import (
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
)

// IOMMUFault is a DMA the IOMMU refused.
type IOMMUFault struct {
	// Kind is "IO_PAGE_FAULT" or "RMP_PAGE_FAULT" (AMD-Vi), or "DMAR" (Intel VT-d).
	Kind string
	// Device is the device whose DMA faulted, "0000:07:00.0". AMD's short "07:00.0" and
	// Intel's "[00:02.0]" carry no PCI domain: 0000 is assumed.
	Device string
	// Driver is the driver bound to the device when the kernel names it (the "nvidia" of
	// "nvidia 0000:07:00.0: AMD-Vi: Event logged …"); empty otherwise.
	Driver string
	// Address is the faulting address: AMD's address= (gpa= for RMP_PAGE_FAULT), Intel's
	// fault addr.
	Address uint64
	// Reason is Intel's fault reason text ("PTE Read access is not set"; "fault reason
	// 0x06" when the text is missing, empty in the oldest form, which printed the reason
	// as a message of its own), or AMD's flags as printed: "flags=0x0020", for
	// RMP_PAGE_FAULT "flags_rmp=0x0000 flags=0x0020".
	Reason string
}

var (
	// drivers/iommu/intel/dmar.c dmar_fault_do_one, all generations:
	//	[DMA Read NO_PASID] Request device [00:02.0] fault addr 0x7cd80000 [fault reason 0x01] Present bit in root entry is clear
	//	[DMA Read NO_PASID] Request device [0x00:0x02.0] fault addr 0x7c346000 [fault reason 0x06] PTE Read access is not set
	//	[DMA Read] Request device [00:02.0] PASID ffffffff fault addr 9c000000 [fault reason 06] PTE Read access is not set
	//	[DMA Write] Request device [00:02.0] fault addr 6df084000
	dmarRe = lazyre.New(`^\[DMA (?:Read|Write)(?: NO_PASID| PASID 0x[0-9a-fA-F]+)?\] Request device \[((?:0x)?[0-9a-fA-F]{1,2}:(?:0x)?[0-9a-fA-F]{1,2}\.[0-7])\](?: PASID [0-9a-fA-F]+)? fault addr (?:0x)?([0-9a-fA-F]+)(?: \[fault reason (?:0x)?([0-9a-fA-F]+)\] ?(.*))?`)
	// The oldest kernels printed the reason separately: "DMAR:[fault reason 05]PTE Write access is not set".
	dmarReasonRe = lazyre.New(`^DMAR: ?\[fault reason (?:0x)?([0-9a-fA-F]+)\] ?(.*)`)
)

// ParseIOMMUFault recognises the IOMMU's reports of refused DMA:
//
//	nvidia 0000:07:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]
//	AMD-Vi: Event logged [IO_PAGE_FAULT device=07:00.0 domain=0x0007 address=0xffffc02000 flags=0x0000]
//	AMD-Vi: Event logged [IO_PAGE_FAULT device=0000:07:00.0 domain=0x0007 address=0xffffc02000 flags=0x0000]
//	vfio-pci 0000:c1:00.0: AMD-Vi: Event logged [RMP_PAGE_FAULT vmg_tag=0x0000, gpa=0x740b8784, flags_rmp=0x0000, flags=0x0020]
//	DMAR: [DMA Read NO_PASID] Request device [00:02.0] fault addr 0x7cd80000 [fault reason 0x01] Present bit in root entry is clear
//	DMAR: [DMA Read NO_PASID] Request device [0x00:0x02.0] fault addr 0x7c346000 [fault reason 0x06] PTE Read access is not set
//	DMAR: [DMA Read] Request device [00:02.0] PASID ffffffff fault addr 9c000000 [fault reason 06] PTE Read access is not set
//	DMAR:[DMA Write] Request device [00:02.0] fault addr 6df084000
//
// Intel's interrupt-remapping faults ("DMAR: [INTR-REMAP] Request device [f0:1f.0] fault
// index 0x0 …") are not DMA and are not recognised: a device's interrupt set-up is no
// evidence about its DMA or peer-to-peer traffic. Neither are AMD's other events
// ("Event logged [Device not attached to domain properly]", ILLEGAL_DEV_TABLE_ENTRY, …).
func ParseIOMMUFault(msg string) (IOMMUFault, bool) {
	amd := strings.Contains(msg, "Event logged [")
	if !amd && !strings.Contains(msg, "DMAR:") {
		return IOMMUFault{}, false
	}
	var out IOMMUFault
	var lines []string
	if !amd {
		lines = strings.Split(msg, "\n")
	}
	i := -1
	found := eachLine(msg, func(line string) bool {
		i++
		var ok bool
		if amd {
			out, ok = amdFault(line)
			return ok
		}
		out, ok = intelFault(line)
		if ok && out.Reason == "" && i+1 < len(lines) {
			// The oldest form's reason, when a log tool kept it in the same record.
			if m := dmarReasonRe.FindStringSubmatch(strings.TrimSpace(lines[i+1])); m != nil {
				out.Reason = dmarReason(m[1], m[2])
			}
		}
		return ok
	})
	return out, found
}

func dmarReason(code, text string) string {
	if text = strings.TrimSpace(text); text != "" {
		return text
	}
	if len(code) < 2 {
		code = "0" + code
	}
	return "fault reason 0x" + strings.ToLower(code)
}

func intelFault(line string) (IOMMUFault, bool) {
	rest, ok := strings.CutPrefix(line, "DMAR:")
	if !ok {
		return IOMMUFault{}, false
	}
	m := dmarRe.FindStringSubmatch(strings.TrimPrefix(rest, " "))
	if m == nil {
		return IOMMUFault{}, false
	}
	bdf, ok1 := normBDF(m[1])
	addr, ok2 := parseHex(m[2], 64)
	if !ok1 || !ok2 {
		return IOMMUFault{}, false
	}
	f := IOMMUFault{Kind: "DMAR", Device: bdf, Address: addr}
	if m[3] != "" {
		f.Reason = dmarReason(m[3], m[4])
	}
	return f, true
}

func amdFault(line string) (IOMMUFault, bool) {
	var f IOMMUFault
	if driver, bdf, rest, ok := pciPrefix(line); ok {
		f.Driver, f.Device, line = driver, bdf, rest
	} else if _, _, rest, ok := devPrefix(line); ok && strings.Contains(rest, "Event logged [") {
		// "iommu ivhd0: AMD-Vi: …": the IOMMU itself, not the device that faulted.
		line = rest
	}
	line, _ = cutTag(line, "AMD-Vi: ")
	body, ok := strings.CutPrefix(line, "Event logged [")
	if !ok {
		return IOMMUFault{}, false
	}
	for _, kind := range []string{"IO_PAGE_FAULT", "RMP_PAGE_FAULT"} {
		if rest, ok := strings.CutPrefix(body, kind); ok && (rest == "" || rest[0] == ' ' || rest[0] == ']') {
			f.Kind, body = kind, rest
			break
		}
	}
	if f.Kind == "" {
		return IOMMUFault{}, false
	}
	if end := strings.IndexByte(body, ']'); end >= 0 {
		body = body[:end]
	}
	var flags []string
	for field := range strings.FieldsFuncSeq(body, func(r rune) bool { return r == ' ' || r == ',' }) {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			continue
		}
		switch key {
		case "device":
			if f.Device == "" {
				if bdf, ok := normBDF(value); ok {
					f.Device = bdf
				}
			}
		case "address", "gpa":
			if a, ok := parseHex(value, 64); ok {
				f.Address = a
			}
		case "flags", "flags_rmp":
			flags = append(flags, field)
		}
	}
	f.Reason = strings.Join(flags, " ")
	return f, true
}

// SEVState is what kvm_amd says of one of AMD's memory encryption features.
type SEVState struct {
	Feature string // "SEV", "SEV-ES", "SEV-SNP"
	State   string // "enabled", "disabled", "unusable"
}

var (
	// arch/x86/kvm/svm/sev.c: "SEV %s (ASIDs %u - %u)", also for SEV-ES and SEV-SNP.
	sevRe = lazyre.New(`^(SEV|SEV-ES|SEV-SNP) (enabled|disabled|unusable) \(ASIDs \d+ - \d+\)`)
	// Older kernels: "SEV supported: %u ASIDs", "SEV-ES supported: %u ASIDs", and, in the
	// first SNP kernels, "SEV-ES and SEV-SNP supported: %u ASIDs".
	sevOldRe = lazyre.New(`^(SEV|SEV-ES|SEV-SNP|SEV-ES and SEV-SNP) supported: \d+ ASIDs`)
)

// ParseSEV recognises kvm_amd's report of SEV, SEV-ES and SEV-SNP:
//
//	kvm_amd: SEV-SNP enabled (ASIDs 1 - 1)
//
// Older kernels printed "kvm_amd: SEV supported: 509 ASIDs", only for what they enabled:
// that is returned as "enabled", and "SEV-ES and SEV-SNP supported: …" as SEV-SNP
// enabled (SEV-SNP implies SEV-ES).
func ParseSEV(msg string) (SEVState, bool) {
	if !strings.Contains(msg, "SEV") {
		return SEVState{}, false
	}
	var out SEVState
	found := eachLine(msg, func(line string) bool {
		line, _ = cutTag(line, "kvm_amd: ", "SVM: ", "kvm: ")
		if m := sevRe.FindStringSubmatch(line); m != nil {
			out = SEVState{Feature: m[1], State: m[2]}
			return true
		}
		if m := sevOldRe.FindStringSubmatch(line); m != nil {
			feature := m[1]
			if feature == "SEV-ES and SEV-SNP" {
				feature = "SEV-SNP"
			}
			out = SEVState{Feature: feature, State: "enabled"}
			return true
		}
		return false
	})
	return out, found
}

// drivers/iommu/amd/init.c iommu_snp_enable, now "SNP: %s, SNP cannot be supported.", once
// "SEV-SNP: IOMMU is either disabled or configured in passthrough mode."
var snpIOMMURe = lazyre.New(`^(?:SEV-)?SNP: (IOMMU\b.*?)(?:, SNP cannot be supported)?\.?$`)

// ParseSNPIOMMU recognises the AMD IOMMU driver's lines about SEV-SNP: "AMD-Vi: IOMMU SNP
// support enabled." (supported), and the reasons it gives for not supporting it, returned
// without the "SNP: " and ", SNP cannot be supported.":
//
//	AMD-Vi: SNP: IOMMU disabled or configured in passthrough mode, SNP cannot be supported.
//	AMD-Vi: SNP: IOMMU is configured with V2 page table mode, SNP cannot be supported.
//	AMD-Vi: SNP: IOMMU SNP feature not enabled, SNP cannot be supported.
//	AMD-Vi: SEV-SNP: IOMMU is either disabled or configured in passthrough mode.
func ParseSNPIOMMU(msg string) (supported bool, reason string, ok bool) {
	if !strings.Contains(msg, "SNP") {
		return false, "", false
	}
	ok = eachLine(msg, func(line string) bool {
		line, _ = cutTag(line, "AMD-Vi: ")
		if line == "IOMMU SNP support enabled." || line == "IOMMU SNP support enabled" {
			supported, reason = true, ""
			return true
		}
		if m := snpIOMMURe.FindStringSubmatch(line); m != nil {
			supported, reason = false, m[1]
			return true
		}
		return false
	})
	return supported, reason, ok
}

// drivers/iommu/iommu.c: "Default domain type: %s%s" ("%s %s" in older kernels, which left
// a trailing blank).
var defaultDomainRe = lazyre.New(`^Default domain type: (\w+)\s*(\(set via kernel command line\))?$`)

// ParseDefaultDomain recognises "iommu: Default domain type: Translated (set via kernel
// command line)" and returns the type as printed ("Translated", "Passthrough", "Blocked",
// "Unmanaged", "Platform", "Unknown") and whether the command line chose it.
func ParseDefaultDomain(msg string) (typ string, viaCmdline bool, ok bool) {
	if !strings.Contains(msg, "Default domain type: ") {
		return "", false, false
	}
	ok = eachLine(msg, func(line string) bool {
		line, _ = cutTag(line, "iommu: ")
		if m := defaultDomainRe.FindStringSubmatch(line); m != nil {
			typ, viaCmdline = m[1], m[2] != ""
			return true
		}
		return false
	})
	return typ, viaCmdline, ok
}

// IsPassthroughDisabledByEncryption recognises "iommu: Memory encryption detected -
// Disabling default IOMMU Passthrough": passthrough was the built-in default, and SME or
// SEV made the kernel translate instead.
func IsPassthroughDisabledByEncryption(msg string) bool {
	return strings.Contains(msg, "Memory encryption detected - Disabling default IOMMU Passthrough")
}

var unknownOptionRe = lazyre.New(`^(AMD-Vi|DMAR|intel_iommu|Intel-IOMMU): Unknown option - '(.*)'$`)

// ParseUnknownIOMMUOption recognises an IOMMU driver's complaint about a kernel parameter
// it does not know, "AMD-Vi: Unknown option - 'on'" (amd_iommu=on) or "DMAR: Unknown option
// - 'foo'" (intel_iommu=foo), and returns the driver's tag as printed ("AMD-Vi", "DMAR")
// and the option.
func ParseUnknownIOMMUOption(msg string) (driver string, option string, ok bool) {
	if !strings.Contains(msg, "Unknown option - '") {
		return "", "", false
	}
	ok = eachLine(msg, func(line string) bool {
		if m := unknownOptionRe.FindStringSubmatch(line); m != nil {
			driver, option = m[1], m[2]
			return true
		}
		return false
	})
	return driver, option, ok
}

var (
	// arch/x86/virt/svm/sev.c: "RMP table physical range [0x%016llx - 0x%016llx]" (before
	// 6.11 "RMP table physical address [...]", before 6.9 without the brackets), under
	// the "SEV-SNP: " prefix.
	snpRMPRe = lazyre.New(`^SEV-SNP: RMP table physical (?:address|range) `)
	// drivers/crypto/ccp/sev-dev.c: "SEV-SNP API:%d.%d build:%d" once SNP is
	// initialised, "SEV-SNP: failed to INIT rc %d, error %#x" when it is not.
	snpAPIRe  = lazyre.New(`^SEV-SNP API:(\d+\.\d+) build:\s*\d+`)
	snpInitRe = lazyre.New(`^SEV-SNP:\s+failed to INIT\b`)
)

// ParseSNPPlatform recognises what the platform says of SEV-SNP, as opposed to KVM:
// "rmp" for the RMP table the firmware reserved ("SEV-SNP: RMP table physical range
// [...]"), "api" with the firmware's API version once SNP is initialised ("ccp
// 0000:05:00.5: SEV-SNP API:1.55 build:24"), "init-failed" when it could not be ("ccp
// 0000:42:00.1: SEV-SNP: failed to INIT rc -5, error 0x3").
func ParseSNPPlatform(msg string) (kind, version string, ok bool) {
	if !strings.Contains(msg, "SEV-SNP") {
		return "", "", false
	}
	found := eachLine(msg, func(line string) bool {
		if snpRMPRe.MatchString(line) {
			kind = "rmp"
			return true
		}
		if _, _, rest, ok := devPrefix(line); ok {
			line = strings.TrimSpace(rest)
		}
		if m := snpAPIRe.FindStringSubmatch(line); m != nil {
			kind, version = "api", m[1]
			return true
		}
		if snpInitRe.MatchString(line) {
			kind = "init-failed"
			return true
		}
		return false
	})
	return kind, version, found
}
