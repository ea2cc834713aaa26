package table

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// holdersTable is inventory's shape: two columns to keep, two to drop, a name to shorten
// and holders to wrap.
func holdersTable() *Table {
	t := New(
		Column{Header: "ADDRESS"},
		Column{Header: "MODEL", Fit: Shorten, Min: 10},
		Column{Header: "ROOT PORT", Drop: 2},
		Column{Header: "LINK", Drop: 1},
		Column{Header: "DRIVER"},
		Column{Header: "HELD BY", Fit: Wrap, Sep: "; "},
	)
	t.Add("0000:01:00.0", "RTX PRO 6000 Blackwell Workstation Edition", "0000:00:01.1", "32GT/s x16", "nvidia", "nvidia-persistenced[2211]; python3[48213] in CT 129")
	t.Add("0000:81:00.0", "RTX PRO 6000 Blackwell Workstation Edition", "0000:80:01.1", "32GT/s x16", "vfio-pci", "-")
	return t
}

func write(t *testing.T, tb *Table, width int) []string {
	t.Helper()
	var b strings.Builder
	if err := tb.Write(&b, width); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func maxLen(lines []string) int {
	m := 0
	for _, l := range lines {
		m = max(m, Len(l))
	}
	return m
}

func TestWideShowsEverythingWhole(t *testing.T) {
	lines := write(t, holdersTable(), Wide)
	for _, want := range []string{"ROOT PORT", "LINK", "RTX PRO 6000 Blackwell Workstation Edition", "nvidia-persistenced[2211]; python3[48213] in CT 129"} {
		if !strings.Contains(strings.Join(lines, "\n"), want) {
			t.Errorf("wide table lacks %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	if len(lines) != 3 {
		t.Errorf("wide table has %d lines, want a header and 2 rows", len(lines))
	}
}

// A width that holds every column prints the table as Wide does.
func TestFitsWhole(t *testing.T) {
	wide := write(t, holdersTable(), Wide)
	if got := write(t, holdersTable(), maxLen(wide)); strings.Join(got, "\n") != strings.Join(wide, "\n") {
		t.Errorf("at its own width the table changed:\n%s", strings.Join(got, "\n"))
	}
}

// The rule, column by column: LINK (Drop 1) goes before ROOT PORT (Drop 2); names are
// shortened only once both are gone; the holders wrap at "; ", whole.
func TestRule(t *testing.T) {
	wide := maxLen(write(t, holdersTable(), Wide))
	shown, _ := holdersTable().Layout(wide - 1)
	if got := headers(holdersTable(), shown); got != "ADDRESS MODEL ROOT PORT DRIVER HELD BY" {
		t.Errorf("one column short of the whole: %s, want LINK dropped first", got)
	}
	for _, width := range []int{100, 80, 70} {
		lines := write(t, holdersTable(), width)
		text := strings.Join(lines, "\n")
		if m := maxLen(lines); m > width {
			t.Errorf("at %d the table is %d wide:\n%s", width, m, text)
		}
		shown, widths := holdersTable().Layout(width)
		if got := headers(holdersTable(), shown); got != "ADDRESS MODEL DRIVER HELD BY" {
			t.Errorf("at %d the columns are %s", width, got)
		}
		for _, want := range []string{"0000:01:00.0", "nvidia-persistenced[2211];", "python3[48213] in CT 129", "vfio-pci"} {
			if !strings.Contains(text, want) {
				t.Errorf("at %d the table lacks %q:\n%s", width, want, text)
			}
		}
		if widths[1] < 10 {
			t.Errorf("at %d MODEL is %d wide, under its Min", width, widths[1])
		}
		for _, l := range lines {
			if strings.HasSuffix(l, " ") {
				t.Errorf("line ends in a space: %q", l)
			}
		}
	}
	// At 80 the model is cut at a word, its column no wider than the cut.
	if text := strings.Join(write(t, holdersTable(), 80), "\n"); !strings.Contains(text, "RTX PRO 6000 Blackwell…") {
		t.Errorf("model not cut at a word:\n%s", text)
	}
	// Narrower than the columns to keep at their minimum: nothing more goes, the table
	// is printed at that minimum.
	shown, widths := holdersTable().Layout(20)
	if got := headers(holdersTable(), shown); got != "ADDRESS MODEL DRIVER HELD BY" || widths[1] != 10 || widths[3] != Len("nvidia-persistenced[2211];") {
		t.Errorf("at 20: %s %v", got, widths)
	}
}

func headers(t *Table, shown []int) string {
	var h []string
	for _, i := range shown {
		h = append(h, t.Columns[i].Header)
	}
	return strings.Join(h, " ")
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"RTX PRO 6000 Blackwell Workstation Edition", 100, "RTX PRO 6000 Blackwell Workstation Edition"},
		{"RTX PRO 6000 Blackwell Workstation Edition", 23, "RTX PRO 6000 Blackwell…"},
		{"RTX PRO 6000 Blackwell Workstation Edition", 20, "RTX PRO 6000 Blackw…"},
		{"RTX PRO 6000 Blackwell Workstation Edition", 26, "RTX PRO 6000 Blackwell…"},
		{"GB202 High Definition Audio Controller", 24, "GB202 High Definition…"},
		{"GB202 High Definition Audio Controller", 20, "GB202 High Definiti…"},
		{"abcdefghij", 5, "abcd…"},
	} {
		if got := Cut(c.in, c.n); got != c.want || Len(got) > c.n {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestWrapText(t *testing.T) {
	text := "VM 171 on kpro7 takes 3 devices of mapping pro6000, which has 2 entries on kpro7: it cannot start there"
	lines := WrapText(text, 40, "  kind: ", "    ")
	if maxLen(lines) > 40 || !strings.HasPrefix(lines[0], "  kind: VM") || !strings.HasPrefix(lines[1], "    ") {
		t.Errorf("wrapped:\n%s", strings.Join(lines, "\n"))
	}
	if got := strings.Join(strings.Fields(strings.Join(lines, " ")), " "); got != "kind: "+text {
		t.Errorf("wrapping lost words: %q", got)
	}
	if got := WrapText(text, Wide, "", ""); len(got) != 1 {
		t.Errorf("Wide wrapped: %q", got)
	}
}

func TestWidth(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "COLUMNS" {
				return v
			}
			return ""
		}
	}
	// A file is no terminal: $COLUMNS, else Default.
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		columns string
		want    int
	}{{"132", 132}, {"", Default}, {"wide", Default}, {"-5", Default}} {
		if got := Width(f, env(c.columns)); got != c.want {
			t.Errorf("COLUMNS=%q: width %d, want %d", c.columns, got, c.want)
		}
		if got := Width(&strings.Builder{}, env(c.columns)); got != c.want {
			t.Errorf("COLUMNS=%q into a buffer: width %d, want %d", c.columns, got, c.want)
		}
	}
}
