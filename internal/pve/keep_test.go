package pve

import (
	"strings"
	"testing"
)

// sync rewrites the mapping of an entry with driver=keep and keeps the option where it
// was: the VM's own say on its driver is not sync's to change.
func TestSyncKeepsDriverKeep(t *testing.T) {
	vm := "boot: order=scsi0\nhostpci0: mapping=pro6000,pcie=1,driver=keep\nhostpci1: mapping=pro6000,driver=keep,pcie=1\nmachine: q35\nmemory: 65536\n"
	changes, _ := syncWith(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/131.conf": vm}, vfio(t, "numa:1"), SyncOptions{})
	got := changes["/etc/pve/qemu-server/131.conf"].New
	for _, want := range []string{"hostpci0: mapping=pro6000-vm,pcie=1,driver=keep\n", "hostpci1: mapping=pro6000-vm,driver=keep,pcie=1\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("VM 131 lacks %q:\n%s", want, got)
		}
	}
}
