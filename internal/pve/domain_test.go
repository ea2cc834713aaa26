package pve

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// A GPU in PCI domain 0001 goes through sync as one in 0000 does: the mapping of the
// vfio-pci side gets its path with the domain, which Proxmox's check passes; the
// mapping: selector finds it; a VM that passes it by address is set up for it.
func TestSyncSecondDomain(t *testing.T) {
	h, err := fakehost.SecondDomain().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := MappingLookup(h)("pro6000")
	if err != nil || strings.Join(paths, " ") != "0000:01:00 0001:01:00" {
		t.Errorf("mapping:pro6000 = %v, %v", paths, err)
	}
	d := vfio(t, "numa:1")
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 2 || p.Moves[0].Device.String() != "0001:01:00.0" || p.Moves[1].Device.String() != "0001:01:00.1" {
		t.Errorf("moves %+v", p.Moves)
	}
	changes, _, err := Sync(h, inv, p, d, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Change{}
	for _, c := range changes {
		got[c.Path] = c
	}
	want := "pro6000\n\tmap id=10de:2bb1,iommugroup=2,node=pve1,path=0000:01:00,subsystem-id=10de:204b\n\n" +
		"pro6000-vm\n\tmap id=10de:2bb1,iommugroup=5,node=pve1,path=0001:01:00,subsystem-id=10de:204b\n\n"
	if m := got[MappingPath].New; m != want {
		t.Errorf("pci.cfg:\n%s\nwant\n%s", m, want)
	}
	f, err := ParseMappings(MappingPath, want)
	if err != nil {
		t.Fatal(err)
	}
	if probs := Check(inv.Tree, f.Mapping("pro6000-vm").Maps[0]); len(probs) > 0 {
		t.Errorf("Proxmox's check: %v", probs)
	}
	vm := got["/etc/pve/qemu-server/150.conf"].New
	if !strings.Contains(vm, "hostpci0: 0001:01:00,pcie=1\n") || !strings.Contains(vm, "hostnodes=1") {
		t.Errorf("VM 150:\n%s", vm)
	}
	// Back on nvidia, the VM's entry is a GPU that stays on the host: said so.
	back := plan.Desired{Targets: []plan.Target{{Name: "host", Choices: [][]pci.Selector{mustSel(t, "0001:01:00.0")}, Driver: "nvidia"}}, KeepRest: true}
	p, _ = plan.Make(inv, back)
	changes, _, err = Sync(h, inv, p, back, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	notes := ""
	for _, c := range changes {
		notes += strings.Join(c.Notes, "\n")
	}
	if !strings.Contains(notes, "VM 150: hostpci0 passes 0001:01:00.0 through by address, but it stays on nvidia") {
		t.Errorf("notes %q", notes)
	}
}
