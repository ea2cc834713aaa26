package vmlayout

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pve"
)

// The verdict from the host's evidence: unsafe on corruption or SEV-SNP, and otherwise
// saying whether the GPUs share a clique.
func TestVerdict(t *testing.T) {
	two := func(c0, c1 *int) []Device {
		return []Device{{Hostpci: "hostpci0", Class: "0x030000", Clique: c0}, {Hostpci: "hostpci1", Class: "0x030000", Clique: c1}}
	}
	zero, one := 0, 1
	for _, c := range []struct {
		name    string
		m       Manifest
		disable bool
		clique  int
		want    string
	}{
		{"no evidence", Manifest{Devices: two(nil, nil)}, false, -1, "carries no evidence"},
		{"nothing against", Manifest{VMID: 7, Devices: two(nil, nil), P2P: &HostP2P{Checks: []string{"sev-snp"}}}, false, -1, "gpusplit pve p2p-clique --vm 7 sets it"},
		{"one clique", Manifest{Devices: two(&zero, &zero), P2P: &HostP2P{Checks: []string{"sev-snp"}}}, false, 0, "in gpudirect clique 0"},
		{"two cliques", Manifest{Devices: two(&zero, &one), P2P: &HostP2P{Checks: []string{"sev-snp"}}}, false, -1, "without x-nv-gpudirect-clique"},
		{"SEV-SNP", Manifest{Devices: two(&zero, &zero), P2P: &HostP2P{Findings: []P2PFinding{{ID: "sev-snp", Severity: "warning", Title: "SEV-SNP forces translation"}}}}, true, 0, "host sev-snp"},
		{"faults", Manifest{Devices: two(nil, nil), P2P: &HostP2P{Findings: []P2PFinding{{ID: "iommu-page-faults", Severity: "error", Title: "faults"}}}}, true, -1, "host iommu-page-faults"},
		{"a translated IOMMU is no reason", Manifest{Devices: two(nil, nil), P2P: &HostP2P{Findings: []P2PFinding{{ID: "iommu-translated", Severity: "warning", Title: "DMA-FQ"}}}}, false, -1, "found nothing against"},
		{"corrupt pair", Manifest{Devices: two(nil, nil), P2P: &HostP2P{Measured: []P2PPair{{Src: "a", Dst: "b", Verdict: "corrupt", Why: "bytes wrong"}}}}, true, -1, "host p2p"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := c.m.Verdict()
			var text []string
			for _, r := range v.Reasons {
				text = append(text, r.ID+": "+r.Title)
			}
			if v.Disable != c.disable || v.Unsafe != c.disable || v.Clique != c.clique || !strings.Contains(strings.Join(text, "\n"), c.want) {
				t.Errorf("%+v, want disable %v clique %d and %q", v, c.disable, c.clique, c.want)
			}
		})
	}
}

// SetClique writes a -set per single-function GPU entry, replaces earlier ones, and
// refuses what cannot work; Predict reads the cliques back.
func TestSetClique(t *testing.T) {
	conf := "args: -global q35-pcihost.pci-hole64-size=2048G -set device.hostpci0.x-nv-gpudirect-clique=9\nhostpci0: 0000:81:00.0,pcie=1\nhostpci1: 0000:91:00.0,pcie=1\nhostpci2: 0000:82:00.0,pcie=1\nmachine: q35\n"
	h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": conf})
	m, err := Predict(h, inv.Tree, 140, now)
	if err != nil {
		t.Fatal(err)
	}
	if m.Devices[0].Clique == nil || *m.Devices[0].Clique != 9 || m.Devices[1].Clique != nil {
		t.Errorf("cliques read: %+v", m.Devices)
	}
	m.P2P = &HostP2P{}
	g, _ := pve.ReadGuest(h, pve.QEMU, 140)
	if _, err := SetClique(g, m, 2); err != nil {
		t.Fatal(err)
	}
	args, _ := g.Get("args")
	if want := "-global q35-pcihost.pci-hole64-size=2048G -set device.hostpci0.x-nv-gpudirect-clique=2 -set device.hostpci1.x-nv-gpudirect-clique=2"; args != want {
		t.Errorf("args %q\nwant %q", args, want) // the NIC of hostpci2 gets none
	}

	for _, c := range []struct {
		name, conf string
		p2p        *HostP2P
		clique     int
		want       string
	}{
		{"a whole slot", "hostpci0: 0000:81:00,pcie=1\nhostpci1: 0000:91:00.0,pcie=1\nmachine: q35\n", &HostP2P{}, 0, "hostpci0 pass several functions each: qemu-server names them hostpci0.0"},
		{"one GPU", "hostpci0: 0000:81:00.0,pcie=1\nmachine: q35\n", &HostP2P{}, 0, "passes 1 GPU"},
		{"out of range", "hostpci0: 0000:81:00.0,pcie=1\nhostpci1: 0000:91:00.0,pcie=1\nmachine: q35\n", &HostP2P{}, 16, "0 to 15"},
		{"unsafe", "hostpci0: 0000:81:00.0,pcie=1\nhostpci1: 0000:91:00.0,pcie=1\nmachine: q35\n",
			&HostP2P{Findings: []P2PFinding{{ID: "sev-snp", Severity: "warning", Title: "SEV-SNP"}}}, 0, "unsafe, so they get no clique"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": c.conf})
			m, err := Predict(h, inv.Tree, 140, now)
			if err != nil {
				t.Fatal(err)
			}
			m.P2P = c.p2p
			g, _ := pve.ReadGuest(h, pve.QEMU, 140)
			before := g.String()
			if _, err := SetClique(g, m, c.clique); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if g.String() != before {
				t.Errorf("the config changed:\n%s", g.String())
			}
		})
	}
}

// LaidOut finds the GPUs of vm-layout's devices: each entry's first function by its host
// address, neither its other functions nor devices of anyone else.
func TestLaidOut(t *testing.T) {
	g, err := pve.ParseGuest("141.conf", pve.QEMU, 141, "args: -global q35-pcihost.pci-hole64-size=2048G "+
		"-device vfio-pci,host=0000:81:00.0,id=gpusplit-hostpci0.0,bus=gpusplit-rp0,addr=0x0.0,multifunction=on "+
		"-device vfio-pci,host=0000:81:00.1,id=gpusplit-hostpci0.1,bus=gpusplit-rp0,addr=0x0.1 "+
		"-device vfio-pci,host=0000:91:00.0,id=gpusplit-hostpci1,bus=gpusplit-rp1,addr=0x0 "+
		"-device vfio-pci,host=0000:e1:00.0,id=mine,bus=pcie.0\nmachine: q35\n")
	if err != nil {
		t.Fatal(err)
	}
	m := LaidOut(g)
	var got []string
	for _, d := range m.Devices {
		got = append(got, d.Hostpci+"="+d.HostAddress.String())
	}
	if want := "hostpci0=0000:81:00.0 hostpci1=0000:91:00.0"; strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
}
