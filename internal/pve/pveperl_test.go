package pve

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
	"github.com/gpusplit/gpusplit/internal/testutils/pveperl"
)

// proxmox is Proxmox's Perl on a host laid out in a directory, its /etc/pve holding the
// pci.cfg that sync wrote (cfg); the test is skipped where Proxmox's modules are not.
func proxmox(t *testing.T, h *host.Host, node, cfg string) *pveperl.Host {
	t.Helper()
	root, err := h.OSPath("/")
	if err != nil {
		t.Fatal(err)
	}
	etc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(etc, "mapping"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "mapping/pci.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return pveperl.Open(t, root, etc, node)
}

// readBack checks that Proxmox parses cfg without an error and writes it back byte for
// byte, and returns what it read.
func readBack(t *testing.T, px *pveperl.Host, cfg string) pveperl.Mapping {
	t.Helper()
	m := px.ReadMapping(t, cfg)
	if len(m.Errors) > 0 || m.Written != cfg {
		t.Errorf("Proxmox reads pci.cfg with errors %v and writes it back as\n%s\nnot as gpusplit wrote it\n%s", m.Errors, m.Written, cfg)
	}
	return m
}

// The flags a new mapping keeps are read by Proxmox as set, written back as sync wrote
// them, and its check at a VM's start passes on the GPUs' sysfs: mdev 1 where they offer
// NVIDIA's vGPU, none where they do not.
func TestProxmoxReadsMappingFlags(t *testing.T) {
	pveperl.Need(t)
	numa0 := []string{"0000:01:00.0", "0000:11:00.0", "0000:61:00.0", "0000:71:00.0"}
	d := plan.Desired{KeepRest: true, Targets: []plan.Target{
		{Name: "host", Choices: [][]pci.Selector{mustSel(t, "numa:0")}, Driver: "nvidia", Mapping: "pro6000-host"},
		{Name: "vms", Choices: [][]pci.Selector{mustSel(t, "numa:1")}, Driver: plan.VFIO, Mapping: "pro6000"},
	}}
	h, inv := flaggedDemo(t, numa0...)
	cfg, _ := flagSync(t, h, inv, d)
	px := proxmox(t, h, "kpro6", cfg)
	m := readBack(t, px, cfg)
	if got := m.IDs["pro6000-host"]; got == nil || got["mdev"] != 1.0 || got["live-migration-capable"] != 1.0 {
		t.Errorf("Proxmox reads pro6000-host as %v", got)
	}
	for path, err := range px.Assert(t, "pro6000-host") {
		if err != "" {
			t.Errorf("assert_valid of pro6000-host, %s: %s", path, err)
		}
	}

	// The -vm mapping of GPUs without the vGPU manager: no mdev, and Proxmox agrees.
	h, inv = flaggedDemo(t)
	cfg, _ = flagSync(t, h, inv, vfio(t, "numa:1"))
	px = proxmox(t, h, "kpro6", cfg)
	m = readBack(t, px, cfg)
	if got := m.IDs["pro6000-vm"]; got == nil || got["mdev"] != nil || got["live-migration-capable"] != nil {
		t.Errorf("Proxmox reads pro6000-vm as %v", got)
	}
	res := px.Assert(t, "pro6000-vm")
	if len(res) != 4 {
		t.Errorf("assert_valid of pro6000-vm: %v", res)
	}
	for path, err := range res {
		if err != "" {
			t.Errorf("assert_valid of pro6000-vm, %s: %s", path, err)
		}
	}
}

// An entry with driver=keep, rewritten by sync, is read by qemu-server with the option,
// and its mapping gives the GPUs sync put in it.
func TestProxmoxReadsDriverKeep(t *testing.T) {
	pveperl.Need(t)
	h, inv := demoDir(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/131.conf": "hostpci0: mapping=pro6000,pcie=1,driver=keep\nmachine: q35\nmemory: 65536\n"})
	d := vfio(t, "numa:1")
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	changes, _, err := Sync(h, inv, p, d, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg, vm string
	for _, c := range changes {
		switch c.Path {
		case MappingPath:
			cfg = c.New
		case "/etc/pve/qemu-server/131.conf":
			vm = c.New
		}
	}
	value, ok := strings.CutPrefix(strings.Split(vm, "\n")[0], "hostpci0: ")
	if !ok || value != "mapping=pro6000-vm,pcie=1,driver=keep" {
		t.Fatalf("VM 131:\n%s", vm)
	}
	px := proxmox(t, h, "kpro6", cfg)
	readBack(t, px, cfg)
	got := px.ReadHostpci(t, value)
	if got.Raw["driver"] != "keep" || got.Parsed["driver"] != "keep" || got.Raw["mapping"] != "pro6000-vm" {
		t.Errorf("qemu-server reads %q as %v, %v", value, got.Raw, got.Parsed)
	}
	var slots []string
	for _, ids := range got.IDs {
		slots = append(slots, strings.Join(ids, "+"))
	}
	if want := []string{"0000:81:00.0+0000:81:00.1", "0000:91:00.0+0000:91:00.1", "0000:e1:00.0+0000:e1:00.1", "0000:f1:00.0+0000:f1:00.1"}; !slices.Equal(slots, want) {
		t.Errorf("qemu-server's choices %v, want %v", slots, want)
	}
}

// A GPU of PCI domain 0001: the mapping sync writes passes Proxmox's parser and check,
// and qemu-server finds both its functions by address and through the mapping.
func TestProxmoxReadsSecondDomain(t *testing.T) {
	pveperl.Need(t)
	h, err := fakehost.SecondDomain().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := vfio(t, "numa:1")
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	changes, _, err := Sync(h, inv, p, d, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg string
	for _, c := range changes {
		if c.Path == MappingPath {
			cfg = c.New
		}
	}
	px := proxmox(t, h, "pve1", cfg)
	readBack(t, px, cfg)
	if res := px.Assert(t, "pro6000-vm"); len(res) != 1 || res["0001:01:00"] != "" {
		t.Errorf("assert_valid of pro6000-vm: %v", res)
	}
	for _, value := range []string{"0001:01:00,pcie=1", "mapping=pro6000-vm,pcie=1"} {
		if got := px.ReadHostpci(t, value); len(got.IDs) != 1 || strings.Join(got.IDs[0], " ") != "0001:01:00.0 0001:01:00.1" {
			t.Errorf("qemu-server finds %v for %q", got.IDs, value)
		}
	}
}

// The SR-IOV fixture is what Proxmox's readers take for NVIDIA's vGPU on virtual
// functions: mdev=nvidia-N on a VF becomes the VF passed whole with that type, and a
// mapping of VFs that says mdev 1 passes the check.
func TestProxmoxReadsVirtualFunctions(t *testing.T) {
	pveperl.Need(t)
	h, err := fakehost.SRIOVHost().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := h.ReadFile(MappingPath)
	if err != nil {
		t.Fatal(err)
	}
	px := proxmox(t, h, "pve1", string(cfg))
	got := px.ReadHostpci(t, "0000:81:00.4,mdev=nvidia-1234,pcie=1")
	if got.Parsed["nvidia"] != "1234" || got.Parsed["mdev"] != nil || len(got.IDs) != 1 || strings.Join(got.IDs[0], " ") != "0000:81:00.4" {
		t.Errorf("qemu-server reads the VF's vGPU as %v, %v", got.Parsed, got.IDs)
	}
	res := px.Assert(t, "vgpu")
	if len(res) != 2 || res["0000:81:00.5"] != "" || res["0000:81:00.6"] != "" {
		t.Errorf("assert_valid of vgpu: %v", res)
	}
}
