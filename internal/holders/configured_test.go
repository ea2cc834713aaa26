package holders

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A hostpciN with driver=keep holds its devices for every VM of the node, running or
// not: by host= (a whole slot too) and through a mapping, whose entries of this node
// are all the VM may get. The same entry without driver=keep holds nothing while the VM
// is stopped.
func TestKeepHolders(t *testing.T) {
	h, devs := testMachine(t)
	p, err := h.OSPath("/etc/pve/nodes/pve1/qemu-server/150.conf")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(p), 0o755)
	conf := "hostpci0: 0000:00:06,driver=keep,pcie=0\nhostpci1: mapping=nics,driver=keep\nhostpci2: " + nvmeIdle + ",driver=vfio\nmemory: 4096\n\n[snap]\nhostpci3: " + gpuCT + ",driver=keep\n"
	if err := os.WriteFile(p, []byte(conf), 0o640); err != nil {
		t.Fatal(err)
	}
	res := Find(h, devs)
	got := map[string][]string{}
	for a, hs := range res.Holders {
		for _, hd := range hs {
			if hd.Kind == KindKeep {
				got[a.String()] = append(got[a.String()], hd.String()+"|"+hd.Short()+"|"+hd.Release)
			}
		}
	}
	want := map[string][]string{
		nicDown:  {"VM 150's hostpci0 (driver=keep)|keep: VM 150|keep 0000:00:06.0 out of what moves, or drop driver=keep from hostpci0 of VM 150 (qm set 150 --hostpci0 …)"},
		nicUp:    {"VM 150's hostpci1 (mapping nics, driver=keep)|keep: VM 150|keep 0000:00:03.0 out of what moves, or drop driver=keep from hostpci1 of VM 150 (qm set 150 --hostpci1 …)"},
		vmMapped: {"VM 150's hostpci1 (mapping nics, driver=keep)|keep: VM 150|keep 0000:00:08.0 out of what moves, or drop driver=keep from hostpci1 of VM 150 (qm set 150 --hostpci1 …)"},
	}
	for a, w := range want {
		if !slices.Equal(got[a], w) {
			t.Errorf("%s: keep holders\n  %s\nwant\n  %s", a, strings.Join(got[a], "\n  "), strings.Join(w, "\n  "))
		}
	}
	if len(got) != len(want) {
		t.Errorf("keep holders on %d devices, want %d: %v", len(got), len(want), got)
	}
}
