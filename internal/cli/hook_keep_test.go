package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An entry with driver=keep keeps its device on its driver at the VM's start, as
// qemu-server does; the VM's other GPUs move. A function kept while its GPU moves
// (they move together) refuses the start, naming the entry, with nothing written.
func TestHookVMStartLeavesDriverKeep(t *testing.T) {
	root, h := hookRoot(t, "48213")
	fakeServices(t, root)
	k := newSimKernel(t, h)
	k.use(t)
	conf := filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server/131.conf")
	setVM := func(hostpci string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(hostpci+"machine: q35\nmemory: 8192\n"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	setVM("hostpci0: 0000:01:00,pcie=1,driver=keep\nhostpci1: 0000:11:00,pcie=1\n")
	out := mustRun(t, "--root", root, "hook", "131", "pre-start")
	if got := k.state("0000:01:00.0"); got != "nvidia/" {
		t.Errorf("the driver=keep GPU is %s:\n%s", got, out)
	}
	if got := k.state("0000:11:00.0"); got != "vfio-pci/vfio-pci" {
		t.Errorf("the other GPU is %s:\n%s", got, out)
	}
	if !strings.Contains(out, "0000:01:00.0 (hostpci0) has driver=keep: it stays on its driver") {
		t.Errorf("output:\n%s", out)
	}
	mustRun(t, "--root", root, "hook", "131", "post-stop")

	setVM("hostpci0: 0000:61:00.1,driver=keep\nhostpci1: 0000:61:00.0,pcie=1\n")
	k.writes = nil
	_, _, err := run(t, "--root", root, "hook", "131", "pre-start")
	if err == nil || !strings.Contains(err.Error(), "VM 131's hostpci0 (driver=keep)") && !strings.Contains(err.Error(), "drop driver=keep from hostpci0 of VM 131") {
		t.Errorf("err = %v", err)
	}
	if len(k.writes) > 0 {
		t.Errorf("the kernel was written: %v", k.writes)
	}
}
