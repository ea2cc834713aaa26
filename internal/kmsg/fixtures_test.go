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

// fixture reads a testdata log, less the first line, which names its source.
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
		{0, "SEV-SNP: RMP table physical range [0x0000018279300000 - 0x00000183fd3fffff]", found{}},
		{secs(61.424502), "ccp 0000:03:00.5: SEV-SNP API:1.55 build:42", found{}},
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
