package pciids

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
)

// sample covers every kind of line, well-formed and not. Lines marked BAD
// must be skipped, and so must anything indented under them.
const sample = "" +
	"#\n" +
	"#\tList of PCI IDs (test sample)\n" +
	"#\n" +
	"\n" +
	"10de  NVIDIA Corporation\n" +
	"\t2330  GH100 [H100 SXM5 80GB]\n" +
	"\t\t10de 16c1  H100 SXM5 80GB\n" +
	"# a comment between a device and its subsystems\n" +
	"\t\t10de 16c2  Second subsystem\n" +
	"   # an indented comment\n" +
	"\t \n" + // blank but for whitespace
	"\t2335  GH100 [H200 SXM 141GB]\r\n" + // CRLF
	"\t\t10DE 18be  Upper-case subsystem\r\n" +
	"\t233b  GH100 [H200 NVL]\n" +
	"\t233B  Duplicate, upper case: first wins\n" +
	"\t23zz  BAD hex\n" +
	"\t\t10de 0001  BAD: under a skipped device\n" +
	"\t2bb1\tGB202GL [RTX PRO 6000 Blackwell Workstation Edition]  \n" + // tab separator, trailing blanks
	"\t2bb2\n" + // BAD: truncated, no name
	"\t\t10de 0002  BAD: under a truncated device\n" +
	"\t2bb3  \n" + // BAD: empty name
	"\t2bb\n" + // BAD: truncated id
	"\t2bb40  BAD: five digits\n" +
	"\t2bb5  GB202GL [RTX PRO 6000 Blackwell Server Edition]\n" +
	"\t\t10de 204e\n" + // BAD: truncated subsystem
	"\t\t10de  BAD: subsystem without subdevice\n" +
	"\t\t10de 20X0  BAD: subdevice hex\n" +
	"\t\t10de 204f  Good subsystem\n" +
	"\t\t\t1234  BAD: three tabs\n" +
	"    2bb6  BAD: spaces instead of a tab\n" +
	"\t2bb7  BAD: under a skipped top-level line\n" +
	"1a03  ASPEED Technology, Inc.\n" +
	"\t\t10de 204f  BAD: subsystem before any device of this vendor\n" +
	"\t2000  ASPEED Graphics Family\n" +
	"\t\t15d9 0832  X10SRL-F\n" +
	"1a0  BAD: short vendor\n" +
	"\t0001  BAD: under a short vendor\n" +
	"1g03  BAD vendor hex\n" +
	"1b36  Red Hat, Inc.\n" +
	"\t0001  QEMU PCI-PCI bridge\n" +
	"1b36  Duplicate vendor: first wins\n" +
	"\t0002  QEMU PCI 16550A Adapter\n" +
	"\n" +
	"# List of known device classes, subclasses and programming interfaces\n" +
	"C 03  Display controller\n" +
	"\t00  VGA compatible controller\n" +
	"\t\t00  VGA controller\n" +
	"\t\t01  8514 controller\n" +
	"\t02  3D controller\n" +
	"\t0x  BAD subclass hex\n" +
	"\t\t05  BAD: under a skipped subclass\n" +
	"\t80  Display controller\n" +
	"C 06  Bridge\n" +
	"\t04  PCI bridge\r\n" +
	"\t\t00  Normal decode\r\n" +
	"\t\t01  Subtractive decode\r\n" +
	"C 0  BAD: short class\n" +
	"\t01  BAD: under a short class\n" +
	"C 07\n" + // BAD: truncated class
	"\t00  BAD: under a truncated class\n" +
	"C 12  Processing accelerators\n" +
	"\t\t00  BAD: prog-if before any subclass of this class\n" +
	"C ff  Unassigned class" // no final newline

// Parse reads every name of a pci.ids text: the oracle that the loads of a DB with a
// source, which putFirst only the names asked, must agree with. It returns an error only
// when reading r fails.
func Parse(r io.Reader) (*DB, error) {
	p := parser{db: newDB()}
	if err := p.read(r); err != nil {
		return nil, err
	}
	return p.db, nil
}

// parse is Parse of a text in memory.
func parse(s string) *DB {
	db, _ := Parse(strings.NewReader(s))
	return db
}

func mustParse(t testing.TB, s string) *DB {
	t.Helper()
	db, err := Parse(strings.NewReader(s))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return db
}

// inMemory is a DB that loads from the text s, as Embedded does.
func inMemory(s string) *DB { return withSource(&source{text: s}) }

func TestParseSample(t *testing.T) {
	db := mustParse(t, sample)

	vendors := []struct {
		id   uint16
		want string // "" for unknown
	}{
		{0x10de, "NVIDIA Corporation"},
		{0x1a03, "ASPEED Technology, Inc."},
		{0x1b36, "Red Hat, Inc."},
		{0x01a0, ""},
		{0x1a00, ""},
		{0x1003, ""},
		{0x0000, ""},
	}
	for _, tc := range vendors {
		got, ok := db.Vendor(tc.id)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Vendor(%04x) = %q, %v; want %q", tc.id, got, ok, tc.want)
		}
	}

	devices := []struct {
		vendor, device uint16
		want           string
	}{
		{0x10de, 0x2330, "GH100 [H100 SXM5 80GB]"},
		{0x10de, 0x2335, "GH100 [H200 SXM 141GB]"},
		{0x10de, 0x233b, "GH100 [H200 NVL]"},
		{0x10de, 0x2bb1, "GB202GL [RTX PRO 6000 Blackwell Workstation Edition]"},
		{0x10de, 0x2bb5, "GB202GL [RTX PRO 6000 Blackwell Server Edition]"},
		{0x10de, 0x2bb2, ""},
		{0x10de, 0x2bb3, ""},
		{0x10de, 0x02bb, ""},
		{0x10de, 0x2bb4, ""},
		{0x10de, 0xbb40, ""},
		{0x10de, 0x2bb6, ""},
		{0x10de, 0x2bb7, ""},
		{0x1a03, 0x2000, "ASPEED Graphics Family"},
		{0x1a03, 0x0001, ""},
		{0x1b36, 0x0001, "QEMU PCI-PCI bridge"},
		{0x1b36, 0x0002, "QEMU PCI 16550A Adapter"},
		{0x1a03, 0x2330, ""}, // device of another vendor
		{0x1234, 0x2330, ""},
	}
	for _, tc := range devices {
		got, ok := db.Device(tc.vendor, tc.device)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Device(%04x, %04x) = %q, %v; want %q", tc.vendor, tc.device, got, ok, tc.want)
		}
	}

	subsystems := []struct {
		vendor, device, subVendor, subDevice uint16
		want                                 string
	}{
		{0x10de, 0x2330, 0x10de, 0x16c1, "H100 SXM5 80GB"},
		{0x10de, 0x2330, 0x10de, 0x16c2, "Second subsystem"},
		{0x10de, 0x2335, 0x10de, 0x18be, "Upper-case subsystem"},
		{0x10de, 0x2bb5, 0x10de, 0x204f, "Good subsystem"},
		{0x10de, 0x2bb5, 0x10de, 0x204e, ""},
		{0x10de, 0x2bb5, 0x10de, 0x20f0, ""},
		{0x10de, 0x23ff, 0x10de, 0x0001, ""},
		{0x10de, 0x2bb2, 0x10de, 0x0002, ""},
		{0x10de, 0x2bb1, 0x10de, 0x0002, ""}, // not re-parented to the previous good device
		{0x1a03, 0x2000, 0x15d9, 0x0832, "X10SRL-F"},
		{0x1a03, 0x2000, 0x0832, 0x15d9, ""},
		{0x10de, 0x2335, 0x10de, 0x16c1, ""}, // subsystem of another device
	}
	for _, tc := range subsystems {
		got, ok := db.Subsystem(tc.vendor, tc.device, tc.subVendor, tc.subDevice)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Subsystem(%04x, %04x, %04x, %04x) = %q, %v; want %q",
				tc.vendor, tc.device, tc.subVendor, tc.subDevice, got, ok, tc.want)
		}
	}

	classes := []struct {
		class   uint32
		want    string // Class: most specific
		wantSub string // Subclass: prog-if ignored
	}{
		{0x030000, "VGA controller", "VGA compatible controller"},
		{0x030001, "8514 controller", "VGA compatible controller"},
		{0x030002, "VGA compatible controller", "VGA compatible controller"}, // unknown prog-if
		{0x030200, "3D controller", "3D controller"},
		{0x030205, "3D controller", "3D controller"},
		{0x038000, "Display controller", "Display controller"},
		{0x030100, "Display controller", "Display controller"}, // unknown subclass: class name
		{0x060400, "Normal decode", "PCI bridge"},
		{0x060401, "Subtractive decode", "PCI bridge"},
		{0x060000, "Bridge", "Bridge"},
		{0x120000, "Processing accelerators", "Processing accelerators"},
		{0xff0000, "Unassigned class", "Unassigned class"},
		{0x070000, "", ""},
		{0x000000, "", ""},
		{0x01030000, "", ""}, // over 24 bits
	}
	for _, tc := range classes {
		got, ok := db.Class(tc.class)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Class(%06x) = %q, %v; want %q", tc.class, got, ok, tc.want)
		}
		got, ok = db.Subclass(tc.class)
		if got != tc.wantSub || ok != (tc.wantSub != "") {
			t.Errorf("Subclass(%06x) = %q, %v; want %q", tc.class, got, ok, tc.wantSub)
		}
	}

	// Nothing that was marked BAD may have made it in.
	for _, m := range []map[uint16]string{db.vendors, db.subclasses} {
		for k, v := range m {
			if strings.Contains(v, "BAD") {
				t.Errorf("skipped line stored under %04x: %q", k, v)
			}
		}
	}
	for k, v := range db.devices {
		if strings.Contains(v, "BAD") || strings.Contains(v, "Duplicate") {
			t.Errorf("skipped line stored under %08x: %q", k, v)
		}
	}
	for k, v := range db.subsystems {
		if strings.Contains(v, "BAD") {
			t.Errorf("skipped line stored under %016x: %q", k, v)
		}
	}
	for k, v := range db.progIfs {
		if strings.Contains(v, "BAD") {
			t.Errorf("skipped line stored under %06x: %q", k, v)
		}
	}
	if got, want := len(db.vendors), 3; got != want {
		t.Errorf("%d vendors, want %d", got, want)
	}
	if got, want := len(db.devices), 8; got != want {
		t.Errorf("%d devices, want %d", got, want)
	}
	if got, want := len(db.subsystems), 5; got != want {
		t.Errorf("%d subsystems, want %d", got, want)
	}
	if got, want := len(db.classes), 4; got != want {
		t.Errorf("%d classes, want %d", got, want)
	}
}

// TestParseOdd feeds inputs that are not pci.ids at all, or are cut short.
func TestParseOdd(t *testing.T) {
	tests := []struct {
		name, in    string
		wantVendors int
	}{
		{"empty", "", 0},
		{"newlines", "\n\n\r\n\r\r", 0},
		{"tabs only", "\t\t\t\t\n\t", 0},
		{"device before any vendor", "\t2330  Orphan\n\t\t10de 16c1  Orphan\n", 0},
		{"prog-if before any class", "\t\t00  Orphan\n", 0},
		{"binary", "\x00\xff\xfe\t\x00\n\t\t\x80\x80  \xff\n", 0},
		{"vendor at end without newline", "10de  NVIDIA Corporation", 1},
		{"vendor cut short", "10de", 0},
		{"vendor cut after blank", "10de ", 0},
		{"CR in mid-line ends it", "10de  NVIDIA\rCorporation\n", 1},
		{"C alone", "C\nC \nC 0\nC 00\nC 00 \n", 0},
		{"long line", strings.Repeat("a", 1<<20) + "\n10de  NVIDIA\n", 1},
		{"invalid UTF-8 name", "10de  \xff\xfe\n", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := mustParse(t, tc.in)
			if got := len(db.vendors); got != tc.wantVendors {
				t.Errorf("%d vendors, want %d", got, tc.wantVendors)
			}
			if len(db.devices)+len(db.subsystems)+len(db.subclasses)+len(db.progIfs) != 0 {
				t.Errorf("unexpected entries: %+v", db)
			}
		})
	}
	if got, _ := mustParse(t, "10de  NVIDIA\rCorporation\n").Vendor(0x10de); got != "NVIDIA" {
		t.Errorf("CR: vendor = %q, want %q", got, "NVIDIA")
	}
}

func TestParseReadError(t *testing.T) {
	boom := errors.New("boom")
	if db, err := Parse(iotest.ErrReader(boom)); !errors.Is(err, boom) || db != nil {
		t.Errorf("Parse(failing reader) = %v, %v; want nil, %v", db, err, boom)
	}
	// A reader that hands out one byte at a time still yields the same DB.
	db, err := Parse(iotest.OneByteReader(strings.NewReader(sample)))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Subsystem(0x1a03, 0x2000, 0x15d9, 0x0832); got != "X10SRL-F" {
		t.Errorf("Subsystem = %q", got)
	}
}

func TestNilAndZeroDB(t *testing.T) {
	for _, db := range []*DB{nil, {}} {
		if _, ok := db.Vendor(0x10de); ok {
			t.Error("Vendor found")
		}
		if _, ok := db.Device(0x10de, 0x2330); ok {
			t.Error("Device found")
		}
		if _, ok := db.Subsystem(0x10de, 0x2330, 0x10de, 0x16c1); ok {
			t.Error("Subsystem found")
		}
		if _, ok := db.Class(0x030000); ok {
			t.Error("Class found")
		}
		if _, ok := db.Subclass(0x030000); ok {
			t.Error("Subclass found")
		}
	}
}

func TestNamesChain(t *testing.T) {
	old := mustParse(t, ""+
		"10de  Nvidia Corp (old)\n"+
		"\t2330  H100 (old)\n"+
		"\t\t10de 16c1  H100 SXM (old)\n"+
		"C 03  Display controller (old)\n"+
		"\t00  VGA compatible controller (old)\n"+
		"C 12  Processing accelerators (old)\n")
	fresh := mustParse(t, ""+
		"10de  NVIDIA Corporation\n"+
		"\t2330  GH100 [H100 SXM5 80GB]\n"+
		"\t\t10de 16c1  H100 SXM5 80GB\n"+
		"\t\t10de 16c2  Second\n"+
		"\t2bb5  GB202GL [RTX PRO 6000 Blackwell Server Edition]\n"+
		"1a03  ASPEED Technology, Inc.\n"+
		"C 03  Display controller\n"+
		"\t00  VGA compatible controller\n"+
		"\t\t00  VGA controller\n"+
		"\t02  3D controller\n"+
		"C 12  Processing accelerators\n"+
		"\t01  SDXI controller\n")

	tests := []struct {
		name  string
		names Names
		look  func(Names) string
		want  string
	}{
		{"first wins: vendor", Names{old, fresh}, func(n Names) string { return n.Vendor(0x10de) }, "Nvidia Corp (old)"},
		{"first wins: vendor, swapped", Names{fresh, old}, func(n Names) string { return n.Vendor(0x10de) }, "NVIDIA Corporation"},
		{"first wins: device", Names{old, fresh}, func(n Names) string { return n.Device(0x10de, 0x2330) }, "H100 (old)"},
		{"first wins: subsystem", Names{old, fresh}, func(n Names) string { return n.Subsystem(0x10de, 0x2330, 0x10de, 0x16c1) }, "H100 SXM (old)"},
		{"fallback: vendor", Names{old, fresh}, func(n Names) string { return n.Vendor(0x1a03) }, "ASPEED Technology, Inc."},
		{"fallback: device", Names{old, fresh}, func(n Names) string { return n.Device(0x10de, 0x2bb5) }, "GB202GL [RTX PRO 6000 Blackwell Server Edition]"},
		{"fallback: subsystem", Names{old, fresh}, func(n Names) string { return n.Subsystem(0x10de, 0x2330, 0x10de, 0x16c2) }, "Second"},
		{"fallback: class", Names{old, fresh}, func(n Names) string { return n.Class(0x030200) }, "3D controller"},
		// The most specific level wins, wherever in the chain it is.
		{"class: prog-if from fallback", Names{old, fresh}, func(n Names) string { return n.Class(0x030000) }, "VGA controller"},
		{"class: subclass from fallback", Names{old, fresh}, func(n Names) string { return n.Class(0x120100) }, "SDXI controller"},
		{"first wins: class level", Names{old, fresh}, func(n Names) string { return n.Class(0x120000) }, "Processing accelerators (old)"},
		{"first wins: subclass level", Names{old, fresh}, func(n Names) string { return n.Subclass(0x030000) }, "VGA compatible controller (old)"},
		{"first wins: class, unknown subclass", Names{old, fresh}, func(n Names) string { return n.Class(0x038000) }, "Display controller (old)"},
		{"most specific from fresh", Names{fresh, old}, func(n Names) string { return n.Class(0x030000) }, "VGA controller"},
		{"subclass", Names{fresh, old}, func(n Names) string { return n.Subclass(0x030000) }, "VGA compatible controller"},
		{"fallback: subclass", Names{old, fresh}, func(n Names) string { return n.Subclass(0x030200) }, "3D controller"},
		{"nil skipped", Names{nil, fresh, nil}, func(n Names) string { return n.Vendor(0x10de) }, "NVIDIA Corporation"},
		{"nil skipped: fallback", Names{old, nil, fresh}, func(n Names) string { return n.Device(0x10de, 0x2bb5) }, "GB202GL [RTX PRO 6000 Blackwell Server Edition]"},
		{"unknown", Names{old, fresh}, func(n Names) string { return n.Device(0x10de, 0xffff) }, ""},
		{"unknown subsystem", Names{old, fresh}, func(n Names) string { return n.Subsystem(0x10de, 0x2bb5, 0x10de, 0x16c1) }, ""},
		{"unknown class", Names{old, fresh}, func(n Names) string { return n.Class(0x070000) }, ""},
		{"all nil", Names{nil, nil}, func(n Names) string { return n.Vendor(0x10de) }, ""},
		{"empty chain", Names{}, func(n Names) string { return n.Class(0x030000) }, ""},
		{"nil chain", nil, func(n Names) string { return n.Subsystem(0x10de, 0x2330, 0x10de, 0x16c1) }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.look(tc.names); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// loaded is every name of a DB, parsed from its whole text, for the tests that count
// them.
func loaded(t testing.TB, db *DB) *DB {
	t.Helper()
	switch {
	case db.src == nil:
		return db
	case db.src.file == nil:
		return parse(db.src.text)
	}
	b := make([]byte, db.src.size)
	if _, err := db.src.file.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return parse(string(b))
}

func TestEmbedded(t *testing.T) {
	if Embedded() != Embedded() {
		t.Error("Embedded returns a different DB on the second call")
	}
	db := loaded(t, Embedded())

	devices := []struct {
		vendor, device uint16
		want           string
	}{
		{0x10de, 0x2bb1, "GB202GL [RTX PRO 6000 Blackwell Workstation Edition]"},
		{0x10de, 0x2bb5, "GB202GL [RTX PRO 6000 Blackwell Server Edition]"},
		{0x10de, 0x2330, "GH100 [H100 SXM5 80GB]"},
		{0x10de, 0x2335, "GH100 [H200 SXM 141GB]"},
		{0x10de, 0x233b, "GH100 [H200 NVL]"},
		{0x10de, 0x26b9, "AD102GL [L40S]"},
		{0x10de, 0x2b85, "GB202 [GeForce RTX 5090]"},
		{0x10de, 0x22e8, "GB202 High Definition Audio Controller"},
	}
	for _, tc := range devices {
		if got, ok := db.Device(tc.vendor, tc.device); got != tc.want || !ok {
			t.Errorf("Device(%04x, %04x) = %q, %v; want %q", tc.vendor, tc.device, got, ok, tc.want)
		}
	}

	if got, ok := db.Vendor(0x1a03); got != "ASPEED Technology, Inc." || !ok {
		t.Errorf("Vendor(1a03) = %q, %v", got, ok)
	}

	classes := []struct {
		class         uint32
		want, wantSub string
	}{
		{0x030000, "VGA controller", "VGA compatible controller"},
		{0x030200, "3D controller", "3D controller"},
		// Audio device has prog-ifs upstream: 00 is "HDA compatible".
		{0x040300, "HDA compatible", "Audio device"},
		{0x040380, "HDA compatible with vendor specific extensions", "Audio device"},
		{0x060400, "Normal decode", "PCI bridge"},
		{0x020000, "Ethernet controller", "Ethernet controller"},
		{0x010802, "NVM Express", "Non-Volatile memory controller"},
		{0x120000, "Processing accelerators", "Processing accelerators"},
	}
	for _, tc := range classes {
		if got, ok := db.Class(tc.class); got != tc.want || !ok {
			t.Errorf("Class(%06x) = %q, %v; want %q", tc.class, got, ok, tc.want)
		}
		if got, ok := db.Subclass(tc.class); got != tc.wantSub || !ok {
			t.Errorf("Subclass(%06x) = %q, %v; want %q", tc.class, got, ok, tc.wantSub)
		}
	}

	// The trimming keeps exactly the listed vendors, with or without
	// subsystem lines as documented.
	kept := map[uint16]bool{ // vendor -> subsystems kept
		0x10de: true, 0x1002: false, 0x1022: false, 0x8086: false,
		0x1a03: true, 0x15b3: true, 0x1000: true, 0x10b5: true, 0x1b36: true,
		0x1af4: true, 0x144d: true, 0x1344: true, 0x14e4: true, 0x1d0f: true, 0x1414: true,
	}
	for v := range db.vendors {
		if _, ok := kept[v]; !ok {
			t.Errorf("vendor %04x should have been trimmed", v)
		}
	}
	withSubs := map[uint16]int{}
	withDevices := map[uint16]int{}
	for k := range db.subsystems {
		withSubs[uint16(k>>48)]++
	}
	for k := range db.devices {
		withDevices[uint16(k>>16)]++
	}
	for v, subs := range kept {
		if _, ok := db.Vendor(v); !ok {
			t.Errorf("vendor %04x missing", v)
		}
		if withDevices[v] == 0 {
			t.Errorf("vendor %04x has no devices", v)
		}
		if !subs && withSubs[v] != 0 {
			t.Errorf("vendor %04x has %d subsystems, want none", v, withSubs[v])
		}
	}
	if withSubs[0x10de] < 1000 {
		t.Errorf("NVIDIA has %d subsystems; expected the complete list", withSubs[0x10de])
	}
	if len(db.classes) < 20 || len(db.subclasses) < 100 || len(db.progIfs) < 50 {
		t.Errorf("class list incomplete: %d classes, %d subclasses, %d prog-ifs",
			len(db.classes), len(db.subclasses), len(db.progIfs))
	}
}

func TestEmbeddedHeader(t *testing.T) {
	var header []string
	for _, l := range strings.Split(embedded, "\n") {
		if !strings.HasPrefix(l, "#") {
			break
		}
		header = append(header, l)
	}
	h := strings.Join(header, "\n")
	for _, want := range []string{
		"GNU General Public License",
		"(version 2 or higher) or the 3-clause BSD License",
		"Version:",
		"go run ./internal/cmd/pciids-trim",
		"10de  NVIDIA Corporation",
		"1414  Microsoft Corporation",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("header of the embedded pci.ids lacks %q", want)
		}
	}
	if n := len(embedded); n > 640<<10 {
		t.Errorf("embedded pci.ids is %d bytes; trim it", n)
	}
}

// checkCounts checks that the parser took every entry line of a pci.ids file, counted
// here without it.
func checkCounts(t *testing.T, data string, db *DB) {
	t.Helper()
	var nVendors, nDevices, nSubs, nClasses, nSubclasses, nProgIfs int
	class := false
	for _, l := range strings.Split(data, "\n") {
		switch {
		case l == "" || l[0] == '#':
		case strings.HasPrefix(l, "C "):
			class = true
			nClasses++
		case l[0] != '\t':
			class = false
			nVendors++
		case strings.HasPrefix(l, "\t\t") && class:
			nProgIfs++
		case strings.HasPrefix(l, "\t\t"):
			nSubs++
		case class:
			nSubclasses++
		default:
			nDevices++
		}
	}
	counts := []struct {
		name      string
		got, want int
	}{
		{"vendors", len(db.vendors), nVendors},
		{"devices", len(db.devices), nDevices},
		{"subsystems", len(db.subsystems), nSubs},
		{"classes", len(db.classes), nClasses},
		{"subclasses", len(db.subclasses), nSubclasses},
		{"prog-ifs", len(db.progIfs), nProgIfs},
	}
	for _, c := range counts {
		if c.got != c.want {
			t.Errorf("%s: parsed %d, file has %d lines", c.name, c.got, c.want)
		}
	}
}

// The parser takes every entry of the embedded copy, a real pci.ids cut down: none is
// skipped as malformed.
func TestEmbeddedCounts(t *testing.T) {
	checkCounts(t, embedded, loaded(t, Embedded()))
}

// TestUpstream checks the parser against a complete upstream pci.ids and that the
// embedded copy agrees with it. The upstream file is not in the repository: point
// PCIIDS_UPSTREAM at it to run the test, as README.md's Development section says.
func TestUpstream(t *testing.T) {
	path := os.Getenv("PCIIDS_UPSTREAM")
	if path == "" {
		t.Skip("PCIIDS_UPSTREAM not set: it needs the upstream pci.ids (see README.md, Development)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	up := mustParse(t, string(data))
	checkCounts(t, string(data), up)

	emb := loaded(t, Embedded())
	for k, v := range emb.vendors {
		if u := up.vendors[k]; u != v {
			t.Errorf("vendor %04x: embedded %q, upstream %q", k, v, u)
		}
	}
	for k, v := range emb.devices {
		if u := up.devices[k]; u != v {
			t.Errorf("device %08x: embedded %q, upstream %q", k, v, u)
		}
	}
	for k, v := range emb.subsystems {
		if u := up.subsystems[k]; u != v {
			t.Errorf("subsystem %016x: embedded %q, upstream %q", k, v, u)
		}
	}
	// Every device of a kept vendor, and every subsystem of NVIDIA, is kept.
	for k, v := range up.devices {
		if _, ok := emb.vendors[uint16(k>>16)]; ok && emb.devices[k] != v {
			t.Errorf("device %08x %q missing from the embedded copy", k, v)
		}
	}
	for k, v := range up.subsystems {
		if uint16(k>>48) == 0x10de && emb.subsystems[k] != v {
			t.Errorf("subsystem %016x %q missing from the embedded copy", k, v)
		}
	}
	if len(emb.classes) != len(up.classes) || len(emb.subclasses) != len(up.subclasses) || len(emb.progIfs) != len(up.progIfs) {
		t.Error("embedded class list differs from upstream")
	}
}

func TestSystemPaths(t *testing.T) {
	want := []string{"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids"}
	got := SystemPaths()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("SystemPaths() = %q, want %q", got, want)
	}
	got[0] = "changed"
	if SystemPaths()[0] != want[0] {
		t.Error("SystemPaths shares its slice with callers")
	}
}

func TestLoadFirst(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.ids")
	b := filepath.Join(dir, "b.ids")
	missing := filepath.Join(dir, "missing.ids")
	if err := os.WriteFile(a, []byte("10de  From A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("10de  From B\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A FIFO would hang a read that opened it; a file past the cap is refused before a
	// byte of it is read (a sparse one, so the test writes nothing); an empty file is a
	// file of no names; a link is followed, as distributions link pci.ids.
	fifo := filepath.Join(dir, "fifo.ids")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.ids")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, maxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.ids")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.ids")
	if err := os.Symlink(b, link); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		paths    []string
		wantPath string
		wantName string
		wantErr  bool
	}{
		{"none", []string{missing}, "", "", false},
		{"empty list", nil, "", "", false},
		{"first existing", []string{missing, a, b}, a, "From A", false},
		{"order", []string{b, a}, b, "From B", false},
		{"directory is an error", []string{missing, dir, a}, dir, "", true},
		{"FIFO is an error", []string{fifo, a}, fifo, "", true},
		{"past the cap is an error", []string{huge, a}, huge, "", true},
		{"empty", []string{empty, a}, empty, "", false},
		{"link followed", []string{link, a}, link, "From B", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, path, err := loadFirst(tc.paths)
			if (err != nil) != tc.wantErr || path != tc.wantPath {
				t.Fatalf("loadFirst = %v, %q, %v; want path %q, error %v", db, path, err, tc.wantPath, tc.wantErr)
			}
			if tc.wantErr || tc.wantPath == "" {
				if db != nil {
					t.Errorf("db = %v, want nil", db)
				}
				return
			}
			if got, _ := db.Vendor(0x10de); got != tc.wantName {
				t.Errorf("vendor = %q, want %q", got, tc.wantName)
			}
		})
	}
}

// The system's own pci.ids, where this machine has one, loads and goes before the
// embedded copy; a file that is there and does not load is this test's failure, not a
// note: Default would silently drop the names the administrator keeps up to date.
func TestLoadSystemAndDefault(t *testing.T) {
	db, path, err := LoadSystem()
	if err != nil {
		t.Fatalf("LoadSystem: %s exists but does not load: %v", path, err)
	}
	if path == "" {
		t.Logf("no pci.ids at %q on this machine: Default is the embedded copy alone", SystemPaths())
	}
	n := Default()
	if len(n) == 0 || n[len(n)-1] != Embedded() {
		t.Fatalf("Default() does not end with Embedded(): %v", n)
	}
	switch {
	case path == "":
		if db != nil || len(n) != 1 {
			t.Errorf("no system file, yet db = %v, Default has %d entries", db, len(n))
		}
	default:
		if db == nil || len(n) != 2 {
			t.Fatalf("system file %s: db = %v, Default has %d entries", path, db, len(n))
		}
		// Every pci.ids has NVIDIA: one that yields no vendor 10de was not understood.
		if _, ok := db.Vendor(0x10de); !ok {
			t.Errorf("system file %s parsed to %d vendors, none of them 10de", path, len(loaded(t, db).vendors))
		}
		if !strings.Contains(strings.Join(SystemPaths(), "\n"), path) {
			t.Errorf("LoadSystem path %q not in SystemPaths", path)
		}
	}
	if got := n.Device(0x10de, 0x2bb5); got == "" {
		t.Error("Default() does not know 10de:2bb5")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(sample)
	for _, s := range strings.SplitAfter(sample, "C 06") {
		f.Add(s)
	}
	head := embedded[:4096]
	f.Add(head)
	if i := strings.Index(embedded, "\nC 00"); i >= 0 {
		f.Add(embedded[i+1 : min(len(embedded), i+1+4096)])
	}
	if i := strings.Index(embedded, "\n10de"); i >= 0 {
		f.Add(embedded[i+1 : min(len(embedded), i+1+4096)])
	}
	f.Add("")
	f.Add("\t\t\n\r\x00")
	f.Fuzz(func(t *testing.T, in string) {
		db, err := Parse(strings.NewReader(in))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		// Look up every id the DB knows, and a few it should not.
		for k, v := range db.vendors {
			if got, ok := db.Vendor(k); !ok || got != v || v == "" {
				t.Fatalf("Vendor(%04x) = %q, %v; stored %q", k, got, ok, v)
			}
		}
		for k, v := range db.devices {
			if got, ok := db.Device(uint16(k>>16), uint16(k)); !ok || got != v || v == "" {
				t.Fatalf("Device(%08x) = %q, %v; stored %q", k, got, ok, v)
			}
			if _, ok := db.vendors[uint16(k>>16)]; !ok {
				t.Fatalf("device %08x without its vendor", k)
			}
		}
		for k, v := range db.subsystems {
			if got, ok := db.Subsystem(uint16(k>>48), uint16(k>>32), uint16(k>>16), uint16(k)); !ok || got != v || v == "" {
				t.Fatalf("Subsystem(%016x) = %q, %v; stored %q", k, got, ok, v)
			}
			if _, ok := db.devices[uint32(k>>32)]; !ok {
				t.Fatalf("subsystem %016x without its device", k)
			}
		}
		for k := range db.progIfs {
			if name, ok := db.Class(k); !ok || name == "" {
				t.Fatalf("Class(%06x) = %q, %v", k, name, ok)
			}
		}
		for _, c := range []uint32{0, 0x030000, 0x060400, 0xffffff, 0x1000000, 0xffffffff} {
			db.Class(c)
			db.Subclass(c)
		}
		n := Names{nil, db, Embedded()}
		n.Vendor(0x10de)
		n.Device(0x10de, 0x2bb5)
		n.Subsystem(0x10de, 0x2330, 0x10de, 0x16c1)
		n.Class(0x030000)
		n.Subclass(0x030000)
	})
}

func BenchmarkParseEmbedded(b *testing.B) {
	b.SetBytes(int64(len(embedded)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(strings.NewReader(embedded)); err != nil {
			b.Fatal(err)
		}
	}
}

// quirks is a text of what parse reads oddly: a vendor listed twice, CRs, comments,
// blank lines (one between a device and its subsystems), spaces before an entry, a bad top-level line with nested lines under it,
// classes in two places, ids in both cases, no newline at the end.
const quirks = "# comment\n10de  NVIDIA\r\n\t2bb1  GB202GL\n\t\t10de 204b  RTX PRO 6000\n\n\t# nested comment\n" +
	"\t2bb5  GB202GL\n\t# between a device and its subsystems\n\t  \r\n\t\t10de 204e  after a nested comment\n" +
	"\tzzzz  not a device\n\t\t10de 0001  under no device\n\t\t\t10de 0002  too deep\n" +
	"\t2Bb7  written in both cases\n\t\t10DE 204C  so is its subsystem\n" +
	"1a03  ASPEED\n\t1A2B  first, in upper case\n\t1a2b  then in lower case\n" +
	" 1022  spaced\n\t0002  under spaced\n\r\nzzzz  not a vendor\n\t0001  lost device\n" +
	"C 03  Display controller\n\t00  VGA compatible controller\n\t\t00  VGA controller\n" +
	"10de  NVIDIA again\n\t2bb1  second name\n\t2230  GA102GL\n\t\t10de 1459  RTX A6000\n" +
	"C zz  bad class\n\t01  lost subclass\nC 06  Bridge\n\t04  PCI bridge\n8086  Intel\n\t1234  last, no newline"

// asked is every id of a parsed DB, and the ids next to each (a bit flipped), which it
// mostly does not name: what a DB made otherwise must fillWanted as the parse does.
func asked(want *DB) *wanted {
	var w wanted
	for v := range want.vendors {
		w.vendor(v)
		w.vendor(v ^ 1)
		w.device(v, 0xfffe)
	}
	for k := range want.devices {
		v, d := uint16(k>>16), uint16(k)
		w.device(v, d)
		w.device(v, d^1)
		w.device(v, d^0x100)
		w.subsystem(v, d, 0, 0)
	}
	for k := range want.subsystems {
		w.subsystem(uint16(k>>48), uint16(k>>32), uint16(k>>16), uint16(k))
		w.subsystem(uint16(k>>48), uint16(k>>32), uint16(k>>16), uint16(k)^1)
	}
	for k := range want.progIfs {
		w.class(k)
		w.class(k ^ 1)
	}
	for k := range want.subclasses {
		w.class(uint32(k) << 8)
		w.class(uint32(k^1) << 8)
	}
	for k := range want.classes {
		w.class(uint32(k) << 16)
		w.class(uint32(k^1) << 16)
	}
	return &w
}

// sameAnswers checks that got answers every id that w asks as want does; every fifth
// of them with one lookup each, when one is set (a load of its own each, for a DB with a
// source).
func sameAnswers(t *testing.T, name string, want, got *DB, w *wanted, one bool) {
	t.Helper()
	i := 0
	try := func() bool { i++; return !one || i%5 == 0 }
	if one {
		// A new DB of the same source: the lookups are its first.
		got = withSource(got.src)
	}
	check := func(what string, k any, g, w string) {
		if g != w {
			t.Errorf("%s: %s %x: %q, want %q", name, what, k, g, w)
		}
	}
	for v := range w.vendors {
		if try() {
			g, _ := got.Vendor(v)
			check("vendor", v, g, want.vendors[v])
		}
	}
	for k := range w.devices {
		if try() {
			g, _ := got.Device(uint16(k>>16), uint16(k))
			check("device", k, g, want.devices[k])
		}
	}
	for k := range w.subsystems {
		if try() {
			g, _ := got.Subsystem(uint16(k>>48), uint16(k>>32), uint16(k>>16), uint16(k))
			check("subsystem", k, g, want.subsystems[k])
		}
	}
	for k := range w.progIfs {
		if try() {
			g, _ := got.Class(k)
			e, _ := want.Class(k)
			check("class", k, g, e)
			g, _ = got.Subclass(k)
			e, _ = want.Subclass(k)
			check("subclass", k, g, e)
		}
	}
}

// A DB with a source answers every lookup as the full parse does: a text in memory and
// a file; each after one load of everything, and with a load per lookup (the file only
// for the quirks: a load is a pass over the whole text).
func TestLoadsEqualParse(t *testing.T) {
	texts := map[string]string{"embedded": embedded, "quirks": quirks}
	for _, p := range SystemPaths() {
		if b, err := os.ReadFile(p); err == nil {
			texts[p] = string(b)
		}
	}
	dir := t.TempDir()
	for name, text := range texts {
		want := parse(text)
		w := asked(want)
		path := filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer file.src.file.Close()
		dbs := map[string]*DB{"in memory": inMemory(text), "file": file}
		if name == "embedded" {
			dbs["Embedded"] = Embedded()
		}
		for form, db := range dbs {
			label := name + ", " + form
			db.mu.Lock()
			db.load(w)
			db.mu.Unlock()
			sameAnswers(t, label, want, db, w, false)
			if name == "quirks" || form == "in memory" {
				sameAnswers(t, label+", one by one", want, db, w, true)
			}
		}
		if name == "quirks" {
			if n, _ := inMemory(text).Device(0x10de, 0x2bb1); n != "GB202GL" {
				t.Errorf("quirks: the first name of a device listed twice is %q", n)
			}
			if len(want.devices) != 6 || len(want.classes) != 2 {
				t.Errorf("quirks: parse found %d devices, %d classes: the quirks are not what the test means", len(want.devices), len(want.classes))
			}
		}
	}
}

// A line longer than the buffer a load reads through is read whole, wherever it lies.
func TestLongLines(t *testing.T) {
	long := strings.Repeat("x", 3*chunkBytes)
	text := "# " + long + "\n10de  NVIDIA " + long + "\n\t2bb1  GB202GL\n\t\t10de 204b  " + long + "\n1a03  ASPEED\n\t2000  ASPEED Graphics Family"
	db := inMemory(text)
	for _, c := range []struct{ got, want string }{
		{Names{db}.Vendor(0x10de), "NVIDIA " + long},
		{Names{db}.Device(0x10de, 0x2bb1), "GB202GL"},
		{Names{db}.Subsystem(0x10de, 0x2bb1, 0x10de, 0x204b), long},
		{Names{db}.Device(0x1a03, 0x2000), "ASPEED Graphics Family"},
	} {
		if c.got != c.want {
			t.Errorf("got %d bytes %.20q, want %d bytes %.20q", len(c.got), c.got, len(c.want), c.want)
		}
	}
}

// Names.Load asks each DB of a chain only what the ones before it do not name, and the
// lookups after it are answered from what it loaded.
func TestNamesLoad(t *testing.T) {
	first := inMemory("10de  NVIDIA\n\t2bb1  GB202GL\nC 03  Display controller\n\t00  VGA compatible controller\n")
	second := inMemory("10de  NVIDIA (second)\n\t2bb1  (second)\n\t2bb5  GB202GL server\n1a03  ASPEED\n\t2000  ASPEED Graphics Family\n" +
		"C 03  Display (second)\n\t02  3D controller\n")
	n := Names{first, nil, second}
	n.Load([]DeviceID{{0x10de, 0x2bb1}, {0x10de, 0x2bb5}, {0x1a03, 0x2000}}, []uint32{0x030000, 0x030200})
	for _, c := range []struct {
		db   *DB
		what string
		got  int
		want int
	}{
		{first, "vendors", len(first.vendors), 2},    // 10de, 1a03
		{first, "devices", len(first.devices), 3},    // all three
		{second, "vendors", len(second.vendors), 1},  // 1a03 only
		{second, "devices", len(second.devices), 2},  // 2bb5 and 2000
		{second, "prog-ifs", len(second.progIfs), 2}, // classes go to every DB
	} {
		if c.got != c.want {
			t.Errorf("%p: %d %s loaded, want %d", c.db, c.got, c.what, c.want)
		}
	}
	for _, c := range []struct{ got, want string }{
		{n.Vendor(0x10de), "NVIDIA"},
		{n.Device(0x10de, 0x2bb5), "GB202GL server"},
		{n.Vendor(0x1a03), "ASPEED"},
		{n.Subclass(0x030000), "VGA compatible controller"},
		{n.Subclass(0x030200), "3D controller"},
		{n.Class(0x038000), "Display controller"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// The cost of the first lookups in the embedded copy: a full parse (what every run
// once paid), and the pass of a load that keeps two devices.
func BenchmarkEmbeddedParse(b *testing.B) {
	for b.Loop() {
		parse(embedded)
	}
}

func BenchmarkEmbeddedLookups(b *testing.B) {
	for b.Loop() {
		db := inMemory(embedded)
		db.Device(0x10de, 0x2bb1)
		db.Device(0x1022, 0x14ab)
	}
}

// A host's file read through Load answers as its parse does; one that
// shrank since it was opened answers with what is left, and one that grew with what it
// held when it was opened: a load reads the bytes it was opened with, no more.
func TestFileLoads(t *testing.T) {
	const text = "10de  NVIDIA\n\t2bb1  GB202GL\n1a03  ASPEED\n\t2000  ASPEED Graphics Family\n" +
		"C 03  Display controller\n\t00  VGA compatible controller\n"
	devices := []DeviceID{{0x10de, 0x2bb1}, {0x1a03, 0x2000}}
	for _, tc := range []struct {
		name  string
		after string // the file's text once opened
		want  []string
	}{
		{"unchanged", text, []string{"NVIDIA", "GB202GL", "ASPEED", "ASPEED Graphics Family", "VGA compatible controller"}},
		{"shrank", text[:strings.Index(text, "1a03")], []string{"NVIDIA", "GB202GL", "", "", ""}},
		{"grew", text + "10ee  Xilinx\n", []string{"NVIDIA", "GB202GL", "ASPEED", "ASPEED Graphics Family", "VGA compatible controller"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pci.ids")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			db, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.src.file.Close()
			if err := os.WriteFile(path, []byte(tc.after), 0o644); err != nil {
				t.Fatal(err)
			}
			n := Names{db}
			n.Load(devices, []uint32{0x030000})
			got := []string{n.Vendor(0x10de), n.Device(0x10de, 0x2bb1), n.Vendor(0x1a03), n.Device(0x1a03, 0x2000), n.Subclass(0x030000)}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if v := n.Vendor(0x10ee); v != "" {
				t.Errorf("a vendor past the size the file was opened with: %q", v)
			}
		})
	}
}

// The sample host's devices and classes, as a scan of it asks them.
var (
	sampleDevices = []DeviceID{{0x1022, 0x153a}, {0x1022, 0x153b}, {0x1022, 0x153c}, {0x1022, 0x153d}, {0x1022, 0x153e},
		{0x1022, 0x1555}, {0x1022, 0x1556}, {0x1022, 0x1557}, {0x1022, 0x156e}, {0x1022, 0x7901}, {0x10de, 0x22e8},
		{0x10de, 0x2bb1}, {0x144d, 0xa80a}, {0x15b3, 0x1021}, {0x1a03, 0x1150}, {0x1a03, 0x2000}, {0x8086, 0x15ff}}
	sampleClasses = []uint32{0x060400, 0x030200, 0x040300, 0x020000, 0x010802, 0x060000, 0x080600, 0x130000, 0x0c0330}
)

// systemFile is the path of the host's pci.ids, or a skip.
func systemFile(b *testing.B) string {
	for _, p := range SystemPaths() {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	b.Skip("no pci.ids on this machine")
	return ""
}

// A host's full pci.ids (skipped without one): the load of the sample host's names, a
// pass over the whole file.
func BenchmarkSystemFileLoad(b *testing.B) {
	path := systemFile(b)
	for b.Loop() {
		db, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		Names{db}.Load(sampleDevices, sampleClasses)
		db.src.file.Close()
	}
}

// The embedded copy: the load of what the host's file does not name of the sample host.
func BenchmarkEmbeddedLoad(b *testing.B) {
	for b.Loop() {
		Names{inMemory(embedded)}.Load([]DeviceID{{0x10de, 0x2bb1}, {0x1022, 0x153a}}, sampleClasses)
	}
}
