package hook

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// A phase Proxmox does not call, and a deadline out of bounds, are refused before
// anything is read.
func TestRunRefusesBadInput(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		phase    string
		deadline string
		want     string
	}{
		{"start", "", `phase "start"`},
		{PreStart, "-1s", "deadline -1s"},
		{PreStart, "31m", "up to 30m0s"},
	} {
		conf := Config{H: h}
		if c.deadline != "" {
			conf.Deadline = mustDuration(t, c.deadline)
		}
		if _, err := Run(context.Background(), conf, 131, c.phase); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: err = %v, want %q", c.phase, c.deadline, err, c.want)
		}
	}
	// The phases that do nothing say so, on the sample host's VM 131.
	r, err := Run(context.Background(), Config{H: h}, 131, PostStart)
	if err != nil || len(r.Lines) != 1 || r.Lines[0] != "gpusplit hook 131: nothing to do at post-start" || r.Kind != "vm" {
		t.Errorf("post-start: %v %+v", err, r)
	}
}

// A start after a VM was killed without its stop keeps what the first start found each
// device on, and adds what only the second moved.
func TestMergeJournals(t *testing.T) {
	a, _ := pci.ParseAddress("0000:01:00.0")
	b, _ := pci.ParseAddress("0000:01:00.1")
	earlier := &bind.Journal{Devices: []bind.Prior{{Device: a, Driver: "nvidia"}}}
	later := &bind.Journal{Format: bind.JournalFormat, Devices: []bind.Prior{{Device: a, Driver: "vfio-pci"}, {Device: b, Driver: "snd_hda_intel"}}}
	j := mergeJournals(earlier, later)
	if len(j.Devices) != 2 || j.Devices[0].Driver != "nvidia" || j.Devices[1].Driver != "snd_hda_intel" || j.Format != bind.JournalFormat {
		t.Errorf("merged %+v", j)
	}
	if len(earlier.Devices) != 1 {
		t.Errorf("the earlier journal was changed: %+v", earlier)
	}
}

func mustDuration(t *testing.T, s string) (d time.Duration) {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
