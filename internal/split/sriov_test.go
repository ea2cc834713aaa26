package split

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// A GPU whose SR-IOV virtual functions are enabled is not rebound: its driver going
// away destroys them, with the vGPUs the VMs were given. apply refuses, naming the VMs
// that hold them (a running one, a stopped one through a mapping) and the way out; a
// GPU that can have VFs and has none enabled moves.
func TestApplyRefusesEnabledVFs(t *testing.T) {
	root := t.TempDir()
	if _, err := fakehost.SRIOVHost().Open(root); err != nil {
		t.Fatal(err)
	}
	c := change(t, root, false, false, Options{})
	stops := strings.Join(stopsOf(c, "drivers"), "\n")
	for _, want := range []string{
		"in use: 0000:81:00.0;",
		"4 VFs: stop the VMs given them and take them out of their configs, then disable them (echo 0 > /sys/bus/pci/devices/0000:81:00.0/sriov_numvfs)",
	} {
		if !strings.Contains(stops, want) {
			t.Errorf("stops lack %q:\n%s", want, stops)
		}
	}
	if strings.Contains(stops, "0000:c1:00.0") {
		t.Errorf("the GPU without VFs enabled is refused:\n%s", stops)
	}
	var held []string
	for _, m := range c.Drivers.Moves {
		for _, hd := range m.Holders {
			held = append(held, m.Device.String()+": "+hd.String())
		}
	}
	if got := strings.Join(held, "\n"); got != "0000:81:00.0: 4 SR-IOV virtual functions (given to VM 140 (hostpci0, running) with 0000:81:00.4; VM 141 (hostpci0, mapping vgpu) with 0000:81:00.5 or 0000:81:00.6)" {
		t.Errorf("holders of the moves:\n%s", got)
	}
}
