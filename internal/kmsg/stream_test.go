package kmsg

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// logGen is an io.Reader that writes a kernel log of about limit bytes as it is read,
// cycling through the forms Scan accepts. It counts the records it writes.
type logGen struct {
	limit   int64
	written int64
	i       int
	buf     []byte
	off     int
	records int
	cut     int // records that must come out cut at MaxRecord
	long    []byte
	cont    []byte
}

func newLogGen(limit int64) *logGen {
	return &logGen{
		limit: limit,
		long:  bytes.Repeat([]byte("L"), 3*MaxLine),
		cont:  append(append([]byte("               "), bytes.Repeat([]byte("c"), 1000)...), '\n'),
	}
}

// next fills g.buf with the next piece of the log.
func (g *logGen) next() {
	b := g.buf[:0]
	g.i++
	n := g.i
	sec, usec := n/1000000, n%1000000
	switch n % 10 {
	case 0:
		b = fmt.Appendf(b, "[%5d.%06d] pci 0000:%02x:00.0: BAR 1 [mem size 0x400000000 64bit pref]: can't assign; no space\n", sec, usec, n%256)
		g.records++
	case 1:
		b = fmt.Appendf(b, "4,%d,%d,-;NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:\\x0aNVRM: BAR1 is 0M @ 0x0 (PCI:0000:%02x:00.0)\n SUBSYSTEM=pci\n DEVICE=+pci:0000:%02x:00.0\n", n, n, n%256, n%256)
		g.records++
	case 2:
		b = fmt.Appendf(b, "[%5d.%06d] NVRM: API mismatch: the client 'proc%d' (pid %d)\n", sec, usec, n, n)
		b = append(b, "               NVRM: has the version 595.84, but this kernel module has\n"...)
		b = append(b, "               NVRM: the version 595.80.  Please make sure that this\n"...)
		g.records++
	case 3:
		b = fmt.Appendf(b, "Sep 21 09:59:59 runtime kernel: nvidia 0000:07:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x%x flags=0x0020]\n", n)
		b = append(b, "Sep 21 09:59:59 runtime systemd[1]: Started something.\n"...)
		g.records++
	case 4:
		b = append(b, "DMAR: [DMA Read NO_PASID] Request device [00:02.0] fault addr 0x7cd80000 [fault reason 0x01] Present bit in root entry is clear\n"...)
		g.records++
	case 5:
		if n%10000 == 5 {
			// A line longer than MaxLine.
			b = append(b, g.long...)
			b = append(b, '\n')
		} else {
			b = fmt.Appendf(b, "plain line %d\r\n", n)
		}
		g.records++
	case 6:
		if n%10000 == 6 {
			// A message longer than MaxRecord.
			b = fmt.Appendf(b, "[%5d.%06d] head\n", sec, usec)
			for range MaxRecord/1000 + 10 {
				b = append(b, g.cont...)
			}
			g.cut++
		} else {
			b = fmt.Appendf(b, "<6>[%5d.%06d] kvm_amd: SEV-SNP enabled (ASIDs 1 - 1)\n", sec, usec)
		}
		g.records++
	case 7:
		b = append(b, "\n-- Boot 3f0d2a7e8c6b4a8d9d1f1b2c3d4e5f60 --\n"...)
	default:
		b = fmt.Appendf(b, "[%5d.%06d] pci 0000:01:00.0: 31.504 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x4 link at 0000:00:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)\n", sec, usec)
		g.records++
	}
	g.buf, g.off = b, 0
	g.written += int64(len(b))
}

func (g *logGen) Read(p []byte) (int, error) {
	if g.off == len(g.buf) {
		if g.written >= g.limit {
			return 0, io.EOF
		}
		g.next()
	}
	n := copy(p, g.buf[g.off:])
	g.off += n
	return n, nil
}

// TestScanStream streams a generated log of 100 MB through Scan, checking that every record
// comes out, none is longer than MaxRecord, and the heap does not grow with the input.
func TestScanStream(t *testing.T) {
	size := int64(100 << 20)
	if testing.Short() {
		size = 10 << 20
	}
	g := newLogGen(size)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	peak := base
	records, cut, found := 0, 0, 0
	err := Scan(g, func(r Record) bool {
		records++
		if len(r.Message) > MaxRecord {
			t.Fatalf("record of %d bytes", len(r.Message))
		}
		if len(r.Message) == MaxRecord {
			cut++
		}
		if _, ok := ParseBARFailure(r.Message); ok {
			found++
		}
		if records%20000 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapInuse)
	if g.written < size {
		t.Fatalf("generated %d bytes, want %d", g.written, size)
	}
	if records != g.records {
		t.Errorf("%d records, want %d", records, g.records)
	}
	if cut != g.cut || cut == 0 {
		t.Errorf("%d records cut at MaxRecord, want %d", cut, g.cut)
	}
	if want := (g.i + 9) / 10; found < want-1 || found > want {
		t.Errorf("%d BAR failures recognised, want about %d", found, want)
	}
	const bound = 32 << 20
	if growth := int64(peak) - int64(base); growth > bound {
		t.Errorf("heap in use grew by %d MB reading %d MB", growth>>20, size>>20)
	}
	t.Logf("%d MB, %d records, heap in use grew by at most %d KB", g.written>>20, records, (int64(peak)-int64(base))>>10)
}

func BenchmarkScan(b *testing.B) {
	data, err := io.ReadAll(newLogGen(16 << 20))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := Scan(bytes.NewReader(data), func(Record) bool { n++; return true }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanRecognise runs every recogniser on every record, as the doctor does.
func BenchmarkScanRecognise(b *testing.B) {
	data, err := io.ReadAll(newLogGen(16 << 20))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := Scan(bytes.NewReader(data), func(r Record) bool { recognise(r.Message); return true }); err != nil {
			b.Fatal(err)
		}
	}
}

var fullBDF = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

func fuzzSeeds(f *testing.F) {
	for name := range fixtures {
		f.Add([]byte(fixture(f, name)))
	}
	f.Add([]byte(kmsgInput))
	for _, c := range recogniserCases {
		f.Add([]byte(c.msg))
	}
	f.Add([]byte("[ 1.0] a\n " + strings.Repeat("b", 70000) + "\n"))
	f.Add([]byte("Sep 21 09:59:59 h kernel: a#012b#011c#01"))
	f.Add([]byte("6,1,2,-;\\x0\\x\\xg0\\xff\n"))
}

func FuzzScan(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var whole []Record
		err := Scan(bytes.NewReader(data), func(r Record) bool {
			if len(r.Message) > MaxRecord {
				t.Fatalf("record of %d bytes", len(r.Message))
			}
			if r.Priority < -1 || r.Priority > 7 || r.Time < -1 {
				t.Fatalf("record %+v", r)
			}
			whole = append(whole, r)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		// The records do not depend on how the reader splits the input.
		var pieces []Record
		_ = Scan(&chunky{data: data}, func(r Record) bool { pieces = append(pieces, r); return true })
		if len(pieces) != len(whole) {
			t.Fatalf("%d records read in pieces, %d at once", len(pieces), len(whole))
		}
		for i := range whole {
			if whole[i] != pieces[i] {
				t.Fatalf("record %d: %+v in pieces, %+v at once", i, pieces[i], whole[i])
			}
		}
	})
}

// chunky reads its data in pieces of 1 to 7 bytes.
type chunky struct {
	data []byte
	n    int
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	c.n = c.n%7 + 1
	k := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[k:]
	return k, nil
}

func FuzzRecognisers(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		msg := string(data)
		f := recognise(msg)
		check := func(what, bdf string, mayBeEmpty bool) {
			if bdf == "" && mayBeEmpty {
				return
			}
			if !fullBDF.MatchString(bdf) {
				t.Fatalf("%s: device %q not normalised, from %q", what, bdf, msg)
			}
		}
		if f.BAR != nil {
			check("BAR", f.BAR.Device, false)
		}
		if f.NVRMBar != nil {
			check("NVRMBar", f.NVRMBar.Device, false)
		}
		if f.Fault != nil {
			check("Fault", f.Fault.Device, f.Fault.Kind != "DMAR")
		}
		if f.Link != nil {
			check("Link", f.Link.Device, true)
		}
		if f.Probe != nil && f.Probe.Driver == "" {
			t.Fatalf("probe failure without a driver from %q", msg)
		}
		if f.Loading != "" && !utf8.ValidString(f.Loading) {
			t.Fatalf("version %q", f.Loading)
		}
		ParseNVRMVersion(msg)
	})
}
