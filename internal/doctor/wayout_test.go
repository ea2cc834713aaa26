package doctor

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// Without a kernel log, the eleven checks that read it saw less for one reason: the
// text says so once, naming them, where it printed eleven identical lines.
func TestPartialNotesCollapse(t *testing.T) {
	h, _ := samplehost.Open()
	inv, _ := inventory.Build(h, nil)
	e, err := NewEnv(h, inv, nil, errors.New("permission denied"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Partial) != len(logChecks) {
		t.Fatalf("partial %v, want the %d log checks", r.Partial, len(logChecks))
	}
	var b bytes.Buffer
	r.WriteText(&b, h.Root())
	text := b.String()
	if n := strings.Count(text, "partial: "); n != 1 {
		t.Errorf("%d partial notes, want 1:\n%s", n, text)
	}
	for _, want := range []string{"partial: 11 checks saw less than they need (aer-errors, bar-unassigned,", "the kernel log could not be read: permission denied"} {
		if !strings.Contains(text, want) {
			t.Errorf("the note lacks %q:\n%s", want, text)
		}
	}
	for _, id := range logChecks {
		if !strings.Contains(text[strings.Index(text, "partial: "):], id) {
			t.Errorf("the note does not name %s", id)
		}
	}
}
