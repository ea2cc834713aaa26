package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The metric types gpusplit writes. An info metric is a gauge whose value is 1 and
// whose labels are the facts, as the text format has no type of its own for it.
const (
	Gauge   = "gauge"
	Counter = "counter"
)

// Set is one collection: metric families in the order they were added, each written
// whole, and what could not be collected.
type Set struct {
	Families []*Family `json:"families"`
	// Warnings say what could not be read and why; the metrics count them too
	// (gpusplit_collect_errors, gpusplit_collect_left_out).
	Warnings []string `json:"warnings"`
	// Textfile is the file WriteTextfile wrote the set to; "" until it does.
	Textfile string `json:"textfile"`
}

// Family is one metric: its name, help, type, and a sample per label set.
type Family struct {
	Name    string   `json:"name"`
	Help    string   `json:"help"`
	Type    string   `json:"type"`
	Samples []Sample `json:"samples"`

	// labels are the label names each sample gives values to, in order.
	labels []string
	// index finds the sample of a label set, so that one is never written twice.
	index map[string]int
}

// Sample is one value of a family, with its labels' values.
type Sample struct {
	Labels map[string]string `json:"labels"`
	Value  float64           `json:"value"`
}

// family adds a family to the set, with the names of its labels.
func (s *Set) family(name, typ, help string, labels ...string) *Family {
	f := &Family{Name: name, Help: help, Type: typ, Samples: []Sample{}, labels: labels, index: map[string]int{}}
	s.Families = append(s.Families, f)
	return f
}

// Family returns the family of a name; nil when the set has none.
func (s *Set) Family(name string) *Family {
	for _, f := range s.Families {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// set gives the sample of the label values (one per label name, in order) the value v,
// replacing an earlier one of the same values.
func (f *Family) set(v float64, values ...string) { f.sample(values).Value = v }

// add adds v to the sample of the label values: counts of things alike, such as two
// processes of one name holding a GPU, make one sample.
func (f *Family) add(v float64, values ...string) { f.sample(values).Value += v }

func (f *Family) sample(values []string) *Sample {
	if len(values) != len(f.labels) {
		// A programming error; the metric stays well formed all the same.
		values = append(slices.Clone(values), make([]string, max(0, len(f.labels)-len(values)))...)[:len(f.labels)]
	}
	values = slices.Clone(values)
	for i, v := range values {
		values[i] = labelValue(v)
	}
	key := strings.Join(values, "\x00")
	if i, ok := f.index[key]; ok {
		return &f.Samples[i]
	}
	labels := make(map[string]string, len(values))
	for i, name := range f.labels {
		labels[name] = values[i]
	}
	f.index[key] = len(f.Samples)
	f.Samples = append(f.Samples, Sample{Labels: labels})
	return &f.Samples[len(f.Samples)-1]
}

// WriteText writes the set in Prometheus's text exposition format (version 0.0.4), which
// node_exporter's textfile collector reads: each family's HELP and TYPE, then its
// samples, labels in the order the family names them. A family without samples is left
// out, since its TYPE alone says nothing. No sample carries a timestamp: the textfile
// collector refuses those.
func (s *Set) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, f := range s.Families {
		if len(f.Samples) == 0 {
			continue
		}
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", f.Name, escapeHelp(f.Help), f.Name, f.Type)
		for _, smp := range f.Samples {
			bw.WriteString(f.Name)
			if len(f.labels) > 0 {
				bw.WriteByte('{')
				for i, name := range f.labels {
					if i > 0 {
						bw.WriteByte(',')
					}
					bw.WriteString(name)
					bw.WriteString(`="`)
					bw.WriteString(escapeValue(smp.Labels[name]))
					bw.WriteByte('"')
				}
				bw.WriteByte('}')
			}
			bw.WriteByte(' ')
			bw.WriteString(formatValue(smp.Value))
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

// escapeHelp escapes a help text as the format asks: a backslash and a line feed.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

// maxLabelValue bounds a label value: a program's name or a mount point comes from the
// host, and a series is stored with its labels on every scrape.
const maxLabelValue = 128

// labelValue makes a value read from the host fit to be a label's: valid UTF-8, which
// the format requires (a process names itself with any bytes), and at most
// maxLabelValue bytes, cut between characters.
func labelValue(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxLabelValue {
		return s
	}
	cut := maxLabelValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// escapeValue escapes a label value: a backslash, a double quote and a line feed.
func escapeValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// formatValue writes a value as Go's ParseFloat reads it back, without an exponent where
// one is not needed, so that a person reads counts and timestamps as they are.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10)
	case math.Abs(v) >= 1e-4 && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', -1, 64) // a timestamp, a duration
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
