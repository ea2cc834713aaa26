package kmsg

import (
	"reflect"
	"testing"
)

// Lines quoted in the reference outside the fixtures, the other forms the kernel and the
// driver print (from their format strings), and lines that look alike but are something
// else.
var recogniserCases = []struct {
	msg  string
	want found
}{
	// BAR assignment.
	{"pci 0000:00:1c.0: bridge window [mem size 0x00200000 64bit pref]: can't assign; no space",
		found{BAR: &BARFailure{"0000:00:1c.0", "bridge window", 0x200000, "can't assign; no space"}}},
	{"pci 0000:00:1c.0: bridge window [io  size 0x1000]: failed to assign",
		found{BAR: &BARFailure{"0000:00:1c.0", "bridge window", 0x1000, "failed to assign"}}},
	{"pci 0000:3b:00.0: VF BAR 0 [mem size 0x00800000 64bit pref]: failed to assign",
		found{BAR: &BARFailure{"0000:3b:00.0", "VF BAR 0", 0x800000, "failed to assign"}}},
	{"pci 0000:01:00.0: ROM [mem size 0x00080000 pref]: can't assign; no space",
		found{BAR: &BARFailure{"0000:01:00.0", "ROM", 0x80000, "can't assign; no space"}}},
	{"pci 0000:C1:00.0: BAR 1 [mem 0x6000000000-0x600fffffff 64bit pref]: failed to assign",
		found{BAR: &BARFailure{"0000:c1:00.0", "BAR 1", 0x10000000, "failed to assign"}}},
	{"pci 0000:00:1c.0: BAR 14: no space for [mem size 0x00200000]",
		found{BAR: &BARFailure{"0000:00:1c.0", "BAR 14", 0x200000, "no space for"}}},
	{"nvidia 0000:01:00.0: BAR 1 [mem size 0x2000000000 64bit pref]: not assigned; can't enable device",
		found{BAR: &BARFailure{"0000:01:00.0", "BAR 1", 0x2000000000, "not assigned; can't enable device"}}},
	{"nvidia 0000:01:00.0: can't enable device: BAR 1 [mem size 0x2000000000 64bit pref] not assigned",
		found{BAR: &BARFailure{"0000:01:00.0", "BAR 1", 0x2000000000, "not assigned; can't enable device"}}},
	{"pci 0000:01:00.0: BAR 1 [mem size 0x10000000 64bit pref]: can't assign; bogus alignment", found{}},
	{"pci 0000:01:00.0: BAR 1 [mem 0x6000000000-0x600fffffff 64bit pref]: assigned", found{}},
	{"pci 0000:01:00.0: BAR 1: assigned [mem 0x6000000000-0x600fffffff 64bit pref]", found{}},
	{"pci 0000:01:00.0: BAR 1 [mem 0x6000000000-0x600fffffff 64bit pref]: can't claim; no compatible bridge window", found{}},
	{"pci 0000:01:00.0: BAR 1 [mem 0x6000000000-0x5fffffffff 64bit pref]: failed to assign", found{}},
	{"pci 0000:01:00.0: BAR 1: trying firmware assignment [mem 0x6000000000-0x600fffffff 64bit pref]", found{}},
	{"pci_bus 0000:00: BAR 1 [mem size 0x10000000]: failed to assign", found{}},
	{"BAR 1 [mem size 0x10000000 64bit pref]: failed to assign", found{}},
	{"pci 0000:01:00.0: BAR 1 [mem size 0x10000000000000000 64bit pref]: failed to assign", found{}},
	{"Automatically enabled pci realloc, if you have problem, try booting with pci=realloc=off", found{}},
	{"pci_bus 0000:00: Some PCI device resources are unassigned, try booting with pci=realloc", found{Realloc: true}},

	// Probe failures, both driver-core forms (https://github.com/pop-os/cosmic-epoch/issues/2146).
	{"nvidia: probe of 0000:14:00.0 failed with error -1", found{Probe: &ProbeFailure{"nvidia", "0000:14:00.0", -1}}},
	{"nvidia 0000:01:00.0: probe with driver nvidia failed with error -1", found{Probe: &ProbeFailure{"nvidia", "0000:01:00.0", -1}}},
	{"i2c_hid: probe of i2c-ELAN0001:00 failed with error -22", found{Probe: &ProbeFailure{"i2c_hid", "i2c-ELAN0001:00", -22}}},
	{"nvidia: probe of 0000:14:00.0 failed with error", found{}},
	{"nvidia 0000:01:00.0: probe with driver nvidia failed with error -99999999999999999999", found{}},
	{"xhci_hcd 0000:00:14.0: init 0000:00:14.0 fail, -110", found{}},
	{"NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)", found{InitFailed: &InitFailure{Device: "0000:01:00.0", Stage: 0x22, Status: 0x56}}},

	// nvidia's BAR lines.
	{"NVRM: BAR1 is 256M @ 0xf0000000 (PCI:0000:14:00.0)", found{NVRMBar: &NVRMBar{1, 256, 0xf0000000, "0000:14:00.0"}}},
	{nvrmInvalid + " NVRM: BAR1 is 0M @ 0x0 (PCI:0000:14:00.0)", found{InvalidRegion: true, NVRMBar: &NVRMBar{1, 0, 0, "0000:14:00.0"}}},
	{"NVRM: BAR1 is 0M @ 0x0", found{}},
	{"NVRM: BAR1 is 0M @ 0x0 (PCI:0000:14:00.9)", found{}},
	{"BAR1: \t\t 0xf0000000 (256MB)", found{}},

	// IOMMU faults.
	{"DMAR:[DMA Write] Request device [00:02.0] fault addr 6df084000",
		found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:00:02.0", Address: 0x6df084000}}},
	{"DMAR:[DMA Write] Request device [00:02.0] fault addr 6df084000\nDMAR:[fault reason 05]PTE Write access is not set",
		found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:00:02.0", Address: 0x6df084000, Reason: "PTE Write access is not set"}}},
	{"DMAR: [DMA Write PASID 0x2] Request device [3b:00.1] fault addr 0xfffff000 [fault reason 0x71] SM: Present bit in PASID table entry is clear",
		found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:3b:00.1", Address: 0xfffff000, Reason: "SM: Present bit in PASID table entry is clear"}}},
	{"DMAR: [DMA Read NO_PASID] Request device [00:02.0] fault addr 0x7cd80000 [fault reason 0x01]",
		found{Fault: &IOMMUFault{Kind: "DMAR", Device: "0000:00:02.0", Address: 0x7cd80000, Reason: "fault reason 0x01"}}},
	{"AMD-Vi: Event logged [IO_PAGE_FAULT device=0000:c1:00.0 domain=0x0000 address=0xfd000000 flags=0x0050]",
		found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:c1:00.0", Address: 0xfd000000, Reason: "flags=0x0050"}}},
	{"iommu ivhd0: AMD-Vi: Event logged [IO_PAGE_FAULT device=03:00.0 domain=0x000d address=0x000000000637c000 flags=0x0000]",
		found{Fault: &IOMMUFault{Kind: "IO_PAGE_FAULT", Device: "0000:03:00.0", Address: 0x637c000, Reason: "flags=0x0000"}}},
	{"amdgpu 0000:07:00.0: Event logged [IO_PAGE_FAULT domain=0x0007 address=0xffffc02000 flags=0x0000]",
		found{Fault: &IOMMUFault{"IO_PAGE_FAULT", "0000:07:00.0", "amdgpu", 0xffffc02000, "flags=0x0000"}}},
	{"DMAR: [INTR-REMAP] Request device [f0:1f.0] fault index 0x0 [fault reason 0x25] Blocked a compatibility format interrupt request", found{}},
	{"DMAR:[fault reason 05]PTE Write access is not set", found{}},
	{"DMAR: DRHD: handling fault status reg 3", found{}},
	{"DMAR: [DMA Read NO_PASID] Request device [00:02.0] fault addr", found{}},
	{"AMD-Vi: Event logged [Device not attached to domain properly]", found{}},
	{"AMD-Vi: Event logged [ILLEGAL_DEV_TABLE_ENTRY device=0000:00:00.0 pasid=0x00000 address=0xfffffffdf8000000 flags=0x0a00]", found{}},
	{"AMD-Vi: Event logged [IO_PAGE_FAULTY device=07:00.0]", found{}},
	{"AMD-Vi: Interrupt remapping enabled", found{}},

	// IOMMU mode.
	{"iommu: Default domain type: Translated ", found{Domain: &domainResult{"Translated", false}}},
	{"iommu: Default domain type: Passthrough (set via kernel command line)", found{Domain: &domainResult{"Passthrough", true}}},
	{"iommu: Default domain type: Translated (set via something else)", found{}},
	{"iommu: Memory encryption detected - Disabling default IOMMU Passthrough", found{EncNoPT: true}},
	{"Memory Encryption Features active: AMD SME", found{}},
	{"AMD-Vi: Unknown option - 'on'", found{Unknown: &unknownResult{"AMD-Vi", "on"}}},
	{"DMAR: Unknown option - 'foo'", found{Unknown: &unknownResult{"DMAR", "foo"}}},
	{"AMD-Vi: Unknown option - on", found{}},
	{`Unknown kernel command line parameters "amd_iommu=on", will be passed to user space.`, found{Boot: &BootLine{Unknown: []string{"amd_iommu=on"}}}},

	// SEV.
	{"kvm_amd: SEV-SNP disabled (ASIDs 0 - 0)", found{SEV: &SEVState{"SEV-SNP", "disabled"}}},
	{"kvm_amd: SEV-ES unusable (ASIDs 1 - 0)", found{SEV: &SEVState{"SEV-ES", "unusable"}}},
	{"kvm_amd: SEV supported: 410 ASIDs", found{SEV: &SEVState{"SEV", "enabled"}}},
	{"SVM: SEV-ES supported: 99 ASIDs", found{SEV: &SEVState{"SEV-ES", "enabled"}}},
	{"kvm_amd: SEV-ES and SEV-SNP supported: 99 ASIDs", found{SEV: &SEVState{"SEV-SNP", "enabled"}}},
	{"kvm_amd: SEV-SNP enabled", found{}},
	{"kvm_amd: SEV-SNP maybe (ASIDs 1 - 1)", found{}},
	{"ccp 0000:03:00.5: SEV API:1.55 build:42", found{}},
	{"AMD-Vi: IOMMU SNP support enabled.", found{SNP: &snpResult{true, ""}}},
	{"AMD-Vi: SNP: IOMMU disabled or configured in passthrough mode, SNP cannot be supported.",
		found{SNP: &snpResult{false, "IOMMU disabled or configured in passthrough mode"}}},
	{"AMD-Vi: SNP: IOMMU is configured with V2 page table mode, SNP cannot be supported.",
		found{SNP: &snpResult{false, "IOMMU is configured with V2 page table mode"}}},
	{"AMD-Vi: SNP: IOMMU SNP feature not enabled, SNP cannot be supported.",
		found{SNP: &snpResult{false, "IOMMU SNP feature not enabled"}}},
	{"AMD-Vi: IOMMU performance counters supported", found{}},
	{"SEV-SNP: RMP table physical range [0x0000018279300000 - 0x00000183fd3fffff]", found{SNPPlatform: "rmp"}},

	// Driver versions (https://github.com/nvidiavgpuarchive/index/issues/1, nixGL#139).
	{"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.148.06  Mon May  5 11:36:21 UTC 2025", found{Loading: "570.148.06"}},
	{"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (dvs-builder@U16-A24-9-2)  Thu Oct 10 12:15:00 UTC 2024", found{Loading: "565.57.01"}},
	{"NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  35.3.1  Release Build", found{Loading: "35.3.1"}},
	{"NVRM: loading NVIDIA UNIX x86_64 Kernel Module", found{}},
	{"nvidia-nvlink: Nvlink Core is being initialized, major device number 234", found{}},
	{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  Thu Oct 26 15:16:01 PDT 2017", found{}},

	// API mismatch.
	{"NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)", found{Mismatch: &APIMismatch{Client: "kwin_wayland", PID: 1005}}},
	{"NVRM: API mismatch: the client 'nvidia-smi' (pid 4242) has the version 565.57.01, but this kernel module has the version 535.183.01.  Please make sure that this kernel module and all NVIDIA driver components have the same version.",
		found{Mismatch: &APIMismatch{"nvidia-smi", 4242, "565.57.01", "535.183.01"}}},
	{"nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown.", found{}},
	{"Failed to initialize NVML: Driver/library version mismatch", found{}},

	// Link.
	{"mlx5_core 0000:3b:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8 GT/s x8 link at 0000:3a:00.0 (capable of 126.016 Gb/s with 8 GT/s x16 link)",
		found{Link: &LinkLimit{"0000:3b:00.0", "63.008 Gb/s", "8 GT/s x8", "0000:3a:00.0", "8 GT/s x16", "126.016 Gb/s"}}},
	{"2.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x1 link at 0000:00:1c.0 (capable of 63.008 Gb/s with 8.0 GT/s PCIe x8 link)",
		found{Link: &LinkLimit{"", "2.000 Gb/s", "2.5 GT/s PCIe x1", "0000:00:1c.0", "8.0 GT/s PCIe x8", "63.008 Gb/s"}}},
	{"pci 0000:01:00.0: 252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 link)", found{}},
	// drivers/pci/probe.c pci_setup_device, before and since 6.7.
	{"pci 0000:01:00.0: [10de:1eb8] type 00 class 0x030200",
		found{Enumerated: &Enumerated{"0000:01:00.0", 0x10de, 0x1eb8, 0x030200}}},
	{"pci 0000:c1:00.0: [10de:2bb1] type 00 class 0x030000 PCIe Legacy Endpoint",
		found{Enumerated: &Enumerated{"0000:c1:00.0", 0x10de, 0x2bb1, 0x030000}}},
	{"pci 0000:c1:00.1: [10de:22e8] type 00 class 0x040300 PCIe Endpoint",
		found{Enumerated: &Enumerated{"0000:c1:00.1", 0x10de, 0x22e8, 0x040300}}},
	{"pci 0000:00:01.1: [1022:14ab] type 01 class 0x060400 PCIe Root Port",
		found{Enumerated: &Enumerated{"0000:00:01.1", 0x1022, 0x14ab, 0x060400}}},
	{"pci 0000:01:00.0: [10de:1eb8] type 00 class 0x03", found{}},
	// drivers/pci/pci.c.
	{"nvidia 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible", found{Power: "0000:01:00.0 D3cold"}},
	{"vfio-pci 0000:0b:00.0: Refused to change power state from D0 to D3hot", found{Power: "0000:0b:00.0 D0"}},
	{"dmar_fault: 5 callbacks suppressed", found{Suppressed: 5}},
	{"nvidia_uvm: 5 callbacks suppressed", found{}},
	{"pci 0000:01:00.0: 31.504 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x4 link at 0000:00:00.0", found{}},

	// Nothing at all.
	{"", found{}},
	{"\n\n", found{}},
	{"   ", found{}},
}

func TestRecognisers(t *testing.T) {
	for _, c := range recogniserCases {
		if got := recognise(c.msg); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q:\n got %v\nwant %v", c.msg, got, c.want)
		}
	}
}

func TestParseNVRMVersion(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  35.3.1  Release Build  (buildbrain@mobile-u64-5273-d7000)  Thu Mar 16 19:07:02 PDT 2023\nGCC version:  gcc version 9.3.0 (Buildroot 2020.08) \n", "35.3.1", true},
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.148.06  Mon May  5 11:36:21 UTC 2025\n", "570.148.06", true},
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.148.06", "570.148.06", true},
		{"GCC version:  gcc version 7.2.0 (Ubuntu 7.2.0-8ubuntu3)\n", "", false},
		{"NVRM version: \n", "", false},
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  unknown  Mon May  5 11:36:21 UTC 2025\n", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		got, ok := ParseNVRMVersion(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %q %v, want %q %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestNormBDF(t *testing.T) {
	cases := map[string]string{
		"0000:01:00.0":   "0000:01:00.0",
		"01:00.0":        "0000:01:00.0",
		"0x00:0x02.0":    "0000:00:02.0",
		"0000:C1:00.7":   "0000:c1:00.7",
		"10000:e1:1f.3":  "10000:e1:1f.3",
		"5:1:2.3":        "0005:01:02.3",
		"000A:0B:1f.0":   "000a:0b:1f.0",
		"0000:01:00.8":   "",
		"0000:01:20.0":   "",
		"0000:100:00.0":  "",
		"01:00":          "",
		"0000:01:00.0.0": "",
		"a:b:c:d.0":      "",
		":01:00.0":       "",
		"0000:01:00.":    "",
		"-1:01:00.0":     "",
		"0000:0x:00.0":   "",
	}
	for in, want := range cases {
		got, ok := normBDF(in)
		if got != want || ok != (want != "") {
			t.Errorf("normBDF(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
}
