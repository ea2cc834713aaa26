package vmtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/nccl"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// laidOut lays the sample host out in a directory with files added, runs the split of
// the NUMA-1 GPUs and pve sync on it when split is set (as the reference case does), and
// returns VM vmid's config after pve vm-layout.
func laidOut(t *testing.T, vmid int, files map[string]string, split bool) string {
	t.Helper()
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	write := func(files map[string]string) {
		for p, body := range files {
			if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(files)
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if split {
		sels, err := pci.ParseSelectors("numa:1")
		if err != nil {
			t.Fatal(err)
		}
		d := plan.ForVFIO([][]pci.Selector{sels})
		p, err := plan.Make(inv, d)
		if err != nil {
			t.Fatal(err)
		}
		changes, _, err := pve.Sync(h, inv, p, d, pve.SyncOptions{})
		if err != nil {
			t.Fatal(err)
		}
		synced := map[string]string{}
		for _, c := range changes {
			synced[strings.TrimPrefix(c.Path, "/")] = c.New
		}
		write(synced)
	}
	m, err := vmlayout.Predict(h, inv.Tree, vmid, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g, err := pve.ReadGuest(h, pve.QEMU, vmid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vmlayout.Apply(g, inv.Tree, m); err != nil {
		t.Fatal(err)
	}
	return g.String()
}

// The layout pve vm-layout writes, booted as qemu-server would start it (with NICs in
// place of the GPUs, on the same buses): the guest kernel puts each device on its guest
// NUMA node, gpusplit topo in the guest shows NODE between GPUs of one host node (each
// has a host bridge of its own on the sample host) and SYS across nodes, where a plain
// Proxmox VM shows PHB, and NCCL's own view in the guest has a <cpu> per node.
//
//   - VM 131 after the reference split: the four NUMA-1 GPUs, one guest node bound to
//     host node 1;
//   - VM 132, all eight GPUs: hostpci0–3 on host node 0, hostpci4–7 on node 1, and the
//     same with machine: q35,viommu=virtio.
func TestGeneratedLayout(t *testing.T) {
	vm := newVM(t)
	eight := "cores: 4\nhostpci0: 0000:01:00,pcie=1\nhostpci1: 0000:11:00,pcie=1\nhostpci2: 0000:61:00,pcie=1\nhostpci3: 0000:71:00,pcie=1\n" +
		"hostpci4: 0000:81:00,pcie=1\nhostpci5: 0000:91:00,pcie=1\nhostpci6: 0000:e1:00,pcie=1\nhostpci7: 0000:f1:00,pcie=1\n" +
		"machine: q35\nmemory: 512\nname: train02\nostype: l26\nsockets: 1\n"
	for _, c := range []struct {
		name  string
		vmid  int
		files map[string]string
		split bool
		nodes []int // the guest node of hostpci0, hostpci1, …
		nccl  string
	}{
		{"vm131", 131, nil, true, []int{0, 0, 0, 0}, "0:pppp"},
		{"vm132", 132, map[string]string{"etc/pve/nodes/kpro6/qemu-server/132.conf": eight}, false, []int{0, 0, 0, 0, 1, 1, 1, 1}, "0:pppp 1:pppp"},
		// virtio-iommu-pci takes pcie.0 slot 2, which the first expander bridge then
		// leaves to it; QEMU refuses the machine if both ask for it.
		{"vm132-viommu-virtio", 132, map[string]string{"etc/pve/nodes/kpro6/qemu-server/132.conf": strings.Replace(eight, "machine: q35\n", "machine: q35,viommu=virtio\n", 1)},
			false, []int{0, 0, 0, 0, 1, 1, 1, 1}, "0:pppp 1:pppp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conf := laidOut(t, c.vmid, c.files, c.split)
			topo, err := ProxmoxQ35("vm-layout-"+c.name, conf)
			if err != nil {
				t.Fatal(err)
			}
			want := expectation{numa: map[string]int{}}
			var pairs []string
			id := func(i int) string { return fmt.Sprintf("gpusplit-hostpci%d.0", i) }
			for i, n := range c.nodes {
				want.numa[id(i)] = n
				for j := i + 1; j < len(c.nodes); j++ {
					r := "SYS"
					if n == c.nodes[j] {
						r = "NODE"
					}
					pairs = append(pairs, id(i), id(j), r)
				}
			}
			want.relations = rel(pairs...)
			res := boot(t, vm, topo, guestScript+"emit nccl gpusplit --devices "+E1000E+" nccl-topo\n")
			checkGuest(t, topo, want, res)

			x, err := nccl.Parse(output(t, res, "nccl"))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, cpu := range x.Children {
				n, _ := cpu.Get("numaid")
				got = append(got, n+":"+strings.Repeat("p", len(cpu.Children)))
			}
			if s := strings.Join(got, " "); s != c.nccl {
				t.Errorf("the guest's NCCL topology: %s, want %s\n%s", s, c.nccl, output(t, res, "nccl"))
			}
		})
	}
}
