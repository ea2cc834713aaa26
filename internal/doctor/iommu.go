package doctor

import (
	"fmt"
	"slices"

	"github.com/gpusplit/gpusplit/internal/bootcfg"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// groupTypes reads the default domain type of each GPU's IOMMU group.
func groupTypes(e *Env) map[int]string {
	out := map[int]string{}
	for _, g := range e.Inv.GPUs {
		if g.IOMMUGroup < 0 {
			continue
		}
		if t, err := e.H.ReadString(fmt.Sprintf("/sys/kernel/iommu_groups/%d/type", g.IOMMUGroup)); err == nil {
			out[g.IOMMUGroup] = t
		}
	}
	return out
}

func cmdlineTokens(e *Env) []string {
	c, err := e.H.ReadString("/proc/cmdline")
	if err != nil {
		return nil
	}
	return bootcfg.Tokens(c)
}

// checkIOMMUOff finds a host without an active IOMMU: no IOMMU groups, so no device can be
// bound to vfio-pci for a VM.
func checkIOMMUOff(e *Env) []Finding {
	if len(e.Inv.GPUs) == 0 || e.Guest {
		return nil
	}
	groups, err := e.H.ReadDir("/sys/kernel/iommu_groups")
	if err == nil && len(groups) > 0 {
		return nil
	}
	sev := Warning
	if e.Desired != nil {
		for _, t := range e.Desired.Targets {
			if t.Driver == plan.VFIO {
				sev = Error // the configured split needs it
			}
		}
	}
	evidence := []string{"/sys/kernel/iommu_groups is empty: no device has an IOMMU group"}
	if c, err := e.H.ReadString("/proc/cmdline"); err == nil {
		evidence = append(evidence, "/proc/cmdline: "+c)
	}
	return []Finding{{
		Severity: sev,
		Title:    "no IOMMU is active: GPUs cannot be passed to VMs",
		Evidence: evidence,
		Remedy: "Enable the IOMMU in the firmware (Intel VT-d, or AMD IOMMU / AMD-Vi, often under \"SVM\" or \"NBIO\"). " +
			"On Intel with kernels before 6.8 also boot with `intel_iommu=on`; AMD's IOMMU is on whenever the firmware enables it " +
			"(`amd_iommu=on` is not a valid value). Then reboot and check /sys/kernel/iommu_groups.",
	}}
}

// checkIOMMUParams finds kernel parameters for the IOMMU that do nothing.
func checkIOMMUParams(e *Env) []Finding {
	var out []Finding
	tokens := cmdlineTokens(e)
	var invalid []string
	for _, t := range tokens {
		if t == "amd_iommu=on" {
			invalid = append(invalid, "/proc/cmdline: amd_iommu=on")
		}
	}
	if e.Log != nil {
		for _, l := range e.Log.UnknownOptions {
			invalid = append(invalid, "kernel: "+l)
		}
	}
	if len(invalid) > 0 {
		out = append(out, Finding{
			Severity: Info,
			Title:    "an IOMMU kernel parameter the kernel does not know, which has no effect",
			Evidence: invalid,
			Remedy: "`amd_iommu=on` is not a value the AMD IOMMU driver knows (it prints \"Unknown option - 'on'\"): the AMD IOMMU is on " +
				"whenever the firmware enables it. Remove it so that it does not look like the switch it is not.",
		})
	}
	return out
}

// checkIOMMUTranslated finds GPU groups whose DMA the IOMMU translates, which sends
// peer-to-peer traffic through the root complex's IOMMU.
func checkIOMMUTranslated(e *Env) []Finding {
	var out []Finding
	if e.Guest || len(e.Inv.GPUs) < 2 {
		return out
	}
	var translated []string
	for g, t := range groupTypes(e) {
		if t == "DMA" || t == "DMA-FQ" {
			translated = append(translated, fmt.Sprintf("/sys/kernel/iommu_groups/%d/type: %s", g, t))
		}
	}
	if e.Log != nil && e.Log.DefaultDomain == "Translated" {
		translated = append(translated, "kernel: "+e.Log.DomainLine)
	}
	if len(translated) == 0 {
		return out
	}
	slices.Sort(translated)
	remedy := "Boot with `iommu=pt` (passthrough for the host's own DMA; devices given to VMs stay isolated by vfio), then reboot. "
	if snp(e) {
		remedy = "SEV-SNP is enabled and needs the IOMMU translating: `iommu=pt` would turn SNP off. Keep it if you need SNP, and set " +
			"NCCL_P2P_DISABLE=1 for NCCL on this host; otherwise disable SNP and boot with `iommu=pt`. "
	}
	out = append(out, Finding{
		Severity: Warning,
		Title:    "the IOMMU translates the GPUs' DMA: peer-to-peer transfers between GPUs go through it",
		Evidence: capped(translated, 8),
		Remedy: remedy + "With translation, GPU-to-GPU DMA is redirected through the IOMMU of the root complex: slower, and " +
			"on some platforms it faults (IO_PAGE_FAULT) and NCCL hangs or reads zeros. gpusplit p2p checks whether the bytes arrive.",
	})
	return out
}

// checkPageFaults finds IOMMU faults that name GPUs, or devices of a GPU's IOMMU group:
// their DMA, typically peer-to-peer between GPUs, was refused, and NCCL hangs or
// returns corrupted data. Faults of other devices (an NVMe drive) are not the GPUs'.
func checkPageFaults(e *Env) []Finding {
	if e.Log == nil || e.Log.FaultCount == 0 {
		return nil
	}
	var evidence []string
	n := 0
	for i, f := range e.Log.Faults {
		if e.logGPU(f.Device, f.Driver, true) {
			n++
			evidence = append(evidence, "kernel: "+e.Log.FaultLines[i])
		}
	}
	if n == 0 {
		return nil
	}
	if e.Log.FaultCount > n {
		all := fmt.Sprintf("(%d IOMMU faults in the log in all, of every device", e.Log.FaultCount)
		if e.Log.SuppressedFaults > 0 {
			all += fmt.Sprintf("; %d of them not printed, which the kernel counted as callbacks suppressed", e.Log.SuppressedFaults)
		}
		evidence = append(evidence, all+")")
	}
	remedy := "Until it is fixed, run NCCL with NCCL_P2P_DISABLE=1 (transfers go through host memory). The lasting fix is `iommu=pt` on the host, "
	if snp(e) {
		remedy = "SEV-SNP is enabled, and it needs the IOMMU translating, so `iommu=pt` is not an option while SNP is wanted: run NCCL with NCCL_P2P_DISABLE=1. "
	}
	return []Finding{{
		Severity: Error,
		Title:    fmt.Sprintf("the IOMMU refused DMA of GPUs (%d faults naming them): peer-to-peer transfers are broken", n),
		Evidence: capped(evidence, 8),
		Remedy: remedy + "which leaves the host's DMA untranslated (devices passed to VMs stay isolated). " +
			"Faults during P2P mean the copies return zeros or hang; gpusplit p2p shows which pairs are affected.",
	}}
}

// snp reports whether SEV-SNP is enabled on the host.
func snp(e *Env) bool {
	if v, err := e.H.ReadString("/sys/module/kvm_amd/parameters/sev_snp"); err == nil && (v == "Y" || v == "1") {
		return true
	}
	if e.Log != nil {
		if e.Log.SNPUp {
			return true // the firmware gave its SNP API: SNP is initialised
		}
		for _, s := range e.Log.SEV {
			if s.Feature == "SEV-SNP" && s.State == "enabled" {
				return true
			}
		}
	}
	return false
}

// checkSEVSNP says that SEV-SNP is on, and what it costs GPUs: the IOMMU must translate,
// and peer-to-peer DMA between passed-through GPUs goes through it and its RMP checks.
func checkSEVSNP(e *Env) []Finding {
	var out []Finding
	if e.Log != nil && e.Log.SNPInitFailed {
		out = append(out, Finding{
			Severity: Warning,
			Title:    "the platform's SEV-SNP firmware failed to initialise: SNP guests cannot start",
			Evidence: capped(prefixed("kernel: ", e.Log.SNPPlatform), 8),
			Remedy: "The PSP firmware (through the ccp driver) refused to start SNP, though the firmware reserved its RMP table. Update the " +
				"system firmware and the SEV firmware (linux-firmware's amd/amd_sev_fam19h_*.sbin, which ccp loads at boot), and check the " +
				"firmware's SNP settings (SNP memory coverage, the RMP table). If confidential VMs are not wanted, turn SNP off in the " +
				"firmware: the IOMMU then need not translate.",
		})
	}
	if !snp(e) {
		return out
	}
	var evidence []string
	if v, err := e.H.ReadString("/sys/module/kvm_amd/parameters/sev_snp"); err == nil {
		evidence = append(evidence, "/sys/module/kvm_amd/parameters/sev_snp: "+v)
	}
	if e.Log != nil {
		evidence = append(evidence, prefixed("kernel: ", e.Log.SEVLines)...)
		evidence = append(evidence, prefixed("kernel: ", e.Log.SNPIOMMU)...)
		evidence = append(evidence, prefixed("kernel: ", e.Log.SNPPlatform)...)
	}
	sev := Info
	if len(e.Inv.GPUs) > 1 {
		sev = Warning
	}
	return append(out, Finding{
		Severity: sev,
		Title:    "SEV-SNP is enabled: the IOMMU must translate, and GPU peer-to-peer DMA goes through it",
		Evidence: capped(evidence, 8),
		Remedy: "SEV-SNP needs the IOMMU on and translating (the kernel turns SNP off under `iommu=pt`), and once SNP is up the IOMMU " +
			"checks every DMA against the RMP table. Peer-to-peer DMA between GPUs then crosses it and can fault or return zeros: run NCCL " +
			"with NCCL_P2P_DISABLE=1 on such hosts. If you do not need confidential VMs, disable SNP (in the firmware, or " +
			"`kvm_amd.sev_snp=0`) and boot with `iommu=pt`.",
	})
}

func prefixed(p string, lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, p+oneLine(l))
	}
	return out
}
