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

// A --kernel-log file with no kernel log record is refused in two lines that say what a
// record looks like and how to capture one; each form of a kernel log is taken.
func TestCheckLogFile(t *testing.T) {
	for _, c := range []struct {
		name, log string
		refused   bool
	}{
		{"junk", "hello world\nthis is no log\n2025-09-21T09:59:59 app: started\n", true},
		{"empty", "", true},
		{"dmesg", "[    2.831115] pci 0000:01:00.0: [10de:2bb1] type 00 class 0x030000\n", false},
		{"kmsg", "6,1205,2831115,-;pci 0000:01:00.0: [10de:2bb1] type 00 class 0x030000\n", false},
		{"journal", "Sep 21 09:59:59 kpro6 kernel: nvidia 0000:01:00.0: enabling device\n", false},
		{"journalctl -o cat", "Linux version 6.8.12-4-pve\nKernel command line: BOOT_IMAGE=/boot/vmlinuz ro\n", false},
		{"a pasted Xid", "NVRM: Xid (PCI:0000:81:00): 79, GPU has fallen off the bus.\n", false},
		{"a pasted device line", "vfio-pci 0000:81:00.0: not ready 65535ms after FLR; giving up\n", false},
	} {
		f, err := CollectLog(strings.NewReader(c.log))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckLogFile("k.log", f)
		if (err != nil) != c.refused {
			t.Errorf("%s: %v, refused %v", c.name, err, c.refused)
			continue
		}
		if err != nil {
			msg := err.Error()
			if strings.Count(msg, "\n") > 1 || !strings.Contains(msg, "journalctl -k") || !strings.Contains(msg, "dmesg") || !strings.Contains(msg, "k.log") {
				t.Errorf("%s: the refusal does not say the way out in two lines:\n%s", c.name, msg)
			}
		}
	}
}
