package metrics

import (
	"math"
	"strings"
	"testing"
)

// The text format as Prometheus's parser reads it: HELP and TYPE before the samples,
// labels in the family's order, escapes in help texts and label values, a family
// without samples left out.
func TestWriteText(t *testing.T) {
	s := &Set{}
	f := s.family("x_info", Gauge, "A help with a \\ and a\nsecond line.", "b", "a")
	f.set(1, `say "hi"`, "back\\slash")
	f.set(1, "line\nfeed", "")
	s.family("x_empty", Gauge, "Nothing.")
	c := s.family("x_total", Counter, "Counted.", "kind")
	c.add(2, "p")
	c.add(3, "p")
	c.add(1, "q")
	s.family("x_seconds", Gauge, "Time.").set(0.25)
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP x_info A help with a \\ and a\nsecond line.
# TYPE x_info gauge
x_info{b="say \"hi\"",a="back\\slash"} 1
x_info{b="line\nfeed",a=""} 1
# HELP x_total Counted.
# TYPE x_total counter
x_total{kind="p"} 5
x_total{kind="q"} 1
# HELP x_seconds Time.
# TYPE x_seconds gauge
x_seconds 0.25
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// The same label values make one sample: set replaces, add sums. Two samples of one
// label set would make the file invalid, and node_exporter would drop all of it.
func TestOneSamplePerLabelSet(t *testing.T) {
	s := &Set{}
	f := s.family("y", Gauge, "Y.", "a")
	f.set(1, "v")
	f.set(7, "v")
	f.add(2, "w")
	f.add(2, "w")
	if len(f.Samples) != 2 || f.Samples[0].Value != 7 || f.Samples[1].Value != 4 {
		t.Errorf("samples %+v", f.Samples)
	}
}

// A value read from the host becomes a label value the parser takes: invalid UTF-8
// replaced, a long one cut between characters.
func TestLabelValuesFromTheHost(t *testing.T) {
	s := &Set{}
	f := s.family("z", Gauge, "Z.", "name")
	f.set(1, "py\xffthon")
	f.set(1, strings.Repeat("é", 100))
	if got := f.Samples[0].Labels["name"]; got != "py\uFFFDthon" {
		t.Errorf("invalid UTF-8 kept as %q", got)
	}
	got := f.Samples[1].Labels["name"]
	if len(got) > maxLabelValue || len(got) < maxLabelValue-1 || !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("a 200-byte value became %d bytes: %q", len(got), got)
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{
		0:              "0",
		16:             "16",
		-3:             "-3",
		32e9:           "32000000000",
		0.013:          "0.013",
		1796486526.4:   "1796486526.4",
		1e20:           "1e+20",
		0.00001:        "1e-05",
		math.Inf(1):    "+Inf",
		math.Inf(-1):   "-Inf",
		math.MaxUint32: "4294967295",
	} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
	if got := formatValue(math.NaN()); got != "NaN" {
		t.Errorf("NaN: %q", got)
	}
}
