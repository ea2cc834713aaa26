package vmlayout

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pve"
)

const vm132 = "args: -global q35-pcihost.pci-hole64-size=2048G\ncores: 32\n" +
	"hostpci0: 0000:01:00,pcie=1\nhostpci1: 0000:11:00,pcie=1\nhostpci2: 0000:61:00,pcie=1\nhostpci3: 0000:71:00,pcie=1\n" +
	"hostpci4: 0000:81:00,pcie=1,rombar=0\nhostpci5: 0000:91:00,pcie=1\nhostpci6: 0000:e1:00,pcie=1\nhostpci7: 0000:f1:00,pcie=1\n" +
	"hostpci8: 0000:82:00.0,pcie=1\n" +
	"machine: q35\nmemory: 131072\nname: train02\nnet0: virtio=BC:24:11:00:00:01,bridge=vmbr0\nostype: l26\nsockets: 2\n"

// Eight GPUs on eight host bridges over two NUMA nodes: eight expander bridges, each
// bound to the guest node of its host node, a root port and the GPU's two functions
// behind each; the NIC's hostpci8 and the other args stay; guest nodes are added.
func TestApplyTwoNodes(t *testing.T) {
	h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/132.conf": vm132})
	m, err := Predict(h, inv.Tree, 132, now)
	if err != nil {
		t.Fatal(err)
	}
	g, err := pve.ReadGuest(h, pve.QEMU, 132)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Apply(g, inv.Tree, m)
	if err != nil {
		t.Fatal(err)
	}
	out := g.String()
	for _, want := range []string{
		"numa: 1\nnuma0: cpus=0-31,hostnodes=0,memory=65536,policy=bind\nnuma1: cpus=32-63,hostnodes=1,memory=65536,policy=bind\n",
		"hostpci8: 0000:82:00.0,pcie=1\n",
		"args: -global q35-pcihost.pci-hole64-size=2048G -device pxb-pcie,id=gpusplit-pxb0,bus_nr=128,numa_node=0,bus=pcie.0,addr=0x2 ",
		" -device pcie-root-port,id=gpusplit-rp0,bus=gpusplit-pxb0,addr=0x0,port=128,chassis=128,slot=0" +
			" -device vfio-pci,host=0000:01:00.0,id=gpusplit-hostpci0.0,bus=gpusplit-rp0,addr=0x0.0,multifunction=on" +
			" -device vfio-pci,host=0000:01:00.1,id=gpusplit-hostpci0.1,bus=gpusplit-rp0,addr=0x0.1 ",
		" -device pxb-pcie,id=gpusplit-pxb4,bus_nr=192,numa_node=1,bus=pcie.0,addr=0x6 ",
		"id=gpusplit-hostpci4.0,bus=gpusplit-rp4,addr=0x0.0,multifunction=on,rombar=0 ",
		" -device pxb-pcie,id=gpusplit-pxb7,bus_nr=240,numa_node=1,bus=pcie.0,addr=0x9 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
	for i := range 8 {
		if _, ok := g.Get("hostpci" + string(rune('0'+i))); ok {
			t.Errorf("hostpci%d is still there", i)
		}
	}
	if len(l.Bridges) != 8 || l.Bridges[3].HostBridge.String() != "pci0000:70" || l.Bridges[3].GuestNUMA != 0 || l.Bridges[4].GuestNUMA != 1 {
		t.Errorf("bridges %+v", l.Bridges)
	}
	// The config still reads as Proxmox's; a second Apply is refused, since it would lay
	// out only what is left in hostpci entries.
	g2, err := pve.ParseGuest("132.conf", pve.QEMU, 132, out)
	if err != nil {
		t.Fatal(err)
	}
	if !HasLayout(g2) {
		t.Error("HasLayout is false after Apply")
	}
	if _, err := Apply(g2, inv.Tree, m); err == nil || !strings.Contains(err.Error(), "undo the layout first") {
		t.Errorf("a second Apply: %v", err)
	}
	write(t, h.Root(), map[string]string{"etc/pve/nodes/kpro6/qemu-server/132.conf": out})
	if _, err := Predict(h, inv.Tree, 132, now); !errors.Is(err, ErrLaidOut) {
		t.Errorf("Predict after the layout: %v", err)
	}
}

// The reference VM after the split: four GPUs on host node 1, one guest node bound to it.
func TestApplyReference(t *testing.T) {
	h, inv := afterSplit(t)
	m, err := Predict(h, inv.Tree, 131, now)
	if err != nil {
		t.Fatal(err)
	}
	g, err := pve.ReadGuest(h, pve.QEMU, 131)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Apply(g, inv.Tree, m)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range l.Bridges {
		got = append(got, b.HostBridge.String()+"→"+strings.Join(b.Hostpci, "+"))
		if b.GuestNUMA != 0 || b.HostNUMA != 1 {
			t.Errorf("%s: guest node %d, host node %d", b.ID, b.GuestNUMA, b.HostNUMA)
		}
	}
	if s := strings.Join(got, " "); s != "pci0000:80→hostpci0 pci0000:90→hostpci1 pci0000:e0→hostpci2 pci0000:f0→hostpci3" {
		t.Errorf("bridges: %s", s)
	}
	if !strings.Contains(strings.Join(l.Notes, "\n"), "used a mapping") {
		t.Errorf("notes: %q", l.Notes)
	}
}

func TestApplyRefuses(t *testing.T) {
	for _, c := range []struct{ name, conf, want string }{
		{"i440fx", "hostpci0: 0000:01:00\nmemory: 1024\n", "need machine: q35"},
		{"x-vga", "hostpci0: 0000:01:00,pcie=1,x-vga=1\nmachine: q35\nmemory: 1024\n", "x-vga=1"},
		{"win7", "hostpci0: 0000:01:00,pcie=1\nmachine: q35\nmemory: 1024\nostype: win7\n", "win7"},
		{"numa bound elsewhere", "hostpci0: 0000:81:00,pcie=1\nmachine: q35\nmemory: 1024\nnuma: 1\nnuma0: cpus=0,hostnodes=0,memory=1024,policy=bind\n", "no guest NUMA node bound to host node 1"},
		{"no memory", "hostpci0: 0000:81:00,pcie=1\nmachine: q35\n", "no fixed memory size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": c.conf})
			m, err := Predict(h, inv.Tree, 140, now)
			if err != nil {
				t.Fatal(err)
			}
			g, err := pve.ReadGuest(h, pve.QEMU, 140)
			if err != nil {
				t.Fatal(err)
			}
			before := g.String()
			_, err = Apply(g, inv.Tree, m)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if g.String() != before {
				t.Errorf("the config changed:\n%s", g.String())
			}
		})
	}
}

// The options are written in the order of their hostpci names, so the table must keep it.
func TestPassOptsSorted(t *testing.T) {
	for i := 1; i < len(passOpts); i++ {
		if passOpts[i-1].hostpci >= passOpts[i].hostpci {
			t.Errorf("passOpts: %q before %q", passOpts[i-1].hostpci, passOpts[i].hostpci)
		}
	}
}
