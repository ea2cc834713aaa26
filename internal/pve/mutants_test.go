package pve

import (
	"slices"
	"strings"
	"testing"
)

// Locks are taken in one order whatever the order of the edits: the cluster lock of
// pci.cfg first, then the guests' locks by path, each once. Two writers taking them in
// that order cannot deadlock.
func TestLocksInFixedOrder(t *testing.T) {
	edits := []Edit{
		{Path: "/etc/pve/qemu-server/200.conf"},
		{Path: "/etc/pve/lxc/129.conf"},
		{Path: MappingPath},
		{Path: "/etc/pve/qemu-server/131.conf"},
		{Path: "/etc/pve/qemu-server/200.conf"},
	}
	var got []string
	for _, l := range locksOf(edits) {
		got = append(got, l.path)
	}
	want := []string{
		"/etc/pve/priv/lock/file-mapping_pci_cfg",
		"/run/lock/lxc/pve-config-129.lock",
		"/var/lock/qemu-server/lock-131.conf",
		"/var/lock/qemu-server/lock-200.conf",
	}
	if !slices.Equal(got, want) {
		t.Errorf("locks %v, want %v", got, want)
	}
	slices.Reverse(edits)
	got = nil
	for _, l := range locksOf(edits) {
		got = append(got, l.path)
	}
	if !slices.Equal(got, want) {
		t.Errorf("locks of the edits reversed %v, want %v", got, want)
	}
}

// An entry whose iommugroup no longer matches the host is written anew from sysfs, not
// kept byte for byte: Proxmox would refuse the VM at its start.
func TestSyncRewritesStaleGroup(t *testing.T) {
	const cfg = "etc/pve/mapping/pci.cfg"
	h, inv := demo(t)
	ref := string(must(h.ReadFile(MappingPath)))
	stale := strings.Replace(ref, "iommugroup=72,node=kpro6", "iommugroup=73,node=kpro6", 1)
	if stale == ref {
		t.Fatal("the sample host's pci.cfg has no entry in group 72")
	}
	changes, _ := syncWith(t, map[string]string{cfg: stale}, vfio(t, "numa:1"), SyncOptions{})
	f, err := ParseMappings(MappingPath, changes[MappingPath].New)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range f.Mappings {
		for _, e := range m.NodeMaps("kpro6") {
			if probs := Check(inv.Tree, e); len(probs) > 0 {
				t.Errorf("%s %s: %v", m.ID, e.Path, probs)
			}
			if strings.HasPrefix(e.Path, "0000:81:00") {
				found = true
				if e.IOMMUGroup != "72" {
					t.Errorf("%s %s has iommugroup %s, want 72", m.ID, e.Path, e.IOMMUGroup)
				}
			}
		}
	}
	if !found {
		t.Errorf("no entry of 0000:81:00 in:\n%s", changes[MappingPath].New)
	}
}

// Proxmox names a node by the host name up to its first dot: a fully qualified
// /etc/hostname is this node all the same, and its entries and guests are found.
func TestNodeNameOfFQDN(t *testing.T) {
	h, _ := demoWith(t, map[string]string{"etc/hostname": "kpro6.lab.example.com\n"})
	if n, err := NodeName(h); err != nil || n != "kpro6" {
		t.Errorf("NodeName = %q, %v; want kpro6", n, err)
	}
	changes, _ := syncWith(t, map[string]string{"etc/hostname": "kpro6.lab.example.com\n"}, vfio(t, "numa:1"), SyncOptions{})
	f, err := ParseMappings(MappingPath, changes[MappingPath].New)
	if err != nil {
		t.Fatal(err)
	}
	if m := f.Mapping("pro6000-vm"); m == nil || len(m.NodeMaps("kpro6")) != 4 {
		t.Errorf("pro6000-vm on kpro6 after a sync on kpro6.lab.example.com:\n%s", changes[MappingPath].New)
	}
	if _, ok := changes["/etc/pve/qemu-server/131.conf"]; !ok {
		t.Error("VM 131 of node kpro6 was not synced")
	}
}
