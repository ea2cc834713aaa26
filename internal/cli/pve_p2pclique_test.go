package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// On the sample host VM 131's entries are whole slots (GPU and HDMI audio): refused with
// the way out. With GPU-function entries, the dry run shows the -set options and writes
// nothing; a saved p2p run that found corruption refuses the clique.
func TestPVEP2PClique(t *testing.T) {
	freshDemo(t) // a dry run under --demo makes the scratch copy
	_, _, err := run(t, "--demo", "pve", "p2p-clique", "--vm", "131", "--dry-run")
	if err == nil || !strings.Contains(err.Error(), "hostpci0, hostpci1, hostpci2, hostpci3 pass several functions each") || !strings.Contains(err.Error(), "pve vm-layout") {
		t.Errorf("err = %v", err)
	}
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server/140.conf")
	before := "hostpci0: 0000:81:00.0,pcie=1\nhostpci1: 0000:91:00.0,pcie=1\nmachine: q35\nmemory: 4096\n"
	if err := os.WriteFile(conf, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "--root", root, "pve", "p2p-clique", "--vm", "140", "--clique", "4", "--dry-run")
	for _, want := range []string{
		"+args: -set device.hostpci0.x-nv-gpudirect-clique=4 -set device.hostpci1.x-nv-gpudirect-clique=4\n",
		"# VM 140: hostpci0, hostpci1 in gpudirect clique 4; takes effect at the VM's next start",
		"nvidia-smi topo -p2p r", "dry run: nothing was written",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if data, _ := os.ReadFile(conf); string(data) != before {
		t.Errorf("the dry run wrote:\n%s", data)
	}
	saved := filepath.Join(t.TempDir(), "p2p.json")
	os.WriteFile(saved, []byte(`{"pairs": [{"src": "0000:81:00.0", "dst": "0000:91:00.0", "verdict": "corrupt", "why": "peer copy: 12 bytes wrong"}]}`), 0o644)
	_, _, err = run(t, "--root", root, "pve", "p2p-clique", "--vm", "140", "--p2p", saved, "--dry-run")
	if err == nil || !strings.Contains(err.Error(), "unsafe, so they get no clique") || !strings.Contains(err.Error(), "0000:81:00.0 -> 0000:91:00.0: peer copy: 12 bytes wrong") {
		t.Errorf("err = %v", err)
	}
}
