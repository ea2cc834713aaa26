package pve

import (
	"os"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// flaggedDemo is the sample host whose pro6000 mapping says live-migration-capable and
// mdev, with NVIDIA's vGPU manager directory (nvidia/) on the GPUs named by vgpu.
func flaggedDemo(t *testing.T, vgpu ...string) (*host.Host, *inventory.Inventory) {
	t.Helper()
	h, inv := demoDir(t, nil)
	data, err := h.ReadFile(MappingPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(data), "\tdescription RTX PRO 6000 Blackwell, whole cards with HDMI audio\n",
		"\tdescription RTX PRO 6000 Blackwell, whole cards with HDMI audio\n\tlive-migration-capable 1\n\tmdev 1\n", 1)
	write := func(p, body string) {
		t.Helper()
		full, err := h.OSPath(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(full[:strings.LastIndexByte(full, '/')], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("/etc/pve/mapping/pci.cfg", cfg)
	for _, a := range vgpu {
		addr, err := pci.ParseAddress(a)
		if err != nil {
			t.Fatal(err)
		}
		write(inv.Tree.Lookup(addr).Path+"/nvidia/creatable_vgpu_types", "ID    : vGPU Name\n")
	}
	if inv, err = inventory.Build(h, nil); err != nil {
		t.Fatal(err)
	}
	return h, inv
}

func flagSync(t *testing.T, h *host.Host, inv *inventory.Inventory, d plan.Desired) (string, []string) {
	t.Helper()
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	changes, notes, err := Sync(h, inv, p, d, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if c.Path == MappingPath {
			return c.New, notes
		}
	}
	t.Fatal("no change of pci.cfg")
	return "", nil
}

// sectionOf is one mapping's section of a pci.cfg, header to the empty line.
func sectionOf(cfg, id string) string {
	i := strings.Index(cfg, "\n"+id+"\n")
	if i < 0 {
		return ""
	}
	s := cfg[i+1:]
	if j := strings.Index(s, "\n\n"); j >= 0 {
		s = s[:j+1]
	}
	return s
}

// The -vm mapping of an unnamed split holds the GPUs that go to vfio-pci: it takes
// neither flag, since vfio-pci offers no mediated devices and no VFIO migration (Proxmox
// would refuse to start its VMs), and the notes say why; the original keeps both.
func TestNewMappingDropsFlagsOnVFIO(t *testing.T) {
	h, inv := flaggedDemo(t, "0000:81:00.0", "0000:91:00.0", "0000:e1:00.0", "0000:f1:00.0")
	cfg, notes := flagSync(t, h, inv, vfio(t, "numa:1"))
	vm := sectionOf(cfg, "pro6000-vm")
	if vm == "" || strings.Contains(vm, "mdev") || strings.Contains(vm, "live-migration-capable") {
		t.Errorf("pro6000-vm:\n%s", vm)
	}
	if !strings.Contains(sectionOf(cfg, "pro6000"), "\tlive-migration-capable 1\n\tmdev 1\n") {
		t.Errorf("pro6000 lost its flags:\n%s", cfg)
	}
	all := strings.Join(notes, "\n")
	for _, want := range []string{
		"mapping pro6000-vm: live-migration-capable 1 of pro6000 is left out: 0000:81:00.0 ends on vfio-pci, which has no VFIO migration",
		"mapping pro6000-vm: mdev 1 of pro6000 is left out: 0000:81:00.0 will offer no mediated devices on vfio-pci",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("notes lack %q:\n%s", want, all)
		}
	}
}

// A new mapping named for the GPUs that stay on nvidia keeps both flags where its GPUs
// still offer NVIDIA's vGPU (nvidia/ in sysfs), written after map and description in
// Proxmox's order; mdev goes where one of them offers none, as Proxmox's check compares it.
func TestNewMappingKeepsFlags(t *testing.T) {
	numa0 := []string{"0000:01:00.0", "0000:11:00.0", "0000:61:00.0", "0000:71:00.0"}
	d := plan.Desired{KeepRest: true, Targets: []plan.Target{
		{Name: "host", Choices: [][]pci.Selector{mustSel(t, "numa:0")}, Driver: "nvidia", Mapping: "pro6000-host"},
		{Name: "vms", Choices: [][]pci.Selector{mustSel(t, "numa:1")}, Driver: plan.VFIO, Mapping: "pro6000"},
	}}
	h, inv := flaggedDemo(t, numa0...)
	cfg, notes := flagSync(t, h, inv, d)
	want := "pro6000-host\n" +
		"\tmap id=10de:2bb1,iommugroup=10,node=kpro6,path=0000:01:00,subsystem-id=10de:204b\n" +
		"\tmap id=10de:2bb1,iommugroup=28,node=kpro6,path=0000:11:00,subsystem-id=10de:204b\n" +
		"\tmap id=10de:2bb1,iommugroup=42,node=kpro6,path=0000:61:00,subsystem-id=10de:204b\n" +
		"\tmap id=10de:2bb1,iommugroup=61,node=kpro6,path=0000:71:00,subsystem-id=10de:204b\n" +
		"\tlive-migration-capable 1\n\tmdev 1\n"
	if got := sectionOf(cfg, "pro6000-host"); got != want {
		t.Errorf("pro6000-host:\n%s\nwant\n%s\nnotes %q", got, want, notes)
	}

	h, inv = flaggedDemo(t, numa0[:3]...)
	cfg, notes = flagSync(t, h, inv, d)
	if got := sectionOf(cfg, "pro6000-host"); !strings.HasSuffix(got, "\tlive-migration-capable 1\n") {
		t.Errorf("pro6000-host, 0000:71:00.0 without vGPU:\n%s", got)
	}
	if all := strings.Join(notes, "\n"); !strings.Contains(all, "mdev 1 of pro6000 is left out: 0000:71:00.0 will offer no mediated devices on nvidia") {
		t.Errorf("notes %q", notes)
	}
}
