package split

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apply never rebinds a device a VM passes with driver=keep, running or not: qemu-server
// leaves it on its driver, trusting it, and a split that moved it would leave the VM on
// a driver it was not set up for. The GPUs that stay where they are may be kept freely.
func TestApplyKeepsDriverKeep(t *testing.T) {
	root := sample(t)
	conf := filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server/150.conf")
	if err := os.WriteFile(conf, []byte("hostpci0: 0000:91:00,driver=keep,pcie=1\nhostpci1: 0000:01:00,driver=keep,pcie=1\nmachine: q35\nmemory: 8192\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	stops := strings.Join(stopsOf(change(t, root, false, false, Options{}), "drivers"), "\n")
	for _, want := range []string{"0000:91:00.0", "0000:91:00.1", "keep: VM 150: keep 0000:91:00.0 out of what moves, or drop driver=keep from hostpci0 of VM 150"} {
		if !strings.Contains(stops, want) {
			t.Errorf("stops lack %q:\n%s", want, stops)
		}
	}
	if strings.Contains(stops, "hostpci1") || strings.Contains(stops, "0000:01:00") {
		t.Errorf("a GPU that stays on its driver is refused:\n%s", stops)
	}
}
