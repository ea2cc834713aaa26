package kmsg

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// found is what every recogniser makes of one message; the zero value is "nothing".
type found struct {
	BAR           *BARFailure
	Realloc       bool
	NVRMBar       *NVRMBar
	InvalidRegion bool
	ProbeRoutine  int // devices in "probe routine failed for N device(s)"; 0 when not that line
	NoneInit      bool
	Probe         *ProbeFailure
	Fault         *IOMMUFault
	SEV           *SEVState
	SNP           *snpResult
	Domain        *domainResult
	EncNoPT       bool
	Unknown       *unknownResult
	Mismatch      *APIMismatch
	Loading       string
	Link          *LinkLimit
	Enumerated    *Enumerated
	Xid           *Xid
	FallenOff     string // the GPU of a "fallen off the bus" message
	AER           *AER
	InitFailed    *InitFailure
	Power         string // "device state" of a power-state failure
	Suppressed    int    // IOMMU fault messages the kernel did not print
	NotReady      *NotReady
	VFIO          *VFIOError
	Boot          *BootLine
	SNPPlatform   string // "kind version" of a platform SEV-SNP line
}

type snpResult struct {
	Supported bool
	Reason    string
}

type domainResult struct {
	Type    string
	Cmdline bool
}

type unknownResult struct{ Driver, Option string }

func ptr[T any](v T) *T { return &v }

func recognise(msg string) found {
	var f found
	if v, ok := ParseBARFailure(msg); ok {
		f.BAR = &v
	}
	f.Realloc = IsReallocHint(msg)
	if v, ok := ParseNVRMBar(msg); ok {
		f.NVRMBar = &v
	}
	f.InvalidRegion = IsNVRMInvalidRegion(msg)
	if n, ok := ParseNVRMProbeFailed(msg); ok {
		f.ProbeRoutine = n
	}
	f.NoneInit = IsNVRMNoneInitialized(msg)
	if v, ok := ParseProbeFailure(msg); ok {
		f.Probe = &v
	}
	if v, ok := ParseIOMMUFault(msg); ok {
		f.Fault = &v
	}
	if v, ok := ParseSEV(msg); ok {
		f.SEV = &v
	}
	if s, r, ok := ParseSNPIOMMU(msg); ok {
		f.SNP = &snpResult{s, r}
	}
	if t, c, ok := ParseDefaultDomain(msg); ok {
		f.Domain = &domainResult{t, c}
	}
	f.EncNoPT = IsPassthroughDisabledByEncryption(msg)
	if d, o, ok := ParseUnknownIOMMUOption(msg); ok {
		f.Unknown = &unknownResult{d, o}
	}
	if v, ok := ParseAPIMismatch(msg); ok {
		f.Mismatch = &v
	}
	if v, ok := ParseNVRMLoading(msg); ok {
		f.Loading = v
	}
	if v, ok := ParseLinkLimit(msg); ok {
		f.Link = &v
	}
	if v, ok := ParseEnumerated(msg); ok {
		f.Enumerated = &v
	}
	if v, ok := ParseXid(msg); ok {
		f.Xid = &v
	}
	if v, ok := ParseFallenOff(msg); ok {
		f.FallenOff = v
	}
	if v, ok := ParseAER(msg); ok {
		f.AER = &v
	}
	if v, ok := ParseRmInitFailed(msg); ok {
		f.InitFailed = &v
	}
	if d, st, ok := ParsePowerFailure(msg); ok {
		f.Power = d + " " + st
	}
	if n, ok := ParseSuppressedFaults(msg); ok {
		f.Suppressed = n
	}
	if v, ok := ParseNotReady(msg); ok {
		f.NotReady = &v
	}
	if v, ok := ParseVFIOError(msg); ok {
		f.VFIO = &v
	}
	if v, ok := ParseBootLine(msg); ok {
		f.Boot = &v
	}
	if k, v, ok := ParseSNPPlatform(msg); ok {
		f.SNPPlatform = strings.TrimSpace(k + " " + v)
	}
	return f
}

func (f found) String() string {
	var parts []string
	v := reflect.ValueOf(f)
	for i := range v.NumField() {
		fv := v.Field(i)
		if fv.IsZero() {
			continue
		}
		if fv.Kind() == reflect.Pointer {
			fv = fv.Elem()
		}
		parts = append(parts, fmt.Sprintf("%s=%+v", v.Type().Field(i).Name, fv.Interface()))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " ")
}

// want is one record expected from a fixture.
type want struct {
	Time    time.Duration // -1 when the input has no time since boot
	Message string
	Found   found
}

func secs(s float64) time.Duration { return time.Duration(s*1e6+0.5) * time.Microsecond }

// fixture reads a testdata log, less its header: a first line that names its source, and
// "# " lines after it that say what it shows.
func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	first, rest, ok := strings.Cut(string(b), "\n")
	if !ok || !strings.HasPrefix(first, "# source: ") {
		t.Fatalf("%s: first line %q does not name the source", name, first)
	}
	for strings.HasPrefix(rest, "# ") {
		_, rest, _ = strings.Cut(rest, "\n")
	}
	return rest
}

func scanAll(t testing.TB, input string) []Record {
	t.Helper()
	var recs []Record
	if err := Scan(strings.NewReader(input), func(r Record) bool {
		recs = append(recs, r)
		return true
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return recs
}

const nvrmInvalid = "NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:"

// fixtures holds every real excerpt in testdata and what must come of it.
var fixtures = map[string][]want{
	"heymeco-rockchip-pcie-devices-2.log": {
		{secs(2.819960), "pci 0000:01:00.0: 31.504 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x4 link at 0000:00:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)",
			found{Link: &LinkLimit{Device: "0000:01:00.0", Available: "31.504 Gb/s", LimitedBy: "8.0 GT/s PCIe x4", At: "0000:00:00.0", Capable: "16.0 GT/s PCIe x16", CapableBandwidth: "252.048 Gb/s"}}},
		{secs(2.831115), "pci 0000:01:00.0: BAR 1 [mem size 0x10000000 64bit pref]: can't assign; no space",
			found{BAR: &BARFailure{"0000:01:00.0", "BAR 1", 0x10000000, "can't assign; no space"}}},
		{secs(2.831120), "pci 0000:01:00.0: BAR 1 [mem size 0x10000000 64bit pref]: failed to assign",
			found{BAR: &BARFailure{"0000:01:00.0", "BAR 1", 0x10000000, "failed to assign"}}},
		{secs(2.831126), "pci 0000:01:00.0: BAR 3 [mem size 0x02000000 64bit pref]: can't assign; no space",
			found{BAR: &BARFailure{"0000:01:00.0", "BAR 3", 0x02000000, "can't assign; no space"}}},
		{secs(2.831131), "pci 0000:01:00.0: BAR 3 [mem size 0x02000000 64bit pref]: failed to assign",
			found{BAR: &BARFailure{"0000:01:00.0", "BAR 3", 0x02000000, "failed to assign"}}},
	},
	"kata-containers-1704.log": {
		{secs(6.480355), "pci 0000:01:01.0: BAR 1: no space for [mem size 0x400000000 64bit pref]",
			found{BAR: &BARFailure{"0000:01:01.0", "BAR 1", 0x400000000, "no space for"}}},
		{secs(6.480606), "pci 0000:01:01.0: BAR 1: failed to assign [mem size 0x400000000 64bit pref]",
			found{BAR: &BARFailure{"0000:01:01.0", "BAR 1", 0x400000000, "failed to assign"}}},
		{secs(6.480810), "pci 0000:01:01.0: BAR 3: no space for [mem size 0x02000000 64bit pref]",
			found{BAR: &BARFailure{"0000:01:01.0", "BAR 3", 0x02000000, "no space for"}}},
		{secs(6.481023), "pci 0000:01:01.0: BAR 3: failed to assign [mem size 0x02000000 64bit pref]",
			found{BAR: &BARFailure{"0000:01:01.0", "BAR 3", 0x02000000, "failed to assign"}}},
	},
	"op-build-2816.log": {
		{secs(1.346272), "pci_bus 0005:00: Some PCI device resources are unassigned, try booting with pci=realloc", found{Realloc: true}},
	},
	"linux-pci-bar-allocation-lspci.log": {
		{-1, "01:00.0 3D controller: NVIDIA Corporation Device 20b2 (rev a1)", found{}},
		{-1, "Memory at db000000 (32-bit, non-prefetchable) [size=16M]", found{}},
		{-1, "Memory at 2000000000 (64-bit, prefetchable) [size=128G]", found{}},
		{-1, "Memory at 1000000000 (64-bit, prefetchable) [size=32M]", found{}},
		{-1, "0c:00.0 3D controller: NVIDIA Corporation Device 20b2 (rev a1)", found{}},
		{-1, "Memory at e0000000 (32-bit, non-prefetchable) [size=16M]", found{}},
		{-1, "Memory at <ignored> (64-bit, prefetchable)", found{}},
		{-1, "Memory at <ignored> (64-bit, prefetchable)", found{}},
	},
	"cloud-hypervisor-4375.log": {
		{secs(1.588914), `PCI: Using host bridge windows from ACPI; if necessary, use "pci=nocrs" and report a bug`, found{}},
		{secs(1.626455), "pci_bus 0000:00: root bus resource [mem 0x7d40000000-0x7ff3fffffff window]", found{}},
	},
	"gpu-operator-492.log": {
		{secs(83260.063553), nvrmInvalid + "\nNVRM: BAR1 is 0M @ 0x0 (PCI:0000:14:00.0)",
			found{InvalidRegion: true, NVRMBar: &NVRMBar{BAR: 1, SizeMB: 0, Address: 0, Device: "0000:14:00.0"}}},
		{secs(83260.063557), "nvidia: probe of 0000:14:00.0 failed with error -1",
			found{Probe: &ProbeFailure{"nvidia", "0000:14:00.0", -1}}},
		{secs(83260.106438), "NVRM: The NVIDIA probe routine failed for 2 device(s).", found{ProbeRoutine: 2}},
		{secs(83260.106441), "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  510.108.03  Thu Oct 20 05:10:45 UTC 2022", found{Loading: "510.108.03"}},
	},
	"lxd-14381.log": {
		{secs(7.583454), nvrmInvalid + "\nNVRM: BAR0 is 0M @ 0x0 (PCI:0000:07:00.0)",
			found{InvalidRegion: true, NVRMBar: &NVRMBar{BAR: 0, Device: "0000:07:00.0"}}},
		{secs(7.649151), nvrmInvalid + "\nNVRM: BAR0 is 0M @ 0x0 (PCI:0000:08:00.0)",
			found{InvalidRegion: true, NVRMBar: &NVRMBar{BAR: 0, Device: "0000:08:00.0"}}},
		{secs(7.652477), "NVRM: The NVIDIA probe routine failed for 2 device(s).", found{ProbeRoutine: 2}},
	},
	"open-gpu-kernel-modules-344.log": {
		{secs(1.121034), nvrmInvalid + "\nNVRM: BAR2 is 0M @ 0x0 (PCI:0000:00:05.0)",
			found{InvalidRegion: true, NVRMBar: &NVRMBar{BAR: 2, Device: "0000:00:05.0"}}},
	},
	"proxmox-forum-179366.log": {
		{-1, "01:00.0 3D controller: NVIDIA Corporation Device 3182 (rev a1)", found{}},
		{-1, "Control: I/O- Mem+ BusMaster-", found{}},
		{-1, "Region 0: Memory at 2000000000 (64-bit, prefetchable) [size=64M]", found{}},
		{-1, "Region 4: Memory at 2004000000 (64-bit, prefetchable) [size=32M]", found{}},
		{-1, "NVRM: This PCI I/O region assigned to your NVIDIA device is invalid", found{InvalidRegion: true}},
		{-1, "nvidia: probe of 0000:01:00.0 failed with error -1", found{Probe: &ProbeFailure{"nvidia", "0000:01:00.0", -1}}},
		{-1, "NVRM: None of the NVIDIA devices were initialized", found{NoneInit: true}},
	},
	"linux-doc-x86-iommu.log": {
		{-1, "iommu: Default domain type: Translated", found{Domain: &domainResult{"Translated", false}}},
		{-1, "iommu: DMA domain TLB invalidation policy: lazy mode", found{}},
		{-1, "AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0007 address=0xffffc02000 flags=0x0000]",
			found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Address: 0xffffc02000, Reason: "flags=0x0000"}}},
		{-1, "AMD-Vi: Event logged [IO_PAGE_FAULT device=07:00.0 domain=0x0007 address=0xffffc02000 flags=0x0000]",
			found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:07:00.0", Address: 0xffffc02000, Reason: "flags=0x0000"}}},
	},
	"amdsev-288.log": {
		{secs(37.438863), "iommu: Default domain type: Translated (set via kernel command line)", found{Domain: &domainResult{"Translated", true}}},
	},
	"fwupd-5304.log": {
		{-1, "iommu: Default domain type: Passthrough", found{Domain: &domainResult{"Passthrough", false}}},
	},
	"cuda-samples-48.log": {
		{-1, "nvidia 0000:07:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]",
			found{Fault: &IOMMUFault{"IO_PAGE_FAULT", "0000:07:00.0", "nvidia", 0x80000040, "flags=0x0020"}}},
		{-1, "nvidia 0000:07:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x9e139068 flags=0x0020]",
			found{Fault: &IOMMUFault{"IO_PAGE_FAULT", "0000:07:00.0", "nvidia", 0x9e139068, "flags=0x0020"}}},
	},
	"amdsev-109.log": {
		{-1, "vfio-pci 0000:c1:00.0: AMD-Vi: Event logged [RMP_PAGE_FAULT vmg_tag=0x0000, gpa=0x740b8784, flags_rmp=0x0000, flags=0x0020]",
			found{Fault: &IOMMUFault{"RMP_PAGE_FAULT", "0000:c1:00.0", "vfio-pci", 0x740b8784, "flags_rmp=0x0000 flags=0x0020"}}},
	},
	"dasharo-issues-641.log": {
		{secs(0.361089), "DMAR: [DMA Read NO_PASID] Request device [00:02.0] fault addr 0x7cd80000 [fault reason 0x01] Present bit in root entry is clear",
			found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:00:02.0", Address: 0x7cd80000, Reason: "Present bit in root entry is clear"}}},
		{secs(0.361100), "DMAR: DRHD: handling fault status reg 3", found{}},
	},
	"sof-test-744.log": {
		{secs(0.960486), "DMAR: [DMA Read NO_PASID] Request device [0x00:0x02.0] fault addr 0x7c346000 [fault reason 0x06] PTE Read access is not set",
			found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:00:02.0", Address: 0x7c346000, Reason: "PTE Read access is not set"}}},
	},
	"i915ovmfpkg-23.log": {
		{-1, "DMAR: [DMA Read] Request device [00:02.0] PASID ffffffff fault addr 9c000000 [fault reason 06] PTE Read access is not set",
			found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:00:02.0", Address: 0x9c000000, Reason: "PTE Read access is not set"}}},
	},
	"nccl-606.log": {
		{-1, "nccl-tests:26383:26397 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC", found{}},
	},
	"amdsev-287.log": {
		{0, "SEV-SNP: RMP table physical range [0x0000018279300000 - 0x00000183fd3fffff]", found{SNPPlatform: "rmp"}},
		{secs(61.424502), "ccp 0000:03:00.5: SEV-SNP API:1.55 build:42", found{SNPPlatform: "api 1.55"}},
		{secs(61.499835), "kvm_amd: SEV enabled (ASIDs 2 - 1006)", found{SEV: &SEVState{"SEV", "enabled"}}},
		{secs(61.499844), "kvm_amd: SEV-ES enabled (ASIDs 1 - 1)", found{SEV: &SEVState{"SEV-ES", "enabled"}}},
		{secs(61.499848), "kvm_amd: SEV-SNP enabled (ASIDs 1 - 1)", found{SEV: &SEVState{"SEV-SNP", "enabled"}}},
	},
	"amdsev-88.log": {
		{secs(0.500541), "AMD-Vi: SEV-SNP: IOMMU is either disabled or configured in passthrough mode.",
			found{SNP: &snpResult{false, "IOMMU is either disabled or configured in passthrough mode"}}},
	},
	"amdsev-113.log": {
		{-1, "AMD-Vi: SNP: IOMMU is disabled or configured in passthrough mode, SNP cannot be supported",
			found{SNP: &snpResult{false, "IOMMU is disabled or configured in passthrough mode"}}},
	},
	"jan-183.log": {
		{-1, "LnkSta: Speed 2.5GT/s (downgraded), Width x16 (ok)", found{}},
	},
	"neofetch-876.log": {
		{-1, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  Thu Oct 26 15:16:01 PDT 2017", found{}},
		{-1, "GCC version:  gcc version 7.2.0 (Ubuntu 7.2.0-8ubuntu3) ", found{}},
	},
	"nixgl-186.log": {
		{-1, "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (dvs-builder@U16-A24-9-2)  Thu Oct 10 12:15:00 UTC 2024", found{}},
		{-1, "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)", found{}},
	},
	"video2x-1226.log": {
		{-1, "Failed to initialize NVML: Driver/library version mismatch", found{}},
		{-1, "NVML library version: 565.57", found{}},
	},
	"nvidia-all-394.log": {
		{secs(9.424670), "NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)\nNVRM: has the version 595.84, but this kernel module has\nNVRM: the version 595.80.  Please make sure that this\nNVRM: kernel module and all NVIDIA driver components\nNVRM: have the same version.",
			found{Mismatch: &APIMismatch{"kwin_wayland", 1005, "595.84", "595.80"}}},
	},
	"bazzite-2668.log": {
		{secs(12.014918), "NVRM: API mismatch: the client has the version 570.153.02, but\nNVRM: this kernel module has the version 570.144.  Please\nNVRM: make sure that this kernel module and all NVIDIA driver\nNVRM: components have the same version.",
			found{Mismatch: &APIMismatch{"", 0, "570.153.02", "570.144"}}},
	},
	"libnvidia-container-213.log": {
		{-1, "lrwxrwxrwx  1 root root    26 Jul 29 07:59 libnvidia-ml.so.1 -> libnvidia-ml.so.525.105.17", found{}},
		{-1, "-rw-r--r--  1 root root  1.8M May 12  2022 libnvidia-ml.so.470.129.06", found{}},
		{-1, "-rw-r--r--  1 root root  1.8M Jul 25 08:32 libnvidia-ml.so.525.105.17", found{}},
	},
	"mbp-2016-linux-60.log": {
		{secs(83.730164), "pcieport 0000:05:01.0: bridge window [io  0x1000-0x0fff] to [bus 08-40] add_size 1000", found{}},
		{secs(83.730166), "pcieport 0000:05:01.0: bridge window [mem 0x00100000-0x000fffff 64bit pref] to [bus 08-40] add_size 200000 add_align 100000", found{}},
		{secs(83.730202), "pcieport 0000:7b:02.0: bridge window [mem 0x00100000-0x000fffff 64bit pref] to [bus 7d] add_size 200000 add_align 100000", found{}},
		{secs(83.730249), "pcieport 0000:05:01.0: BAR 15: assigned [mem 0xc0200000-0xc03fffff 64bit pref]", found{}},
		{secs(83.730251), "pcieport 0000:05:01.0: BAR 13: assigned [io  0x6000-0x6fff]", found{}},
		{secs(83.730254), "pcieport 0000:08:00.0: BAR 13: assigned [io  0x6000-0x6fff]", found{}},
		{secs(83.730256), "pcieport 0000:09:04.0: BAR 13: assigned [io  0x6000-0x6fff]", found{}},
		{secs(83.730261), "pcieport 0000:7b:02.0: BAR 15: no space for [mem size 0x00200000 64bit pref]", found{BAR: &BARFailure{Device: "0000:7b:02.0", Resource: "BAR 15", Size: 0x200000, What: "no space for"}}},
		{secs(83.730263), "pcieport 0000:7b:02.0: BAR 15: failed to assign [mem size 0x00200000 64bit pref]", found{BAR: &BARFailure{Device: "0000:7b:02.0", Resource: "BAR 15", Size: 0x200000, What: "failed to assign"}}},
		{secs(83.730265), "pcieport 0000:7b:02.0: BAR 15: no space for [mem size 0x00200000 64bit pref]", found{BAR: &BARFailure{Device: "0000:7b:02.0", Resource: "BAR 15", Size: 0x200000, What: "no space for"}}},
		{secs(83.730266), "pcieport 0000:7b:02.0: BAR 15: failed to assign [mem size 0x00200000 64bit pref]", found{BAR: &BARFailure{Device: "0000:7b:02.0", Resource: "BAR 15", Size: 0x200000, What: "failed to assign"}}},
		{secs(85.546651), "nvidia-nvlink: Nvlink Core is being initialized, major device number 240", found{}},
		{secs(85.546912), "NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:\nNVRM: BAR1 is 0M @ 0x0 (PCI:0000:0a:00.0)", found{NVRMBar: &NVRMBar{BAR: 1, SizeMB: 0x0, Address: 0x0, Device: "0000:0a:00.0"}, InvalidRegion: true}},
		{secs(85.546913), "NVRM: The system BIOS may have misconfigured your GPU.", found{}},
	},
	"amdsev-140.log": {
		{secs(5.745904), "SEV-SNP: RMP table physical address 0x0000000035600000 - 0x0000000075bfffff", found{SNPPlatform: "rmp"}},
		{secs(19.479814), "ccp 0000:47:00.1: enabling device (0000 -> 0002)", found{}},
		{secs(19.479999), "ccp 0000:47:00.1: no command queues available", found{}},
		{secs(19.480054), "ccp 0000:47:00.1: sev enabled", found{}},
		{secs(19.480056), "ccp 0000:47:00.1: psp enabled", found{}},
		{secs(19.720420), "ccp 0000:47:00.1: SEV-SNP support requires firmware version >= 1:51", found{}},
		{secs(19.740503), "ccp 0000:47:00.1: SEV: failed to INIT error 0x1, rc -5", found{}},
		{secs(19.749501), "ccp 0000:47:00.1: SEV API:1.49 build:3", found{}},
		{secs(19.839876), "SEV supported: 410 ASIDs", found{SEV: &SEVState{Feature: "SEV", State: "enabled"}}},
		{secs(19.839877), "SEV-ES and SEV-SNP supported: 99 ASIDs", found{SEV: &SEVState{Feature: "SEV-SNP", State: "enabled"}}},
	},
	"amdsev-181.log": {
		{secs(0.000000), "Linux version 6.5.0-rc2-snp-host-XXXXX (ubuntu@XXXXX) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #2 SMP Sat Sep  9 18:14:35 UTC 2023", found{}},
		{secs(0.000000), "Command line: BOOT_IMAGE=/boot/vmlinuz-6.5.0-rc2-snp-host-XXXXX root=PARTUUID=YYYYY ro console=tty1 console=ttyS0 nvme_core.io_timeout=4294967295 panic=-1", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.5.0-rc2-snp-host-XXXXX root=PARTUUID=YYYYY ro console=tty1 console=ttyS0 nvme_core.io_timeout=4294967295 panic=-1", Early: true}}},
		{secs(0.840661), "Kernel command line: BOOT_IMAGE=/boot/vmlinuz-6.5.0-rc2-snp-host-XXXXX root=PARTUUID=YYYYY ro console=tty1 console=ttyS0 nvme_core.io_timeout=4294967295 panic=-1", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.5.0-rc2-snp-host-XXXXX root=PARTUUID=YYYYY ro console=tty1 console=ttyS0 nvme_core.io_timeout=4294967295 panic=-1", Unknown: []string(nil)}}},
		{secs(0.840721), "Unknown kernel command line parameters \"BOOT_IMAGE=/boot/vmlinuz-6.5.0-rc2-snp-host-XXXXX\", will be passed to user space.", found{Boot: &BootLine{Cmdline: "", Unknown: []string{"BOOT_IMAGE=/boot/vmlinuz-6.5.0-rc2-snp-host-XXXXX"}}}},
		{secs(3.693304), "AMD-Vi: SNP enabled", found{}},
		{secs(3.693431), "SEV-SNP: RMP table physical address [0x000000601ff00000 - 0x00000060e07fffff]", found{SNPPlatform: "rmp"}},
		{secs(4.301763), "AMD-Vi: Extended features (0x841f77e022094ace, 0x0): PPR X2APIC NX IA GA PC SNP", found{}},
	},
	"amdsev-189.log": {
		{secs(0.492094), "SEV-SNP: RMP table physical address [0x000000004de00000 - 0x00000000566fffff]", found{SNPPlatform: "rmp"}},
		{secs(11.652294), "ccp 0000:42:00.1: sev enabled", found{}},
		{secs(11.702131), "ccp 0000:42:00.1: SEV-SNP: failed to INIT rc -5, error 0x3", found{SNPPlatform: "init-failed"}},
		{secs(11.717361), "ccp 0000:42:00.1: SEV: failed to INIT error 0x1, rc -5", found{}},
		{secs(11.717785), "ccp 0000:42:00.1: SEV API:1.55 build:7", found{}},
		{secs(11.782062), "kvm_amd: SEV-ES and SEV-SNP supported: 99 ASIDs", found{SEV: &SEVState{Feature: "SEV-SNP", State: "enabled"}}},
		{secs(11.782063), "kvm_amd: SEV enabled (ASIDs 100 - 509)", found{SEV: &SEVState{Feature: "SEV", State: "enabled"}}},
		{secs(11.782063), "kvm_amd: SEV-ES enabled (ASIDs 1 - 99)", found{SEV: &SEVState{Feature: "SEV-ES", State: "enabled"}}},
	},
	"amdsev-253.log": {
		{secs(0.000000), "Command line: BOOT_IMAGE=/vmlinuz-6.11.0-rc3-snp-host-85ef1ac03941 root=/dev/mapper/ubuntu--vg-lv--2 ro kvm_amd.sev=1 quiet splash systemd.unified_cgroup_hierarchy=1 vt.handoff=1", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/vmlinuz-6.11.0-rc3-snp-host-85ef1ac03941 root=/dev/mapper/ubuntu--vg-lv--2 ro kvm_amd.sev=1 quiet splash systemd.unified_cgroup_hierarchy=1 vt.handoff=1", Early: true}}},
		{secs(0.000000), "SEV-SNP: RMP table physical range [0x0000007fcd100000 - 0x000000804d6fffff]", found{SNPPlatform: "rmp"}},
		{secs(0.003473), "SEV-SNP: Reserving start/end of RMP table on a 2MB boundary [0x0000007fcd000000]", found{}},
		{secs(0.003478), "SEV-SNP: Reserving start/end of RMP table on a 2MB boundary [0x000000804d600000]", found{}},
		{secs(0.364249), "Kernel command line: BOOT_IMAGE=/vmlinuz-6.11.0-rc3-snp-host-85ef1ac03941 root=/dev/mapper/ubuntu--vg-lv--2 ro kvm_amd.sev=1 quiet splash systemd.unified_cgroup_hierarchy=1 vt.handoff=1", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/vmlinuz-6.11.0-rc3-snp-host-85ef1ac03941 root=/dev/mapper/ubuntu--vg-lv--2 ro kvm_amd.sev=1 quiet splash systemd.unified_cgroup_hierarchy=1 vt.handoff=1", Unknown: []string(nil)}}},
		{secs(9.138296), "ccp 0000:05:00.5: sev enabled", found{}},
		{secs(14.697860), "ccp 0000:05:00.5: SEV API:1.55 build:24", found{}},
		{secs(14.697866), "ccp 0000:05:00.5: SEV-SNP API:1.55 build:24", found{SNPPlatform: "api 1.55"}},
		{secs(14.705531), "kvm_amd: SEV enabled (ASIDs 253 - 1006)", found{SEV: &SEVState{Feature: "SEV", State: "enabled"}}},
		{secs(14.705533), "kvm_amd: SEV-ES enabled (ASIDs 1 - 252)", found{SEV: &SEVState{Feature: "SEV-ES", State: "enabled"}}},
		{secs(14.705534), "kvm_amd: SEV-SNP enabled (ASIDs 1 - 252)", found{SEV: &SEVState{Feature: "SEV-SNP", State: "enabled"}}},
	},
	"amdsev-271.log": {
		{secs(0.000000), "Linux version 6.15.0-sev-snp-amd64 (yeba@snp-server) (gcc (Ubuntu 14.2.0-19ubuntu2) 14.2.0, GNU ld (GNU Binutils for Ubuntu) 2.44) #1 SMP PREEMPT_DYNAMIC Wed Jun  4 15:09:56 UTC 2025", found{}},
		{secs(0.000000), "Command line: BOOT_IMAGE=/vmlinuz-6.15.0-sev-snp-amd64 root=/dev/mapper/ubuntu--vg-ubuntu--lv ro mem_encrypt=on kvm_amd.sev=1 iommu=nopt crashkernel=2G-4G:320M,4G-32G:512M,32G-64G:1024M,64G-128G:2048M,128G-:4096M", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/vmlinuz-6.15.0-sev-snp-amd64 root=/dev/mapper/ubuntu--vg-ubuntu--lv ro mem_encrypt=on kvm_amd.sev=1 iommu=nopt crashkernel=2G-4G:320M,4G-32G:512M,32G-64G:1024M,64G-128G:2048M,128G-:4096M", Early: true}}},
		{secs(0.000000), "SEV-SNP: RMP table physical range [0x0000000011500000 - 0x0000000051dfffff]", found{SNPPlatform: "rmp"}},
		{secs(0.012246), "SEV-SNP: Reserving start/end of RMP table on a 2MB boundary [0x0000000011400000]", found{}},
		{secs(0.269390), "Kernel command line: BOOT_IMAGE=/vmlinuz-6.15.0-sev-snp-amd64 root=/dev/mapper/ubuntu--vg-ubuntu--lv ro mem_encrypt=on kvm_amd.sev=1 iommu=nopt crashkernel=2G-4G:320M,4G-32G:512M,32G-64G:1024M,64G-128G:2048M,128G-:4096M", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/vmlinuz-6.15.0-sev-snp-amd64 root=/dev/mapper/ubuntu--vg-ubuntu--lv ro mem_encrypt=on kvm_amd.sev=1 iommu=nopt crashkernel=2G-4G:320M,4G-32G:512M,32G-64G:1024M,64G-128G:2048M,128G-:4096M", Unknown: []string(nil)}}},
		{secs(0.269467), "Unknown kernel command line parameters \"BOOT_IMAGE=/vmlinuz-6.15.0-sev-snp-amd64 mem_encrypt=on\", will be passed to user space.", found{Boot: &BootLine{Cmdline: "", Unknown: []string{"BOOT_IMAGE=/vmlinuz-6.15.0-sev-snp-amd64", "mem_encrypt=on"}}}},
		{secs(1.363388), "usb usb1: Manufacturer: Linux 6.15.0-sev-snp-amd64 ehci_hcd", found{}},
	},
	"amdsev-82.log": {
		{secs(0.000000), "Linux version 5.14.0-rc2-snp-host-20d8ab8889d7 (xlab@xlab-SEV-SNP-01) (gcc (Ubuntu 9.3.0-17ubuntu1~20.04) 9.3.0, GNU ld (GNU Binutils for Ubuntu) 2.34) #1 SMP Wed Feb 16 19:00:08 PST 2022", found{}},
		{secs(1.956093), "SEV-SNP: RMP table physical address 0x0000000035600000 - 0x0000000075bfffff", found{SNPPlatform: "rmp"}},
		{secs(7.028767), "systemd[1]: Set hostname to <xlab-SEV-SNP-01>.", found{}},
		{secs(8.810309), "ccp 0000:23: 00.1: enabling device (0000 -> 0002)", found{}},
		{secs(8.810901), "ccp 0000:23:00.1: no command queues available", found{}},
		{secs(8.811252), "ccp 0000:23:00.1:  sev enabled", found{}},
		{secs(8.811254), "ccp 0000: 23:00.1: psp enabled", found{}},
		{secs(8.811745), "ccp 0000:a2:00.1: enabling device (0000 -> 0002)", found{}},
		{secs(8.812821), "ccp 0000:a2:00.1:  no command queues available", found{}},
		{secs(8.839087), "ccp 0000:23:00.1: SEV firmware update successful", found{}},
		{secs(8.895333), "ccp 0000:23:00.1: SEV-SNP:  failed to INIT error 0x13", found{SNPPlatform: "init-failed"}},
		{secs(8.930101), "ccp 0000: 23:00.1: SEV: failed to INIT error 0x13", found{}},
		{secs(8.930106), "ccp 0000:23:00.1: SEV API:1.51 build: 3", found{}},
		{secs(10.107580), "SEV supported: 410 ASIDs", found{SEV: &SEVState{Feature: "SEV", State: "enabled"}}},
		{secs(10.107582), "SEV-ES and SEV-SNP supported: 99 ASIDs", found{SEV: &SEVState{Feature: "SEV-SNP", State: "enabled"}}},
	},
	"apu2-documentation-240.log": {
		{secs(13.134460), "AMD-Vi: Event logged [", found{}},
		{secs(13.137925), "INVALID_DEVICE_REQUEST device=00:00.1 address=0x000000fdf8000020 flags=0x0a00]", found{}},
		{secs(11.773399), "AMD-Vi: Event logged [", found{}},
		{secs(11.776863), "INVALID_DEVICE_REQUEST device=00:00.1 address=0x000000fdf8000020 flags=0x0a00]", found{}},
		{secs(221.562629), "AMD-Vi: Event logged [", found{}},
		{secs(221.565929), "IO_PAGE_FAULT device=05:00.0 domain=0x0012 address=0x00000000ff6101b0 flags=0x0070]", found{}},
		{secs(221.565938), "AMD-Vi: Event logged [", found{}},
		{secs(221.569235), "IO_PAGE_FAULT device=05:00.0 domain=0x0012 address=0x00000000ff6101c0 flags=0x0070]", found{}},
		{secs(221.569244), "AMD-Vi: Event logged [", found{}},
		{secs(221.572523), "IO_PAGE_FAULT device=05:00.0 domain=0x0012 address=0x00000000ff610200 flags=0x0070]", found{}},
		{secs(221.572531), "AMD-Vi: Event logged [", found{}},
		{secs(221.575783), "IO_PAGE_FAULT device=05:00.0 domain=0x0012 address=0x00000000ff610240 flags=0x0070]", found{}},
		{secs(221.575791), "AMD-Vi: Event logged [", found{}},
		{secs(221.579072), "IO_PAGE_FAULT device=05:00.0 domain=0x0012 address=0x00000000ff610280 flags=0x0070]", found{}},
	},
	"bumblebee-111.log": {
		{secs(87.938040), "nvidia 0000:01:00.0: power state changed by ACPI to D0", found{}},
		{secs(87.938044), "nvidia 0000:01:00.0: power state changed by ACPI to D0", found{}},
		{secs(87.938048), "nvidia 0000:01:00.0: enabling device (0000 -> 0003)", found{}},
		{secs(87.938056), "nvidia 0000:01:00.0: PCI INT A -> GSI 16 (level, low) -> IRQ 16", found{}},
		{secs(87.938063), "nvidia 0000:01:00.0: setting latency timer to 64", found{}},
		{secs(87.938068), "vgaarb: device changed decodes: PCI:0000:01:00.0,olddecodes=none,decodes=none:owns=none", found{}},
		{secs(87.938175), "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  280.13  Wed Jul 27 16:53:56 PDT 2011", found{Loading: "280.13"}},
		{secs(98.991758), "NVRM: failed to copy vbios to system memory.", found{}},
		{secs(98.992885), "NVRM: RmInitAdapter failed! (0x30:0xffffffff:859)", found{InitFailed: &InitFailure{Device: "", Stage: 0x30, Status: 0xffffffff}}},
		{secs(98.992895), "NVRM: rm_init_adapter(0) failed", found{}},
	},
	"bumblebee-134.log": {
		{secs(984.725934), "bbswitch: enabling discrete graphics", found{}},
		{secs(984.726319), "bbswitch: Result of _DSM call for ON: 00000000", found{}},
		{secs(984.726327), "pci 0000:01:00.0: power state changed by ACPI to D0", found{}},
		{secs(984.736600), "pci 0000:01:00.0: Refused to change power state, currently in D3", found{Power: "0000:01:00.0 D3"}},
		{secs(984.736605), "pci 0000:01:00.0: power state changed by ACPI to D0", found{}},
	},
	"gpu-operator-649.log": {
		{secs(1097.650222), "NVRM: GPU 0000:04:01.0: RmInitAdapter failed! (0x11:0x45:2525)", found{InitFailed: &InitFailure{Device: "0000:04:01.0", Stage: 0x11, Status: 0x45}}},
		{secs(1097.650377), "NVRM: GPU 0000:04:01.0: rm_init_adapter failed, device minor number 0", found{}},
		{secs(1102.469870), "NVRM: GPU 0000:04:02.0: RmInitAdapter failed! (0x11:0x45:2525)", found{InitFailed: &InitFailure{Device: "0000:04:02.0", Stage: 0x11, Status: 0x45}}},
		{secs(1102.470052), "NVRM: GPU 0000:04:02.0: rm_init_adapter failed, device minor number 1", found{}},
		{secs(1107.289575), "NVRM: GPU 0000:04:02.0: RmInitAdapter failed! (0x11:0x45:2525)", found{InitFailed: &InitFailure{Device: "0000:04:02.0", Stage: 0x11, Status: 0x45}}},
		{secs(1107.289726), "NVRM: GPU 0000:04:02.0: rm_init_adapter failed, device minor number 1", found{}},
		{secs(1112.163623), "NVRM: GPU 0000:04:01.0: RmInitAdapter failed! (0x11:0x45:2525)", found{InitFailed: &InitFailure{Device: "0000:04:01.0", Stage: 0x11, Status: 0x45}}},
		{secs(1112.163774), "NVRM: GPU 0000:04:01.0: rm_init_adapter failed, device minor number 0", found{}},
		{secs(1114.993489), "IPv6: ADDRCONF(NETDEV_UP): dddd1c3ccc54a5b: link is not ready", found{}},
		{secs(1114.993797), "IPv6: ADDRCONF(NETDEV_UP): eth0: link is not ready", found{}},
		{secs(1114.994809), "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready", found{}},
		{secs(1114.994848), "IPv6: ADDRCONF(NETDEV_CHANGE): dddd1c3ccc54a5b: link becomes ready", found{}},
		{secs(1115.021348), "device dddd1c3ccc54a5b entered promiscuous mode", found{}},
		{secs(1117.008104), "NVRM: GPU 0000:04:01.0: RmInitAdapter failed! (0x11:0x45:2525)", found{InitFailed: &InitFailure{Device: "0000:04:01.0", Stage: 0x11, Status: 0x45}}},
		{secs(1117.008302), "NVRM: GPU 0000:04:01.0: rm_init_adapter failed, device minor number 0", found{}},
		{secs(1119.112380), "device dddd1c3ccc54a5b left promiscuous mode", found{}},
		{secs(1121.850825), "NVRM: GPU 0000:04:02.0: RmInitAdapter failed! (0x11:0x45:2525)", found{InitFailed: &InitFailure{Device: "0000:04:02.0", Stage: 0x11, Status: 0x45}}},
	},
	"gpu-passthrough-tutorial-39.log": {
		{secs(26.485239), "nvidia 0000:01:00.0: not ready 8191ms after resume; waiting", found{NotReady: &NotReady{Device: "0000:01:00.0", After: "resume", GaveUp: false}}},
		{secs(34.933241), "nvidia 0000:01:00.0: not ready 16383ms after resume; waiting", found{NotReady: &NotReady{Device: "0000:01:00.0", After: "resume", GaveUp: false}}},
		{secs(52.597123), "nvidia 0000:01:00.0: not ready 32767ms after resume; waiting", found{NotReady: &NotReady{Device: "0000:01:00.0", After: "resume", GaveUp: false}}},
		{secs(87.412701), "nvidia 0000:01:00.0: not ready 65535ms after resume; giving up", found{NotReady: &NotReady{Device: "0000:01:00.0", After: "resume", GaveUp: true}}},
		{secs(87.412759), "nvidia 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible", found{Power: "0000:01:00.0 D3cold"}},
		{secs(87.473074), "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:667)", found{InitFailed: &InitFailure{Device: "0000:01:00.0", Stage: 0x22, Status: 0x56}}},
		{secs(87.473112), "NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0", found{}},
		{secs(87.473413), "nvidia 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible", found{Power: "0000:01:00.0 D3cold"}},
		{secs(87.473638), "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:667)", found{InitFailed: &InitFailure{Device: "0000:01:00.0", Stage: 0x22, Status: 0x56}}},
		{secs(87.473669), "NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0", found{}},
		{secs(87.473846), "nvidia 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible", found{Power: "0000:01:00.0 D3cold"}},
		{secs(87.473949), "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:667)", found{InitFailed: &InitFailure{Device: "0000:01:00.0", Stage: 0x22, Status: 0x56}}},
		{secs(87.473980), "NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0", found{}},
		{secs(87.474025), "nvidia 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible", found{Power: "0000:01:00.0 D3cold"}},
	},
	"i915-sriov-dkms-106.log": {
		{secs(0.000000), "Command line: BOOT_IMAGE=/boot/vmlinuz-6.2.16-10-pve root=/dev/mapper/pve-root ro quiet consoleblank=60 intel_iommu=on iommu=pt i915.enable_guc=3 i915.max_vfs=7 pci=realloc,assign-busses", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.2.16-10-pve root=/dev/mapper/pve-root ro quiet consoleblank=60 intel_iommu=on iommu=pt i915.enable_guc=3 i915.max_vfs=7 pci=realloc,assign-busses", Early: true}}},
		{secs(0.060909), "Kernel command line: BOOT_IMAGE=/boot/vmlinuz-6.2.16-10-pve root=/dev/mapper/pve-root ro quiet consoleblank=60 intel_iommu=on iommu=pt i915.enable_guc=3 i915.max_vfs=7 pci=realloc,assign-busses", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.2.16-10-pve root=/dev/mapper/pve-root ro quiet consoleblank=60 intel_iommu=on iommu=pt i915.enable_guc=3 i915.max_vfs=7 pci=realloc,assign-busses", Unknown: []string(nil)}}},
		{secs(10.393964), "i915: module verification failed: signature and/or required key missing - tainting kernel", found{}},
		{secs(10.641252), "i915 0000:00:02.0: Running in SR-IOV PF mode", found{}},
		{secs(10.641781), "i915 0000:00:02.0: [drm] VT-d active for gfx access", found{}},
		{secs(10.641884), "i915 0000:00:02.0: vgaarb: deactivate vga console", found{}},
		{secs(10.641929), "i915 0000:00:02.0: [drm] Using Transparent Hugepages", found{}},
		{secs(10.643213), "i915 0000:00:02.0: vgaarb: changed VGA decodes: olddecodes=io+mem,decodes=io+mem:owns=io+mem", found{}},
		{secs(10.644234), "mei_hdcp 0000:00:16.0-b638ab7e-94e2-4ea2-a552-d1c54b627f04: bound 0000:00:02.0 (ops i915_hdcp_component_ops [i915])", found{}},
		{secs(10.644396), "i915 0000:00:02.0: [drm] Finished loading DMC firmware i915/tgl_dmc_ver2_12.bin (v2.12)", found{}},
	},
	"i915ovmfpkg-22.log": {
		{secs(0.000000), "Linux version 5.2.21 (root@i5-8400) (gcc version 7.5.0 (Ubuntu 7.5.0-3ubuntu1~18.04)) #1 SMP Fri Mar 12 16:39:27 CST 2021", found{}},
		{secs(0.000000), "Command line: BOOT_IMAGE=/boot/vmlinuz-5.2.21 root=UUID=d467903d-dfdb-4fef-b606-d671f1f729c9 ro quiet splash kvm.ignore_msrs=1 intel_iommu=on iommu=pt video=efifb:off,vesafb:off pcie_acs_override=downstream vt.handoff=1", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-5.2.21 root=UUID=d467903d-dfdb-4fef-b606-d671f1f729c9 ro quiet splash kvm.ignore_msrs=1 intel_iommu=on iommu=pt video=efifb:off,vesafb:off pcie_acs_override=downstream vt.handoff=1", Early: true}}},
		{secs(0.000000), "KERNEL supported cpus:", found{}},
		{secs(0.000000), "  Intel GenuineIntel", found{}},
		{secs(0.000000), "  AMD AuthenticAMD", found{}},
		{secs(0.000000), "  Hygon HygonGenuine", found{}},
		{secs(0.000000), "  Centaur CentaurHauls", found{}},
	},
	"intel-gpu-i915-backports-165.log": {
		{secs(0.000000), "Command line: BOOT_IMAGE=/boot/vmlinuz-6.5.13-3-pve root=/dev/mapper/pve-root ro quiet intel_iommu=on iommu=pt i915.enable_guc=3 i915.max_vfs=7", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.5.13-3-pve root=/dev/mapper/pve-root ro quiet intel_iommu=on iommu=pt i915.enable_guc=3 i915.max_vfs=7", Early: true}}},
		{secs(0.079561), "Kernel command line: BOOT_IMAGE=/boot/vmlinuz-6.5.13-3-pve root=/dev/mapper/pve-root ro quiet intel_iommu=on iommu=pt i915.enable_guc=3 i915.max_vfs=7", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.5.13-3-pve root=/dev/mapper/pve-root ro quiet intel_iommu=on iommu=pt i915.enable_guc=3 i915.max_vfs=7", Unknown: []string(nil)}}},
		{secs(6.769348), "i915 0000:00:02.0: Running in SR-IOV PF mode", found{}},
		{secs(6.769388), "i915 0000:00:02.0: [drm] GT count: 1, enabled: 1", found{}},
		{secs(6.769659), "i915 0000:00:02.0: [drm] VT-d active for gfx access", found{}},
		{secs(6.769765), "i915 0000:00:02.0: vgaarb: deactivate vga console", found{}},
		{secs(6.769781), "i915 0000:00:02.0: [drm] Using Transparent Hugepages", found{}},
	},
	"kata-containers-10622.log": {
		{secs(0.000000), "Command line: BOOT_IMAGE=/vmlinuz-6.5.0-45-generic root=/dev/mapper/ubuntu--vg-ubuntu--lv ro quiet splash intel_iommu=on iommu=pt video=vesafb:off video=efifb:off vfio_pci.ids=10de:1c82,10de:0fb9 vt.handoff=7", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/vmlinuz-6.5.0-45-generic root=/dev/mapper/ubuntu--vg-ubuntu--lv ro quiet splash intel_iommu=on iommu=pt video=vesafb:off video=efifb:off vfio_pci.ids=10de:1c82,10de:0fb9 vt.handoff=7", Early: true}}},
		{secs(0.067043), "Kernel command line: BOOT_IMAGE=/vmlinuz-6.5.0-45-generic root=/dev/mapper/ubuntu--vg-ubuntu--lv ro quiet splash intel_iommu=on iommu=pt video=vesafb:off video=efifb:off vfio_pci.ids=10de:1c82,10de:0fb9 vt.handoff=7", found{Boot: &BootLine{Cmdline: "BOOT_IMAGE=/vmlinuz-6.5.0-45-generic root=/dev/mapper/ubuntu--vg-ubuntu--lv ro quiet splash intel_iommu=on iommu=pt video=vesafb:off video=efifb:off vfio_pci.ids=10de:1c82,10de:0fb9 vt.handoff=7", Unknown: []string(nil)}}},
		{secs(0.067112), "DMAR: IOMMU enabled", found{}},
		{secs(0.178341), "DMAR-IR: IOAPIC id 2 under DRHD base  0xfed91000 IOMMU 0", found{}},
		{secs(0.438294), "iommu: Default domain type: Passthrough (set via kernel command line)", found{Domain: &domainResult{Type: "Passthrough", Cmdline: true}}},
		{secs(0.551524), "pci 0000:00:00.0: Adding to iommu group 0", found{}},
		{secs(0.551536), "pci 0000:00:01.0: Adding to iommu group 1", found{}},
		{secs(0.551547), "pci 0000:00:12.0: Adding to iommu group 2", found{}},
		{secs(0.551562), "pci 0000:00:14.0: Adding to iommu group 3", found{}},
		{secs(0.551569), "pci 0000:00:14.2: Adding to iommu group 3", found{}},
	},
	"kata-containers-11708.log": {
		{secs(586739.359281), "vfio-pci 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible", found{Power: "0000:01:00.0 D3cold"}},
		{secs(586739.360271), "vfio-pci 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible", found{Power: "0000:01:00.0 D3cold"}},
		{secs(586739.361003), "vfio-pci 0000:01:00.0: resetting", found{}},
		{secs(586739.361008), "vfio-pci 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible", found{Power: "0000:01:00.0 D3cold"}},
		{secs(586740.080470), "vfio-pci 0000:01:00.0: timed out waiting for pending transaction; performing function level reset anyway", found{}},
		{secs(586740.186482), "vfio-pci 0000:01:00.0: reset done", found{}},
	},
	"nvidia-exec-45.log": {
		{-1, "pci 0000:01:00.1: not ready 1023ms after resume; waiting", found{NotReady: &NotReady{Device: "0000:01:00.1", After: "resume", GaveUp: false}}},
		{-1, "pci 0000:01:00.1: not ready 2047ms after resume; waiting", found{NotReady: &NotReady{Device: "0000:01:00.1", After: "resume", GaveUp: false}}},
		{-1, "pci 0000:01:00.1: not ready 4095ms after resume; waiting", found{NotReady: &NotReady{Device: "0000:01:00.1", After: "resume", GaveUp: false}}},
		{-1, "pci 0000:01:00.1: not ready 8191ms after resume; waiting", found{NotReady: &NotReady{Device: "0000:01:00.1", After: "resume", GaveUp: false}}},
		{-1, "pci 0000:01:00.1: not ready 16383ms after resume; waiting", found{NotReady: &NotReady{Device: "0000:01:00.1", After: "resume", GaveUp: false}}},
		{-1, "pci 0000:01:00.1: not ready 32767ms after resume; waiting", found{NotReady: &NotReady{Device: "0000:01:00.1", After: "resume", GaveUp: false}}},
		{-1, "pci 0000:01:00.1: not ready 65535ms after resume; giving up", found{NotReady: &NotReady{Device: "0000:01:00.1", After: "resume", GaveUp: true}}},
		{-1, "pci 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible", found{Power: "0000:01:00.0 D3cold"}},
	},
	"open-gpu-kernel-modules-789.log": {
		{secs(903.609564), "NVRM: RmInitAdapter: Cannot initialize GSP firmware RM", found{}},
		{secs(903.610907), "NVRM: GPU 0000:98:00.0: RmInitAdapter failed! (0x62:0x65:1792)", found{InitFailed: &InitFailure{Device: "0000:98:00.0", Stage: 0x62, Status: 0x65}}},
		{secs(903.611884), "NVRM: GPU 0000:98:00.0: rm_init_adapter failed, device minor number 0", found{}},
		{secs(2052.745833), "NVRM: gpuWaitForGfwBootComplete_TU102: failed to wait for GFW_BOOT: (progress 0x3)", found{}},
		{secs(2052.745838), "NVRM: kgspWaitForGfwBootOk_TU102: failed to wait for GFW boot complete: 0x65 VBIOS version 94.02.59.00.05", found{}},
	},
	"single-gpu-passthrough-103.log": {
		{-1, "qemu-system-x86_64: vfio: Cannot reset device 0000:03:00.0, depends on group 14 which is not owned.", found{VFIO: &VFIOError{Device: "0000:03:00.0", Kind: "reset", Group: 14, BAR: ""}}},
	},
	"talos-14356.log": {
		{-1, "vfio-pci 0000:c3:00.0: BAR 0: can't reserve [mem 0x2800000000-0x2fffffffff 64bit pref]", found{VFIO: &VFIOError{Device: "0000:c3:00.0", Kind: "bar", Group: -1, BAR: "BAR 0", Start: 0x2800000000, End: 0x2fffffffff}}},
	},
	"ultimate-macos-kvm-145.log": {
		{-1, "qemu-system-x86_64: vfio: Cannot reset device 0000:04:00.0, depends on group 37 which is not owned.", found{VFIO: &VFIOError{Device: "0000:04:00.0", Kind: "reset", Group: 37, BAR: ""}}},
		{-1, "qemu-system-x86_64: vfio: Cannot reset device 0000:04:00.0, depends on group 37 which is not owned.", found{VFIO: &VFIOError{Device: "0000:04:00.0", Kind: "reset", Group: 37, BAR: ""}}},
	},
	"vga-passthrough-15.log": {
		{-1, "qemu-system-x86_64: -device vfio-pci,host=01:00.0,multifunction=on: vfio error: 0000:01:00.0: group 1 is not viable", found{VFIO: &VFIOError{Device: "0000:01:00.0", Kind: "group", Group: 1, BAR: ""}}},
		{-1, "Please ensure all devices within the iommu_group are bound to their vfio bus driver.", found{}},
	},
	"akash-network-support-244.log": {
		{-1, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024", found{Loading: "535.183.01"}},
		{-1, "NVRM: GPU at PCI:0000:00:05: GPU-efbdfde9-5798-a6e7-4c46-12518fa15375", found{}},
		{-1, "NVRM: GPU Board Serial Number: 1650423013443", found{}},
		{-1, "NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, Ch 00000008", found{Xid: &Xid{Device: "0000:00:05.0", Code: 43, Text: "Ch 00000008"}}},
		{-1, "NVRM: Xid (PCI:0000:00:05): 43, pid=1084984, name=pt_main_thread, Ch 00000008", found{Xid: &Xid{Device: "0000:00:05.0", Code: 43, Text: "Ch 00000008"}}},
		{-1, "NVRM: GPU at PCI:0000:00:07: GPU-3b6ec030-5adc-1847-e155-79f635584b4e", found{}},
		{-1, "NVRM: GPU Board Serial Number: 1652923017935", found{}},
		{-1, "NVRM: Xid (PCI:0000:00:07): 31, pid=2512125, name=python3.10, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @ 0x73ac_1c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE", found{Xid: &Xid{Device: "0000:00:07.0", Code: 31, Text: "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @ 0x73ac_1c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE"}}},
		{-1, "NVRM: GPU at PCI:0000:00:08: GPU-c24840ec-8de1-83d5-b126-08000173ae32", found{}},
		{-1, "NVRM: GPU Board Serial Number: 1652923018111", found{}},
		{-1, "NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No", found{Xid: &Xid{Device: "0000:00:08.0", Code: 94, Text: "Contained: SM (0x1). RST: No, D-RST: No"}}},
	},
	"clearlinux-distribution-392.log": {
		{secs(481.531653), " nvme0n1: p1 p2 p3", found{}},
		{secs(486.617672), "nvme 0000:41:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0000 address=0xf7936000 flags=0x0000]", found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:41:00.0", Driver: "nvme", Address: 0xf7936000, Reason: "flags=0x0000"}}},
		{secs(486.922742), "nvme 0000:41:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0000 address=0xf7931000 flags=0x0000]", found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:41:00.0", Driver: "nvme", Address: 0xf7931000, Reason: "flags=0x0000"}}},
	},
	"gpu-burn-1.log": {
		{secs(74785.660366), "pcieport 0000:00:02.0: AER: Corrected error received: id=0010", found{}},
		{secs(74785.660380), "pcieport 0000:00:02.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, id=0010(Transmitter ID)", found{AER: &AER{Driver: "pcieport", Device: "0000:00:02.0", Severity: "corrected", Bit: "", NoRecovery: false}}},
		{secs(74785.660496), "pcieport 0000:00:02.0:   device [8086:6f04] error status/mask=00001000/00002000", found{}},
		{secs(74785.660559), "pcieport 0000:00:02.0:    [12] Replay Timer Timeout  ", found{AER: &AER{Driver: "pcieport", Device: "0000:00:02.0", Severity: "", Bit: "Replay Timer Timeout", NoRecovery: false}}},
		{secs(74889.542031), "pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010", found{}},
		{secs(74889.542044), "pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, id=0010(Receiver ID)", found{AER: &AER{Driver: "pcieport", Device: "0000:00:02.0", Severity: "fatal", Bit: "", NoRecovery: false}}},
		{secs(74889.542125), "pcieport 0000:00:02.0:   device [8086:6f04] error status/mask=00000020/00000000", found{}},
		{secs(74889.542184), "pcieport 0000:00:02.0:    [ 5] Surprise Down Error    (First)", found{AER: &AER{Driver: "pcieport", Device: "0000:00:02.0", Severity: "", Bit: "Surprise Down Error", NoRecovery: false}}},
		{secs(74889.542234), "pcieport 0000:00:02.0: broadcast error_detected message", found{}},
		{secs(74889.542239), "nvidia 0000:02:00.0: device has no AER-aware driver", found{AER: &AER{Driver: "nvidia", Device: "0000:02:00.0", Severity: "", Bit: "", NoRecovery: true}}},
		{secs(74889.644112), "NVRM: GPU at PCI:0000:02:00: GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df", found{}},
		{secs(74889.644132), "NVRM: GPU Board Serial Number: 0322716036227", found{}},
		{secs(74889.644138), "NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.", found{Xid: &Xid{Device: "0000:02:00.0", Code: 79, Text: "GPU has fallen off the bus."}}},
	},
	"gpu-operator-1146.log": {
		{secs(199.234935), "NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5", found{}},
		{secs(218.250408), "NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)", found{InitFailed: &InitFailure{Device: "0000:0a:00.0", Stage: 0x24, Status: 0x72}}},
		{secs(218.250668), "NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5", found{}},
		{secs(219.470994), "NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1.", found{Xid: &Xid{Device: "0000:07:00.0", Code: 48, Text: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1."}}},
		{secs(219.471050), "NVRM: Xid (PCI:0000:07:00): 64, pid='<unknown>', name=<unknown>, Dynamic Page Retirement: Blacklisting failed.  Page should have been blacklisted on boot(0x00000000007fffa8).", found{Xid: &Xid{Device: "0000:07:00.0", Code: 64, Text: "Dynamic Page Retirement: Blacklisting failed.  Page should have been blacklisted on boot(0x00000000007fffa8)."}}},
		{secs(221.044131), "NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)", found{InitFailed: &InitFailure{Device: "0000:0a:00.0", Stage: 0x24, Status: 0x72}}},
		{secs(221.044449), "NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5", found{}},
		{secs(221.258545), "NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)", found{InitFailed: &InitFailure{Device: "0000:0a:00.0", Stage: 0x24, Status: 0x72}}},
		{secs(221.258893), "NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5", found{}},
	},
	"nvidia-forum-364958.log": {
		{-1, "NVRM: Xid (PCI:0000:01:00): 120, GSP kernel exception: store access page fault (cause:0xf) @ pc:0xffffffff93003d42, partition:4#0", found{Xid: &Xid{Device: "0000:01:00.0", Code: 120, Text: "GSP kernel exception: store access page fault (cause:0xf) @ pc:0xffffffff93003d42, partition:4#0"}}},
		{-1, "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", found{Xid: &Xid{Device: "0000:01:00.0", Code: 154, Text: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"}}},
		{-1, "NVRM: Xid (PCI:0000:01:00): 62, 223b6a66 00002100 00000000 20662342 20662ba6 20664272 2065f7ca 2063f48c", found{Xid: &Xid{Device: "0000:01:00.0", Code: 62, Text: "223b6a66 00002100 00000000 20662342 20662ba6 20664272 2065f7ca 2063f48c"}}},
		{-1, "NVRM: GPU0 _kgspRpcGspEventPmuHalted: Received signal from GSP that PMU has halted.", found{}},
		{-1, "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", found{Xid: &Xid{Device: "0000:01:00.0", Code: 154, Text: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"}}},
		{-1, "NVRM: Xid (PCI:0000:01:00): 45, pid=12542, name=VLLM::Worker, channel 0x00000002", found{Xid: &Xid{Device: "0000:01:00.0", Code: 45, Text: "channel 0x00000002"}}},
	},
	"nvidia-forum-371272.log": {
		{-1, "NVRM: Xid (PCI:0000:01:00): 62, 323f0f30 0000c3d8 00000000 206dae68 206da022 206da190 206d85f6 206d8d86", found{Xid: &Xid{Device: "0000:01:00.0", Code: 62, Text: "323f0f30 0000c3d8 00000000 206dae68 206da022 206da190 206d85f6 206d8d86"}}},
		{-1, "NVRM: GPU0 _kgspRpcGspEventPmuHalted: Received signal from GSP that PMU has halted.", found{}},
		{-1, "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", found{Xid: &Xid{Device: "0000:01:00.0", Code: 154, Text: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"}}},
	},
	"nvsentinel-155.log": {
		{secs(1843.308145), "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has\nNVRM: fallen off the bus and is not responding to commands.", found{FallenOff: "0000:b3:00.0"}},
		{secs(1843.439662), "NVRM: The NVIDIA probe routine failed for 1 device(s).", found{ProbeRoutine: 1}},
		{secs(1843.439669), "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  (dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025", found{Loading: "570.158.01"}},
	},
	"open-gpu-kernel-modules-1150.log": {
		{-1, "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149", found{Xid: &Xid{Device: "0000:dc:00.0", Code: 45, Text: "Ch 00000001 caused by previous Xid 149"}}},
		{-1, "NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, Ch 0000000c caused by previous Xid 145", found{Xid: &Xid{Device: "0000:ed:00.0", Code: 45, Text: "Ch 0000000c caused by previous Xid 145"}}},
		{-1, "NVRM: Xid (PCI:0000:ba:00): 45, pid=1818989, name=python3, Ch 00000002 caused by previous Xid 145", found{Xid: &Xid{Device: "0000:ba:00.0", Code: 45, Text: "Ch 00000002 caused by previous Xid 145"}}},
		{-1, "NVRM: Xid (PCI:0000:97:00): 45, pid=1818987, name=python3, Ch 00000003 caused by previous Xid 145", found{Xid: &Xid{Device: "0000:97:00.0", Code: 45, Text: "Ch 00000003 caused by previous Xid 145"}}},
		{-1, "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000002 caused by previous Xid 149", found{Xid: &Xid{Device: "0000:dc:00.0", Code: 45, Text: "Ch 00000002 caused by previous Xid 149"}}},
		{-1, "NVRM: Xid (PCI:0000:ba:00): 45, pid=1818989, name=python3, Ch 00000003 caused by previous Xid 145", found{Xid: &Xid{Device: "0000:ba:00.0", Code: 45, Text: "Ch 00000003 caused by previous Xid 145"}}},
		{-1, "NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, Ch 00000001 caused by previous Xid 145", found{Xid: &Xid{Device: "0000:ed:00.0", Code: 45, Text: "Ch 00000001 caused by previous Xid 145"}}},
	},
	"open-gpu-kernel-modules-1200.log": {
		{-1, "NVRM: _kgspRpcRecvPoll: GSP RM heartbeat timed out", found{}},
		{-1, "NVRM: _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 3175895033 heartbeat 19834604 heartbeatWithOffsetMs 3175815351 diff 79682 timeout 5200", found{}},
		{-1, "NVRM: _kgspRpcRecvPoll: LibOS heartbeat timed out", found{}},
		{-1, "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", found{Xid: &Xid{Device: "0000:01:00.0", Code: 154, Text: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"}}},
	},
	"open-gpu-kernel-modules-446.log": {
		{-1, "NVRM: kflcnCoreDumpNondestructive_IMPL: PRI: riscvPc               : 00000000", found{}},
		{-1, "NVRM: nvAssertFailedNoLog: Assertion failed: Back to back GSP RPC timeout detected! GPU marked for reset @ kernel_gsp.c:2387", found{}},
		{-1, "NVRM: kflcnCoreDumpDestructive_IMPL: ICD: Core is booted.", found{}},
		{-1, "NVRM: kflcnCoreDumpDestructive_IMPL: ICD: RSTAT3 0x0000000000000000", found{}},
		{-1, "NVRM: kflcnCoreDumpDestructive_IMPL: ICD: RSTAT4 0x0000000000000000", found{}},
		{-1, "NVRM: kflcnCoreDumpDestructive_IMPL: ICD: [ERROR] ICD Halt command failed.", found{}},
		{-1, "NVRM: _issueRpcAndWait: rpcRecvPoll timedout for fn 76 sequence 4129!", found{}},
		{-1, "NVRM: Xid (PCI:0000:0b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", found{Xid: &Xid{Device: "0000:0b:00.0", Code: 154, Text: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"}}},
	},
	"pop-3363-aer.log": {
		{secs(68183.615790), "pcieport 0000:00:03.1: AER: Correctable error message received from 0000:00:00.0", found{}},
		{secs(68183.615810), "pcieport 0000:00:03.1: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.1", Severity: "corrected", Bit: "", NoRecovery: false}}},
		{secs(68183.615818), "pcieport 0000:00:03.1:   device [1022:1453] error status/mask=00001000/00006000", found{}},
		{secs(68183.615826), "pcieport 0000:00:03.1:    [12] Timeout               ", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.1", Severity: "", Bit: "Timeout", NoRecovery: false}}},
		{secs(68183.637883), "pcieport 0000:00:03.1: AER: Correctable error message received from 0000:00:00.0", found{}},
		{secs(68183.637897), "pcieport 0000:00:03.1: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Receiver ID)", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.1", Severity: "corrected", Bit: "", NoRecovery: false}}},
		{secs(68183.637902), "pcieport 0000:00:03.1:   device [1022:1453] error status/mask=00000040/00006000", found{}},
		{secs(68183.637907), "pcieport 0000:00:03.1:    [ 6] BadTLP                ", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.1", Severity: "", Bit: "BadTLP", NoRecovery: false}}},
	},
	"pop-3363.log": {
		{-1, "NVRM: GPU at PCI:0000:01:00: GPU-456ad6c8-6097-2bca-fa9d-6b8f7faff040", found{}},
		{-1, "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", found{Xid: &Xid{Device: "0000:01:00.0", Code: 79, Text: "GPU has fallen off the bus."}}},
		{-1, "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.", found{FallenOff: "0000:01:00.0"}},
		{-1, "NVRM: GPU0 GSP RPC buffer contains function 78 (DUMP_PROTOBUF_COMPONENT) and data 0x0000000000000000 0x0000000000000000.", found{}},
	},
	"pop-853.log": {
		{secs(10.670900), "usblp 3-3:1.1: usblp0: USB Bidirectional printer dev 2 if 1 alt 0 proto 2 vid 0x04B8 pid 0x08D1", found{}},
		{secs(10.919601), "amd_iommu_report_page_fault: 96 callbacks suppressed", found{Suppressed: 96}},
		{secs(10.919607), "nvme 0000:01:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0000 address=0xfc189000 flags=0x0000]", found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:01:00.0", Driver: "nvme", Address: 0xfc189000, Reason: "flags=0x0000"}}},
		{secs(10.920579), "nvme 0000:01:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0000 address=0xfbeaf000 flags=0x0000]", found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:01:00.0", Driver: "nvme", Address: 0xfbeaf000, Reason: "flags=0x0000"}}},
		{secs(12.131977), "nvme 0000:01:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0000 address=0xffed5000 flags=0x0000]", found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:01:00.0", Driver: "nvme", Address: 0xffed5000, Reason: "flags=0x0000"}}},
		{secs(12.135652), "nvme 0000:01:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0000 address=0xfc344000 flags=0x0000]", found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:01:00.0", Driver: "nvme", Address: 0xfc344000, Reason: "flags=0x0000"}}},
		{secs(12.139874), "nvme 0000:01:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0000 address=0xfc345000 flags=0x0000]", found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:01:00.0", Driver: "nvme", Address: 0xfc345000, Reason: "flags=0x0000"}}},
		{secs(12.143540), "nvme 0000:01:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0000 address=0xfbfb7000 flags=0x0000]", found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:01:00.0", Driver: "nvme", Address: 0xfbfb7000, Reason: "flags=0x0000"}}},
	},
	"returnn-1500.log": {
		{-1, "nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)", found{AER: &AER{Driver: "nvidia", Device: "0000:03:00.0", Severity: "", Bit: "", NoRecovery: true}}},
		{-1, "snd_hda_intel 0000:03:00.1: AER: can't recover (no error_detected callback)", found{AER: &AER{Driver: "snd_hda_intel", Device: "0000:03:00.1", Severity: "", Bit: "", NoRecovery: true}}},
		{-1, "pcieport 0000:00:03.0: AER: device recovery failed", found{}},
		{-1, "pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: 0000:00:03.0", found{}},
		{-1, "pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.0", Severity: "fatal", Bit: "", NoRecovery: false}}},
		{-1, "pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00004020/00000000", found{}},
		{-1, "pcieport 0000:00:03.0:    [ 5] SDES                  ", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.0", Severity: "", Bit: "SDES", NoRecovery: false}}},
		{-1, "pcieport 0000:00:03.0:    [14] CmpltTO                (First)", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.0", Severity: "", Bit: "CmpltTO", NoRecovery: false}}},
		{-1, "nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)", found{AER: &AER{Driver: "nvidia", Device: "0000:03:00.0", Severity: "", Bit: "", NoRecovery: true}}},
		{-1, "snd_hda_intel 0000:03:00.1: AER: can't recover (no error_detected callback)", found{AER: &AER{Driver: "snd_hda_intel", Device: "0000:03:00.1", Severity: "", Bit: "", NoRecovery: true}}},
		{-1, "pcieport 0000:00:03.0: AER: Root Port link has been reset (0)", found{}},
		{-1, "pcieport 0000:00:03.0: AER: device recovery failed", found{}},
	},
	"spdk-2514.log": {
		{-1, "dmar_fault: 812287 callbacks suppressed", found{Suppressed: 812287}},
		{-1, "DMAR: DRHD: handling fault status reg 2", found{}},
		{-1, "DMAR: [DMA Write] Request device [99:00.0] fault addr 0 [fault reason 05] PTE Write access is not set", found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:99:00.0", Driver: "", Address: 0x0, Reason: "PTE Write access is not set"}}},
		{-1, "DMAR: DRHD: handling fault status reg 2", found{}},
		{-1, "DMAR: [DMA Write] Request device [99:00.0] fault addr 0 [fault reason 05] PTE Write access is not set", found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:99:00.0", Driver: "", Address: 0x0, Reason: "PTE Write access is not set"}}},
		{-1, "DMAR: DRHD: handling fault status reg 2", found{}},
		{-1, "DMAR: [DMA Write] Request device [99:00.0] fault addr 0 [fault reason 05] PTE Write access is not set", found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:99:00.0", Driver: "", Address: 0x0, Reason: "PTE Write access is not set"}}},
		{-1, "DMAR: DRHD: handling fault status reg 2", found{}},
	},
	"vllm-40652.log": {
		{-1, "NVRM: Xid (PCI:0000:48:00): 45, pid=22884, name=VLLM::Worker, channel 0x00000010 caused by previous Xid 45", found{Xid: &Xid{Device: "0000:48:00.0", Code: 45, Text: "channel 0x00000010 caused by previous Xid 45"}}},
		{-1, "NVRM: Xid (PCI:0000:48:00): 45, pid=22884, name=VLLM::Worker, channel 0x00000011 caused by previous Xid 45", found{Xid: &Xid{Device: "0000:48:00.0", Code: 45, Text: "channel 0x00000011 caused by previous Xid 45"}}},
		{-1, "NVRM: Xid (PCI:0000:48:00): 74, pid=22884, name=VLLM::Worker_TP, NVLink: fatal error detected on link 8(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)", found{Xid: &Xid{Device: "0000:48:00.0", Code: 74, Text: "NVLink: fatal error detected on link 8(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"}}},
		{-1, "NVRM: Xid (PCI:0000:48:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", found{Xid: &Xid{Device: "0000:48:00.0", Code: 154, Text: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"}}},
		{-1, "NVRM: _kgspLogXid119: ********************************* GSP Timeout **********************************", found{}},
		{-1, "NVRM: _kgspLogXid119: Note: Please also check logs above.", found{}},
		{-1, "NVRM: GPU at PCI:0000:0b:00: GPU-ff3dfd6d-7042-cc8c-f3a6-84d9d6eb3a4b", found{}},
		{-1, "NVRM: GPU Board Serial Number: 1563521019267", found{}},
		{-1, "NVRM: kflcnCoreDumpNondestructive_IMPL: TRACE: 34 = 0x0000000004d9cacc", found{}},
		{-1, "NVRM: _kgspLogXid119: ********************************************************************************", found{}},
		{-1, "NVRM: _issueRpcAndWait: rpcRecvPoll timedout for fn 76 sequence 4127!", found{}},
		{-1, "NVRM: Xid (PCI:0000:0b:00): 119, pid=11431, name=gpu-feature-dis, Timeout after 45s of waiting for RPC response from GPU3 GSP! Expected function 76 (GSP_RM_CONTROL) sequence 4128 (0x20803039 0xb0).", found{Xid: &Xid{Device: "0000:0b:00.0", Code: 119, Text: "Timeout after 45s of waiting for RPC response from GPU3 GSP! Expected function 76 (GSP_RM_CONTROL) sequence 4128 (0x20803039 0xb0)."}}},
	},
	"i915ovmfpkg-23-flr.log": {
		{secs(498.270899), "vfio-pci 0000:00:02.0: not ready 1023ms after FLR; waiting", found{NotReady: &NotReady{Device: "0000:00:02.0", After: "FLR", GaveUp: false}}},
	},
	"returnn-1486.log": {
		{-1, "pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0", found{}},
		{-1, "pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.0", Severity: "corrected", Bit: "", NoRecovery: false}}},
		{-1, "pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00001000/00002000", found{}},
		{-1, "pcieport 0000:00:03.0:    [12] Timeout               ", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.0", Severity: "", Bit: "Timeout", NoRecovery: false}}},
		{-1, "pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0", found{}},
		{-1, "pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.0", Severity: "corrected", Bit: "", NoRecovery: false}}},
		{-1, "pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00001000/00002000", found{}},
		{-1, "pcieport 0000:00:03.0:    [12] Timeout               ", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.0", Severity: "", Bit: "Timeout", NoRecovery: false}}},
		{-1, "pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0", found{}},
		{-1, "pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.0", Severity: "corrected", Bit: "", NoRecovery: false}}},
		{-1, "pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00001000/00002000", found{}},
		{-1, "pcieport 0000:00:03.0:    [12] Timeout               ", found{AER: &AER{Driver: "pcieport", Device: "0000:00:03.0", Severity: "", Bit: "Timeout", NoRecovery: false}}},
		{-1, "pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0", found{}},
	},
	"pkvm-x86-boot-014.log": {
		{-1, "DMAR: IOMMU enabled", found{}},
		{-1, "DMAR: Scalable mode is disallowed", found{}},
		{-1, "DMAR: Host address width 48", found{}},
		{-1, "DMAR: DRHD base: 0x000000fed90000 flags: 0x0", found{}},
		{-1, "DMAR: dmar0: reg_base_addr fed90000 ver 1:0 cap d2008c222f0686 ecap f00f5e", found{}},
		{-1, "DMAR: ATSR flags: 0x1", found{}},
		{-1, "DMAR: No RMRR found", found{}},
		{-1, "DMAR: No SATC found", found{}},
		{-1, "DMAR: dmar0: Using Queued invalidation", found{}},
		{-1, "DMAR: pkvm-debug: iommu0 set_root_entry: pkvm_enabled=1 enable_pkvm=1 tsc_khz=2800000 timeout_cycles=28000000000", found{}},
		{-1, "DMAR: IOMMU batching disallowed due to virtualization", found{}},
		{-1, "DMAR: Intel(R) Virtualization Technology for Directed I/O", found{}},
		{-1, "vfio-pci 0000:01:00.0: Relaying device request to user (#0)", found{}},
		{-1, "nvme nvme0: pci function 0000:01:00.0", found{}},
		{-1, "DMAR: DRHD: handling fault status reg 2", found{}},
		{-1, "DMAR: [DMA Read NO_PASID] Request device [01:00.0] fault addr 0xff0f0000 [fault reason 0x06] PTE Read access is not set", found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:01:00.0", Address: 0xff0f0000, Reason: "PTE Read access is not set"}}},
		{-1, "nvme nvme0: I/O tag 16 (0010) QID 0 timeout, disable controller", found{}},
		{-1, "nvme nvme0: Identify Controller failed (-4)", found{}},
		{-1, "nvme 0000:01:00.0: probe with driver nvme failed with error -5", found{Probe: &ProbeFailure{"nvme", "0000:01:00.0", -5}}},
		{-1, "nvme nvme0: pci function 0000:01:00.0", found{}},
		{-1, "nvme nvme0: 32/0/0 default/read/poll queues", found{}},
		{-1, "nvme nvme0: Ignoring bogus Namespace Identifiers", found{}},
	},
}

func checkRecords(t *testing.T, recs []Record, wants []want, checkTime bool) {
	t.Helper()
	if len(recs) != len(wants) {
		for _, r := range recs {
			t.Logf("record %q", r.Message)
		}
		t.Fatalf("%d records, want %d", len(recs), len(wants))
	}
	for i, w := range wants {
		r := recs[i]
		if r.Message != w.Message {
			t.Errorf("record %d: message\n%q\nwant\n%q", i, r.Message, w.Message)
		}
		if checkTime && r.Time != w.Time {
			t.Errorf("record %d: time %v, want %v", i, r.Time, w.Time)
		}
		if got := recognise(r.Message); !reflect.DeepEqual(got, w.Found) {
			t.Errorf("record %d %q:\n got %v\nwant %v", i, r.Message, got, w.Found)
		}
	}
}

func TestFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.log")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(fixtures) {
		t.Errorf("%d files in testdata, %d in the table", len(files), len(fixtures))
	}
	for name, wants := range fixtures {
		t.Run(name, func(t *testing.T) {
			recs := scanAll(t, fixture(t, name))
			checkRecords(t, recs, wants, true)
			for _, r := range recs {
				if r.Seq != 0 || r.Priority != -1 {
					t.Errorf("%q: seq %d priority %d, want 0 and -1", r.Message, r.Seq, r.Priority)
				}
			}
		})
	}
}

// toKmsg writes records as /dev/kmsg does: escaped, with a dictionary after each.
func toKmsg(recs []Record, firstSeq uint64) string {
	var b strings.Builder
	for i, r := range recs {
		usec := int64(0)
		if r.Time >= 0 {
			usec = r.Time.Microseconds()
		}
		prio := r.Priority
		if prio < 0 {
			prio = 4
		}
		fmt.Fprintf(&b, "%d,%d,%d,-;", prio, firstSeq+uint64(i), usec)
		for j := 0; j < len(r.Message); j++ {
			c := r.Message[j]
			if c < ' ' || c >= 127 || c == '\\' {
				fmt.Fprintf(&b, `\x%02x`, c)
			} else {
				b.WriteByte(c)
			}
		}
		b.WriteString("\n SUBSYSTEM=pci\n DEVICE=+pci:0000:01:00.0\n")
	}
	return b.String()
}

// TestFixturesAsKmsg feeds every fixture through Scan a second time, written as /dev/kmsg
// records, and expects the same messages and the same findings.
func TestFixturesAsKmsg(t *testing.T) {
	for name, wants := range fixtures {
		t.Run(name, func(t *testing.T) {
			recs := scanAll(t, fixture(t, name))
			in := toKmsg(recs, 100)
			again := scanAll(t, in)
			checkRecords(t, again, wants, false)
			for i, r := range again {
				if r.Seq != 100+uint64(i) || r.Priority != 4 {
					t.Errorf("record %d: seq %d priority %d", i, r.Seq, r.Priority)
				}
				if recs[i].Time >= 0 && r.Time != recs[i].Time {
					t.Errorf("record %d: time %v, want %v", i, r.Time, recs[i].Time)
				}
			}
		})
	}
}

func TestNVRMVersionFixtures(t *testing.T) {
	for name, v := range map[string]string{"neofetch-876.log": "384.98", "nixgl-186.log": "565.57.01"} {
		got, ok := ParseNVRMVersion(fixture(t, name))
		if !ok || got != v {
			t.Errorf("%s: %q %v, want %q", name, got, ok, v)
		}
	}
}

// IsNVRMInvalidRegion recognises "NVRM: This PCI I/O region assigned to your NVIDIA device
// is invalid", whether or not the BAR line follows in the same record.
func IsNVRMInvalidRegion(msg string) bool {
	return strings.Contains(msg, "NVRM: This PCI I/O region assigned to your NVIDIA device is invalid")
}
