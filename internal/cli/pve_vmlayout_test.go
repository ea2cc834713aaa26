package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

func TestPVEVMLayout(t *testing.T) {
	freshDemo(t) // a dry run under --demo makes the scratch copy
	out := mustRun(t, "--demo", "pve", "vm-layout", "--vm", "131", "--dry-run")
	for _, want := range []string{"+args: -device pxb-pcie,id=gpusplit-pxb0,", "-hostpci0: mapping=pro6000,pcie=1\n", "+numa0: cpus=0-63,hostnodes=0,memory=262144,policy=bind\n", "dry run: nothing was written"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	js := mustRun(t, "--demo", "pve", "vm-layout", "--vm", "131", "--dry-run", "-o", "json")
	var doc struct {
		Layout struct {
			Bridges []struct {
				HostBridge string `json:"host_bridge"`
				GuestNUMA  int    `json:"guest_numa"`
			} `json:"bridges"`
			Removed []string `json:"removed"`
		} `json:"layout"`
		Applied bool `json:"applied"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Layout.Bridges) != 4 || doc.Layout.Bridges[0].HostBridge != "pci0000:00" || len(doc.Layout.Removed) != 4 || doc.Applied {
		t.Errorf("json: %+v", doc)
	}

	// --apply on a copy of the host: the config is replaced, a backup kept, and a second
	// run finds nothing to do.
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "etc/pve/nodes/kpro6/qemu-server/131.conf")
	before, _ := os.ReadFile(conf)
	out = mustRun(t, "--root", dir, "pve", "vm-layout", "--vm", "131", "--apply")
	after, _ := os.ReadFile(conf)
	if !strings.Contains(out, "wrote /etc/pve/qemu-server/131.conf") || !strings.Contains(string(after), "args: -device pxb-pcie") || strings.Contains(string(after), "\nhostpci0:") {
		t.Errorf("apply:\n%s\n%s", out, after)
	}
	backups, _ := filepath.Glob(filepath.Join(dir, "var/lib/gpusplit/backup/*"))
	found := false
	for _, b := range backups {
		if data, _ := os.ReadFile(b); string(data) == string(before) {
			found = true
		}
	}
	if !found {
		t.Errorf("no backup of the old config among %v", backups)
	}
	if out := mustRun(t, "--root", dir, "pve", "vm-layout", "--vm", "131", "--dry-run"); !strings.Contains(out, "already has gpusplit's layout") {
		t.Errorf("second run:\n%s", out)
	}

	freshDemo(t) // the dry run below makes the demo's scratch copy
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--demo", "pve", "vm-layout"}, "--vm names the VM"},
		{[]string{"--root", sampleArchive(t), "pve", "vm-layout", "--vm", "131", "--apply"}, "snapshot"},
		{[]string{"--demo", "pve", "vm-layout", "--vm", "131", "--apply", "--dry-run"}, "contradict"},
		{[]string{"--demo", "pve", "vm-layout", "--vm", "120", "--dry-run"}, "on node kpro5"},
	} {
		if _, _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}
