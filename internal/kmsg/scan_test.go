package kmsg

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// Hand-written /dev/kmsg records for some of the real excerpts: escaped newlines,
// facility bits in the priority, extra header fields and dictionaries.
const kmsgInput = `4,1201,83260063553,-;NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:\x0aNVRM: BAR1 is 0M @ 0x0 (PCI:0000:14:00.0)
 SUBSYSTEM=pci
 DEVICE=+pci:0000:14:00.0
3,1202,83260063557,-;nvidia: probe of 0000:14:00.0 failed with error -1
 SUBSYSTEM=pci
 DEVICE=+pci:0000:14:00.0
4,1203,9424670,-,caller=T1005;NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)\x0aNVRM: has the version 595.84, but this kernel module has\x0aNVRM: the version 595.80.  Please make sure that this\x0aNVRM: kernel module and all NVIDIA driver components\x0aNVRM: have the same version.
3,1204,1234567,-;vfio-pci 0000:c1:00.0: AMD-Vi: Event logged [RMP_PAGE_FAULT vmg_tag=0x0000, gpa=0x740b8784, flags_rmp=0x0000, flags=0x0020]
 SUBSYSTEM=pci
 DEVICE=+pci:0000:c1:00.0
6,1205,2831115,-;pci 0000:01:00.0: BAR 1 [mem size 0x10000000 64bit pref]: can't assign; no space
 SUBSYSTEM=pci
 DEVICE=+pci:0000:01:00.0
30,1206,61499848,c;kvm_amd: SEV-SNP enabled (ASIDs 1 - 1)
6,1207,1,-;a \x5cx0a backslash, a tab\x09and \xzz left alone\x
`

func TestScanKmsg(t *testing.T) {
	recs := scanAll(t, kmsgInput)
	type rec struct {
		prio  int
		seq   uint64
		time  time.Duration
		found found
	}
	wants := []rec{
		{4, 1201, 83260063553 * time.Microsecond, found{InvalidRegion: true, NVRMBar: &NVRMBar{BAR: 1, Device: "0000:14:00.0"}}},
		{3, 1202, 83260063557 * time.Microsecond, found{Probe: &ProbeFailure{"nvidia", "0000:14:00.0", -1}}},
		{4, 1203, 9424670 * time.Microsecond, found{Mismatch: &APIMismatch{"kwin_wayland", 1005, "595.84", "595.80"}}},
		{3, 1204, 1234567 * time.Microsecond, found{Fault: &IOMMUFault{"RMP_PAGE_FAULT", "0000:c1:00.0", "vfio-pci", 0x740b8784, "flags_rmp=0x0000 flags=0x0020"}}},
		{6, 1205, 2831115 * time.Microsecond, found{BAR: &BARFailure{"0000:01:00.0", "BAR 1", 0x10000000, "can't assign; no space"}}},
		{6, 1206, 61499848 * time.Microsecond, found{SEV: &SEVState{"SEV-SNP", "enabled"}}},
		{6, 1207, time.Microsecond, found{}},
	}
	if len(recs) != len(wants) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(wants), recs)
	}
	for i, w := range wants {
		r := recs[i]
		if r.Priority != w.prio || r.Seq != w.seq || r.Time != w.time {
			t.Errorf("record %d: prio %d seq %d time %v, want %d %d %v", i, r.Priority, r.Seq, r.Time, w.prio, w.seq, w.time)
		}
		if got := recognise(r.Message); !reflect.DeepEqual(got, w.found) {
			t.Errorf("record %d %q: got %v, want %v", i, r.Message, got, w.found)
		}
	}
	if want := nvrmInvalid + "\nNVRM: BAR1 is 0M @ 0x0 (PCI:0000:14:00.0)"; recs[0].Message != want {
		t.Errorf("multi-line record %q, want %q", recs[0].Message, want)
	}
	if want := "a \\x0a backslash, a tab\tand \\xzz left alone\\x"; recs[6].Message != want {
		t.Errorf("escapes: %q, want %q", recs[6].Message, want)
	}
}

func TestScanMixed(t *testing.T) {
	in := strings.Join([]string{
		"-- Boot 3f0d2a7e8c6b4a8d9d1f1b2c3d4e5f60 --",
		`6,10,5000000,-;pci 0000:01:00.0: [10de:2204] type 00 class 0x030000`,
		" SUBSYSTEM=pci",
		"[    9.424670] NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)",
		"               NVRM: has the version 595.84, but this kernel module has",
		"               NVRM: the version 595.80.  Please make sure that this",
		"Sep 21 09:59:59 runtime kernel: nvidia 0000:07:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]",
		"Sep 21 10:00:00 runtime systemd[1]: Started Session 5 of User root.",
		"                                   a continuation of the systemd line",
		"Sep  1 10:00:01 runtime kernel: [   12.500000] NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:#012NVRM: BAR1 is 0M @ 0x0 (PCI:0000:14:00.0)",
		"2024-05-01T10:11:12.123456+02:00 runtime kernel: iommu: Default domain type: Passthrough",
		"Sep 21 09:59:59 kernel: no host",
		"Sep 21 09:59:59 runtime kernel:",
		"2024-05-01T10:11:12+0200 runtime sshd[812]: Accepted publickey for root",
		"2024-05-01T10:11:13,000456+02:00 iommu: Default domain type: Translated",
		"<4>[    3.000001] nvidia: probe of 0000:14:00.0 failed with error -1",
		"<3>nvidia 0000:01:00.0: probe with driver nvidia failed with error -1",
		"kern  :err   : [    4.000000] AMD-Vi: Unknown option - 'on'",
		"[Thu Oct 20 05:10:45 2022] kvm_amd: SEV enabled (ASIDs 2 - 1006)",
		"[  +0.000398] vfio-pci 0000:c1:00.0: AMD-Vi: Event logged [RMP_PAGE_FAULT vmg_tag=0x0000, gpa=0x740b8784, flags_rmp=0x0000, flags=0x0020]",
		"[    0.000003 <    0.000002>] iommu: Memory encryption detected - Disabling default IOMMU Passthrough",
		"[Oct20 05:10] AMD-Vi: IOMMU SNP support enabled.",
		"[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout",
		"   an indented line after a one-line record",
		"",
		"\t",
		"plain line with CRLF\r",
		"kernel: kernel: NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.",
		"kernel: [   13.134460] AMD-Vi: Event logged [",
		"192.168.11.119: kern: warning: [2026-04-22T21:30:51.870495804Z]: NVRM: Xid (PCI:0000:0b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
		"node1: kern: warning: not a stamp]: left whole",
		"[   12.345678] dmesg line at the end",
		"               and its second line",
	}, "\n")
	recs := scanAll(t, in)
	type rec struct {
		prio int
		time time.Duration
		msg  string
	}
	wants := []rec{
		{6, 5 * time.Second, "pci 0000:01:00.0: [10de:2204] type 00 class 0x030000"},
		{-1, secs(9.424670), "NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)\nNVRM: has the version 595.84, but this kernel module has\nNVRM: the version 595.80.  Please make sure that this"},
		{-1, -1, "nvidia 0000:07:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]"},
		{-1, secs(12.5), nvrmInvalid + "\nNVRM: BAR1 is 0M @ 0x0 (PCI:0000:14:00.0)"},
		{-1, -1, "iommu: Default domain type: Passthrough"},
		{-1, -1, "no host"},
		{-1, -1, ""},
		{-1, -1, "iommu: Default domain type: Translated"},
		{4, secs(3.000001), "nvidia: probe of 0000:14:00.0 failed with error -1"},
		{3, -1, "nvidia 0000:01:00.0: probe with driver nvidia failed with error -1"},
		{3, 4 * time.Second, "AMD-Vi: Unknown option - 'on'"},
		{-1, -1, "kvm_amd: SEV enabled (ASIDs 2 - 1006)"},
		{-1, -1, "vfio-pci 0000:c1:00.0: AMD-Vi: Event logged [RMP_PAGE_FAULT vmg_tag=0x0000, gpa=0x740b8784, flags_rmp=0x0000, flags=0x0020]"},
		{-1, 3 * time.Microsecond, "iommu: Memory encryption detected - Disabling default IOMMU Passthrough"},
		{-1, -1, "AMD-Vi: IOMMU SNP support enabled."},
		{-1, -1, "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout"},
		{-1, -1, "an indented line after a one-line record"},
		{-1, -1, "plain line with CRLF"},
		{-1, -1, "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus."},
		{-1, secs(13.134460), "AMD-Vi: Event logged ["},
		{-1, -1, "NVRM: Xid (PCI:0000:0b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"},
		{-1, -1, "node1: kern: warning: not a stamp]: left whole"},
		{-1, secs(12.345678), "dmesg line at the end\nand its second line"},
	}
	var got []rec
	for _, r := range recs {
		got = append(got, rec{r.Priority, r.Time, r.Message})
	}
	if !reflect.DeepEqual(got, wants) {
		for i := range max(len(got), len(wants)) {
			var g, w rec
			if i < len(got) {
				g = got[i]
			}
			if i < len(wants) {
				w = wants[i]
			}
			if g != w {
				t.Errorf("record %d:\n got %+v\nwant %+v", i, g, w)
			}
		}
	}
	// Each line is recognised for what it is.
	checks := []bool{
		!recognise(recs[0].Message).Realloc,
		recognise(recs[1].Message).Mismatch != nil,
		recognise(recs[2].Message).Fault != nil,
		recognise(recs[3].Message).NVRMBar != nil,
		recognise(recs[4].Message).Domain != nil,
		recognise(recs[7].Message).Domain != nil,
		recognise(recs[8].Message).Probe != nil,
		recognise(recs[9].Message).Probe != nil,
		recognise(recs[10].Message).Unknown != nil,
		recognise(recs[11].Message).SEV != nil,
		recognise(recs[12].Message).Fault != nil,
		recognise(recs[13].Message).EncNoPT,
		recognise(recs[14].Message).SNP != nil,
	}
	for i, ok := range checks {
		if !ok {
			t.Errorf("check %d failed", i)
		}
	}
}

// A log pasted with indentation (as in a Markdown list) keeps its records apart; its
// continuation lines, indented further, still join theirs.
func TestScanIndentedPaste(t *testing.T) {
	in := "  [    0.000000] SEV-SNP: RMP table physical range [0x0000018279300000 - 0x00000183fd3fffff]\n" +
		"  [   61.499848] kvm_amd: SEV-SNP enabled (ASIDs 1 - 1)\n" +
		"  [    9.424670] NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)\n" +
		"                 NVRM: has the version 595.84, but this kernel module has\n" +
		"   Sep 21 09:59:59 runtime kernel: AMD-Vi: IOMMU SNP support enabled.\n" +
		"6,1,2,-;kvm_amd: SEV enabled (ASIDs 2 - 1006)\n" +
		" [   61.499844] kvm_amd: SEV-ES enabled (ASIDs 1 - 1)\n" +
		" SUBSYSTEM=pci\n"
	var got []string
	for _, r := range scanAll(t, in) {
		got = append(got, r.Message)
	}
	want := []string{
		"SEV-SNP: RMP table physical range [0x0000018279300000 - 0x00000183fd3fffff]",
		"kvm_amd: SEV-SNP enabled (ASIDs 1 - 1)",
		"NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)\nNVRM: has the version 595.84, but this kernel module has",
		"AMD-Vi: IOMMU SNP support enabled.",
		"kvm_amd: SEV enabled (ASIDs 2 - 1006)",
		// The dmesg record, once opened, takes the indented line that follows.
		"kvm_amd: SEV-ES enabled (ASIDs 1 - 1)\nSUBSYSTEM=pci",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("records\n%q\nwant\n%q", got, want)
	}
}

func TestScanLongLine(t *testing.T) {
	long := strings.Repeat("x", 3*MaxLine+17)
	in := "[    1.000000] first\n" + long + "\n[    2.000000] " + long + "\nafter\n" + strings.Repeat("y", MaxLine) + "\n" + long
	recs := scanAll(t, in)
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6", len(recs))
	}
	if recs[0].Message != "first" || recs[3].Message != "after" {
		t.Errorf("records around the long lines: %q %q", recs[0].Message, recs[3].Message)
	}
	if recs[1].Message != long[:MaxLine] {
		t.Errorf("long line: %d bytes, want %d", len(recs[1].Message), MaxLine)
	}
	if want := long[:MaxLine-len("[    2.000000] ")]; recs[2].Message != want || recs[2].Time != 2*time.Second {
		t.Errorf("long dmesg line: %d bytes, time %v", len(recs[2].Message), recs[2].Time)
	}
	if recs[4].Message != strings.Repeat("y", MaxLine) {
		t.Errorf("a line of exactly MaxLine bytes: %d bytes", len(recs[4].Message))
	}
	if recs[5].Message != long[:MaxLine] {
		t.Errorf("long last line without newline: %d bytes", len(recs[5].Message))
	}
}

func TestScanRecordCut(t *testing.T) {
	var b strings.Builder
	b.WriteString("[    1.000000] head\n")
	cont := "               " + strings.Repeat("c", 1000) + "\n"
	for range 2 * MaxRecord / 1000 {
		b.WriteString(cont)
	}
	b.WriteString("[    2.000000] next\n")
	recs := scanAll(t, b.String())
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	if n := len(recs[0].Message); n != MaxRecord {
		t.Errorf("cut record has %d bytes, want %d", n, MaxRecord)
	}
	if !strings.HasPrefix(recs[0].Message, "head\n"+strings.Repeat("c", 1000)+"\n") {
		t.Errorf("cut record starts %q", recs[0].Message[:40])
	}
	if recs[1].Message != "next" {
		t.Errorf("record after the cut one: %q", recs[1].Message)
	}
	// A multi-byte character is not split at the cut.
	b.Reset()
	b.WriteString("[    1.000000] h\n")
	for range 2 * MaxRecord / 1000 {
		b.WriteString("               " + strings.Repeat("é", 500) + "\n")
	}
	recs = scanAll(t, b.String())
	if m := recs[0].Message; len(m) > MaxRecord || len(m) < MaxRecord-1 || !strings.HasSuffix(m, "é") {
		t.Errorf("cut record of runes: %d bytes, ends %q", len(m), m[len(m)-4:])
	}
}

func TestScanStops(t *testing.T) {
	n := 0
	err := Scan(strings.NewReader(fixture(t, "heymeco-rockchip-pcie-devices-2.log")), func(Record) bool {
		n++
		return n < 2
	})
	if err != nil || n != 2 {
		t.Errorf("Scan stopped after %d records (err %v), want 2", n, err)
	}
	// Stopping on a record that was open does not hand on the next one.
	n = 0
	_ = Scan(strings.NewReader("[ 1.0] a\n  b\n[ 2.0] c\n"), func(Record) bool { n++; return false })
	if n != 1 {
		t.Errorf("%d calls after returning false, want 1", n)
	}
}

func TestScanReaderError(t *testing.T) {
	boom := errors.New("boom")
	var got []string
	err := Scan(iotest.DataErrReader(strings.NewReader("[ 1.0] a\n   b\n")), func(r Record) bool {
		got = append(got, r.Message)
		return true
	})
	if err != nil || !reflect.DeepEqual(got, []string{"a\nb"}) {
		t.Errorf("DataErrReader: %q, %v", got, err)
	}
	got = nil
	r := iotestErrAfter("[ 1.0] a\n   b\n", boom)
	err = Scan(r, func(r Record) bool {
		got = append(got, r.Message)
		return true
	})
	if !errors.Is(err, boom) || !reflect.DeepEqual(got, []string{"a\nb"}) {
		t.Errorf("failing reader: %q, %v", got, err)
	}
}

// iotestErrAfter returns a reader that gives s and then fails with err.
func iotestErrAfter(s string, err error) *errAfter { return &errAfter{s: s, err: err} }

type errAfter struct {
	s   string
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	if e.s == "" {
		return 0, e.err
	}
	n := copy(p, e.s)
	e.s = e.s[n:]
	return n, nil
}

// Reading in small pieces gives the same records as reading at once.
func TestScanChunking(t *testing.T) {
	var all strings.Builder
	for name := range fixtures {
		all.WriteString(fixture(t, name))
	}
	all.WriteString(kmsgInput)
	all.WriteString(strings.Repeat("z", 2*MaxLine) + "\n")
	whole := scanAll(t, all.String())
	var pieces []Record
	if err := Scan(iotest.OneByteReader(strings.NewReader(all.String())), func(r Record) bool {
		pieces = append(pieces, r)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(whole, pieces) {
		t.Errorf("one byte at a time: %d records, at once %d", len(pieces), len(whole))
	}
}
