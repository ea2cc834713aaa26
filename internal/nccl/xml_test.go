package nccl

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

const minimal = `<system version="1">
  <cpu numaid="0">
    <pci busid="0000:00:16.0"/>
  </cpu>
</system>
`

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
	}{
		{"prolog", "<?xml version=\"1.0\"?>\n" + minimal, "XML declaration"},
		{"tab indent", strings.Replace(minimal, "  <cpu", "\t<cpu", 1), "tab"},
		{"tab in tag", strings.Replace(minimal, `<cpu numaid`, "<cpu\tnumaid", 1), "tab"},
		{"newline in tag", strings.Replace(minimal, `<cpu numaid="0">`, "<cpu\nnumaid=\"0\">", 1), "newline inside a tag"},
		{"newline before >", strings.Replace(minimal, `<cpu numaid="0">`, "<cpu numaid=\"0\"\n>", 1), "newline inside a tag"},
		{"single quotes", strings.Replace(minimal, `numaid="0"`, `numaid='0'`, 1), "single-quoted"},
		{"unquoted", strings.Replace(minimal, `numaid="0"`, `numaid=0`, 1), "double quote"},
		{"double space", strings.Replace(minimal, `<cpu numaid`, `<cpu  numaid`, 1), "two spaces"},
		{"space slash", strings.Replace(minimal, `"0000:00:16.0"/>`, `"0000:00:16.0" />`, 1), "space before"},
		{"version 2", strings.Replace(minimal, `version="1"`, `version="2"`, 1), "only version 1"},
		{"no version", strings.Replace(minimal, ` version="1"`, ``, 1), "only version 1"},
		{"mismatch", strings.Replace(minimal, `</cpu>`, `</pci>`, 1), "</pci> closes <cpu>"},
		{"unclosed", strings.TrimSuffix(minimal, "</system>\n"), "<system> is not closed"},
		{"unknown element", strings.Replace(minimal, `<pci busid`, `<gpu dev="0"/><pci busid`, 1), "NCCL ignores <gpu> in <cpu>"},
		{"upper-case busid", strings.Replace(minimal, `0000:00:16.0`, `0000:00:1A.0`, 1), "lower-case PCI address"},
		{"short busid", strings.Replace(minimal, `0000:00:16.0`, `00:16.0`, 1), "lower-case PCI address"},
		{"no busid", strings.Replace(minimal, `<pci busid="0000:00:16.0"/>`, `<pci class="0x030200"/>`, 1), "<pci> without busid"},
		{"no numaid", strings.Replace(minimal, `<cpu numaid="0">`, `<cpu arch="x86_64">`, 1), "<cpu> without numaid"},
		{"bad arch", strings.Replace(minimal, `<cpu numaid="0">`, `<cpu numaid="0" arch="amd64">`, 1), "x86_64, arm64 or ppc64"},
		{"bad affinity", strings.Replace(minimal, `<cpu numaid="0">`, `<cpu numaid="0" affinity="0-15">`, 1), "cpumap"},
		{"unknown speed", strings.Replace(minimal, `<pci busid="0000:00:16.0"/>`, `<pci busid="0000:00:16.0" link_speed="16.0 GT/s"/>`, 1), "8 GT/s"},
		{"repeated", strings.Replace(minimal, `<cpu numaid="0">`, `<cpu numaid="0" numaid="1">`, 1), "repeated"},
		{"text", strings.Replace(minimal, "  <cpu", "hello <cpu", 1), "no text between elements"},
		{"two systems", minimal + minimal, "more than one <system>"},
		{"empty", "", "no <system>"},
		{"long value", strings.Replace(minimal, `<cpu numaid="0">`, `<cpu numaid="0" name="`+strings.Repeat("x", 254)+`">`, 1), "longer than 253"},
		{"unterminated comment", "<!-- x\n" + minimal, "unterminated comment"},
		{"stray close", "</system>", "without an element"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", c.in)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to say %q", err, c.want)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("<system version=\"1\">\n  <cpu numaid=\"0\">\n")
	for i := range MaxNodes - 2 {
		b.WriteString("    <pci busid=\"0000:" + hex2(i/32) + ":" + hex2(i%32) + ".0\"/>\n")
	}
	b.WriteString("  </cpu>\n</system>\n")
	if _, err := Parse([]byte(b.String())); err != nil {
		t.Fatalf("%d elements: %v", MaxNodes, err)
	}
	over := strings.Replace(b.String(), "  </cpu>", "    <pci busid=\"0000:ff:00.0\"/>\n  </cpu>", 1)
	if _, err := Parse([]byte(over)); err == nil || !strings.Contains(err.Error(), "limited to 256 nodes") {
		t.Errorf("%d elements: err = %v, want the node limit", MaxNodes+1, err)
	}
	attrs := `<cpu numaid="0"`
	for i := range MaxAttrs {
		attrs += " a" + hex2(i) + `="x"`
	}
	if _, err := Parse([]byte(strings.Replace(minimal, `<cpu numaid="0"`, attrs, 1))); err == nil || !strings.Contains(err.Error(), "more than 16 attributes") {
		t.Errorf("17 attributes: err = %v", err)
	}
}

func hex2(i int) string {
	return string("0123456789abcdef"[i/16%16]) + string("0123456789abcdef"[i%16])
}

// The dumps NCCL wrote read back and write out byte for byte: Write is NCCL's format.
func TestRoundTripNCCLDumps(t *testing.T) {
	for _, f := range []string{"x1-kvm-4xa800.xml", "x2-azure-ncv4.xml", "x3-aws-g5-minimal.xml"} {
		data, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		n, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		_, body, _ := bytes.Cut(data, []byte("-->\n"))
		if got := Marshal(n); !bytes.Equal(got, body) {
			t.Errorf("%s written back:\n%s\nwant:\n%s", f, got, body)
		}
	}
}

func TestParseKeepsComments(t *testing.T) {
	in := "<!-- made by hand -->\n<system version=\"1\"><!-- a note --><cpu numaid=\"1\"/></system>"
	n, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Children) != 1 || n.Children[0].Name != "cpu" {
		t.Fatalf("got %s", Marshal(n))
	}
}

func TestLinkSpeed(t *testing.T) {
	for _, c := range []struct {
		s     string
		speed int
		known bool
	}{
		{"32.0 GT/s PCIe", 240, true},
		{"2.5 GT/s PCIe", 15, true}, // matches "2.5 GT/s" first, the same value
		{"16 GT/s", 120, true},
		{"16.0 GT/s", 60, false}, // NVML's fallback string is not in NCCL's table
		{"Unknown", 60, false},
		{"", 60, false},
	} {
		speed, known := LinkSpeed(c.s)
		if speed != c.speed || known != c.known {
			t.Errorf("LinkSpeed(%q) = %d, %v; want %d, %v", c.s, speed, known, c.speed, c.known)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"x1-kvm-4xa800.xml", "x2-azure-ncv4.xml", "x3-aws-g5-minimal.xml"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(minimal))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := Parse(data)
		if err != nil {
			return
		}
		// What Parse accepts, Write writes back into something Parse reads the same.
		out := Marshal(n)
		m, err := Parse(out)
		if err != nil {
			t.Fatalf("written form does not parse: %v\n%s", err, out)
		}
		if !bytes.Equal(Marshal(m), out) {
			t.Fatalf("not stable:\n%s\n%s", out, Marshal(m))
		}
	})
}
