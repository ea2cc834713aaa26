package vmlayout

import (
	"fmt"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pve"
)

// QEMU's x-nv-gpudirect-clique holds 4 bits: cliques 0 to 15 are taken, both ends
// included.
func TestSetCliqueBounds(t *testing.T) {
	conf := "hostpci0: 0000:81:00.0,pcie=1\nhostpci1: 0000:91:00.0,pcie=1\nmachine: q35\n"
	for _, n := range []int{0, MaxClique} {
		h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": conf})
		m, err := Predict(h, inv.Tree, 140, now)
		if err != nil {
			t.Fatal(err)
		}
		m.P2P = &HostP2P{}
		g, _ := pve.ReadGuest(h, pve.QEMU, 140)
		if _, err := SetClique(g, m, n); err != nil {
			t.Errorf("clique %d: %v", n, err)
			continue
		}
		args, _ := g.Get("args")
		if want := fmt.Sprintf("-set device.hostpci0.x-nv-gpudirect-clique=%d -set device.hostpci1.x-nv-gpudirect-clique=%d", n, n); args != want {
			t.Errorf("clique %d: args %q, want %q", n, args, want)
		}
	}
}

// A clique is shared by two GPUs or more: one GPU in a clique of its own shares nothing.
func TestOneGPUSharesNoClique(t *testing.T) {
	zero := 0
	m := Manifest{Devices: []Device{{Hostpci: "hostpci0", Class: "0x030000", Clique: &zero}, {Hostpci: "hostpci1", Class: "0x040300"}}, P2P: &HostP2P{}}
	if v := m.Verdict(); v.Clique != -1 {
		t.Errorf("one GPU in clique 0: the verdict's clique is %d, want -1", v.Clique)
	}
}
