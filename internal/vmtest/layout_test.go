package vmtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/nccl"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// The layout pve vm-layout writes, booted: VM 132 of the sample host passes all eight GPUs
// (hostpci0–3 on host NUMA node 0, hostpci4–7 on node 1, each under a host bridge of its
// own). Started with the generated args (NICs in place of the GPUs, on the same buses),
// the guest kernel puts each on its guest NUMA node, and gpusplit topo in the guest shows
// NODE within a node and SYS across, as on the host, where a plain Proxmox VM shows PHB.
func TestGeneratedLayout(t *testing.T) {
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	conf := "cores: 4\nhostpci0: 0000:01:00,pcie=1\nhostpci1: 0000:11:00,pcie=1\nhostpci2: 0000:61:00,pcie=1\nhostpci3: 0000:71:00,pcie=1\n" +
		"hostpci4: 0000:81:00,pcie=1\nhostpci5: 0000:91:00,pcie=1\nhostpci6: 0000:e1:00,pcie=1\nhostpci7: 0000:f1:00,pcie=1\n" +
		"machine: q35\nmemory: 512\nname: train02\nostype: l26\nsockets: 1\n"
	if err := os.WriteFile(filepath.Join(dir, "etc/pve/nodes/kpro6/qemu-server/132.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := vmlayout.Predict(h, inv.Tree, 132, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g, err := pve.ReadGuest(h, pve.QEMU, 132)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vmlayout.Apply(g, inv.Tree, m); err != nil {
		t.Fatal(err)
	}
	topo, err := ProxmoxQ35("vm-layout", g.String())
	if err != nil {
		t.Fatal(err)
	}
	if topo.NUMA != 2 {
		t.Fatalf("%d guest NUMA nodes from\n%s", topo.NUMA, g.String())
	}

	want := expectation{numa: map[string]int{}}
	var pairs []string
	for i := range 8 {
		id := "gpusplit-hostpci" + string(rune('0'+i)) + ".0"
		want.numa[id] = i / 4
		for j := i + 1; j < 8; j++ {
			other := "gpusplit-hostpci" + string(rune('0'+j)) + ".0"
			r := "SYS"
			if i/4 == j/4 {
				r = "NODE"
			}
			pairs = append(pairs, id, other, r)
		}
	}
	want.relations = rel(pairs...)
	res := boot(t, newVM(t), topo, guestScript+"emit nccl gpusplit --devices "+E1000E+" nccl-topo\n")
	checkGuest(t, topo, want, res)

	// NCCL's own view in the guest is now the host's: two <cpu>, four devices each.
	x, err := nccl.Parse(output(t, res, "nccl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range x.Children {
		id, _ := c.Get("numaid")
		got = append(got, id+":"+strings.Repeat("p", len(c.Children)))
	}
	if s := strings.Join(got, " "); s != "0:pppp 1:pppp" {
		t.Errorf("the guest's NCCL topology: %s\n%s", s, output(t, res, "nccl"))
	}
}
