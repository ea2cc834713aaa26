package vmlayout

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// The configs here are shaped like qemu-server's own cfg2cmd tests (src/test/cfg2cmd in
// proxmox/qemu-server): q35-linux-hostpci-x-pci-overrides.conf, …-template.conf,
// …-driver-keep.conf, q35-viommu-virtio.conf; the expected places follow the QEMU
// command lines those tests hold (the .conf.cmd files).

// vendor-id= and the like become x-pci-*-id on the entry's first function only: the
// guest sees those ids, the manifest keeps the host's beside them, and Match finds the
// device by what the guest sees.
func TestIDOverrides(t *testing.T) {
	h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: 0000:81:00,pcie=1,vendor-id=0x1234,device-id=0x5678,sub-vendor-id=0x2233,sub-device-id=0x0000\n" +
		"hostpci1: 0000:91:00.0,pcie=1,device-id=0x2BB5\nmachine: q35\n"})
	m, err := Predict(h, inv.Tree, 140, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][6]string{}
	for _, d := range m.Devices {
		got[d.GuestPath] = [6]string{d.Vendor, d.Device, d.HostVendor, d.HostDevice, d.SubVendor, d.SubDevice}
	}
	want := map[string][6]string{
		"1c.0/00.0": {"1234", "5678", "10de", "2bb1", "2233", "0000"},
		"1c.0/00.1": {"10de", "22e8", "", "", "", ""}, // the HDMI audio function keeps its ids
		"1c.1/00.0": {"10de", "2bb5", "", "2bb1", "", ""},
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %q, want %q", p, got[p], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("devices %v", got)
	}

	// The guest of that VM: Proxmox's q35 layout with the overridden ids at 1c.0 and 1c.1.
	gm := fakehost.ProxmoxQ35Guest(2, []fakehost.Node{{ID: 0, CPUs: "0-7"}})
	for i, d := range gm.Bridges[0].Devices {
		gpu := &gm.Bridges[0].Devices[i].Children
		switch {
		case d.Slot == 0x1c && d.Func == 0:
			(*gpu)[0].Vendor, (*gpu)[0].Device = 0x1234, 0x5678
		case d.Slot == 0x1c && d.Func == 1:
			(*gpu)[0].Device = 0x2bb5
			*gpu = (*gpu)[:1] // hostpci1 passes the GPU function alone
		}
	}
	_, ginv := guest(t, gm)
	pairs, err := Match(m, ginv.Tree, ginv.Devices())
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 3 {
		t.Errorf("%d pairs, want 3", len(pairs))
	}
}

// A template starts only for backups, with no hostpci device: there is nothing to
// describe or lay out.
func TestTemplateRefused(t *testing.T) {
	h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: 0000:81:00,pcie=1\nhostpci1: 0000:91:00,pcie=1\nmachine: q35\ntemplate: 1\n"})
	_, err := Predict(h, inv.Tree, 140, now)
	if err == nil || !strings.Contains(err.Error(), "VM 140 is a template: qemu-server passes no hostpci device") {
		t.Errorf("err = %v", err)
	}
}

// driver=keep: qemu-server neither resets nor rebinds the device, so the note says the
// VM cannot start until it is on vfio-pci, not that qemu-server will move it.
func TestDriverKeepNote(t *testing.T) {
	h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: 0000:81:00,pcie=1,driver=keep\nhostpci1: 0000:91:00,pcie=1,driver=vfio\nmachine: q35\n"})
	m, err := Predict(h, inv.Tree, 140, now)
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(m.Notes, "\n")
	for _, want := range []string{
		"0000:81:00.0 (nvidia) not on vfio-pci, and their entries say driver=keep: qemu-server neither resets nor rebinds them, so VM 140 cannot start",
		"0000:91:00.0 (nvidia) not on vfio-pci now: qemu-server rebinds them when VM 140 starts",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "0000:81:00.0 (nvidia) not on vfio-pci now") {
		t.Errorf("the kept device is said to be rebound:\n%s", notes)
	}
}

// igdHost is an i440fx host with Intel's integrated graphics at 00:02.0 on vfio-pci and
// a discrete NVIDIA GPU, with the VM given in conf.
func igdHost(t *testing.T, conf string) *Manifest {
	t.Helper()
	m := fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-7"}},
		IOMMU: true,
		Bridges: []fakehost.HostBridge{{Bus: 0, NUMA: 0, Devices: []fakehost.Device{
			{Slot: 0, Vendor: 0x8086, Device: 0x3e30, Class: 0x060000, Group: 0},
			{Slot: 2, Vendor: 0x8086, Device: 0x3e92, Class: 0x030000, Driver: "vfio-pci", Group: 1},
			{Slot: 1, Vendor: 0x8086, Device: 0x1901, Class: 0x060400, Group: 2, Speed: "8.0 GT/s PCIe", Width: 16, Secondary: 1, Children: []fakehost.Device{
				{Slot: 0, Vendor: 0x10de, Device: 0x2204, Class: 0x030000, Driver: "vfio-pci", Group: 2, Speed: "8.0 GT/s PCIe", Width: 16},
			}},
		}}},
		Drivers: []string{"vfio-pci"},
		Links:   map[string]string{"etc/pve/local": "nodes/pve1", "etc/pve/qemu-server": "nodes/pve1/qemu-server"},
		Files: map[string]string{
			"etc/hostname": "pve1\n",
			"etc/pve/nodes/pve1/qemu-server/140.conf": conf,
		},
	}
	h, inv := guest(t, m) // a host here, made the same way
	man, err := Predict(h, inv.Tree, 140, now)
	if err != nil {
		t.Fatal(err)
	}
	return man
}

// legacy-igd=1 puts the device at pci.0 slot 2, and pci.2 behind pci.1 ("pci.2-igd" at
// bus 1 addr 30), so hostpci4 and later lie one bridge deeper.
func TestLegacyIGD(t *testing.T) {
	m := igdHost(t, "hostpci0: 00:02.0,legacy-igd=1\nhostpci4: 01:00.0\nvga: none\n")
	if got, want := pathsOf(m), "hostpci0=0000:00:02.0@02.0/fixed hostpci4=0000:01:00.0@1e.0/1e.0/0d.0/fixed"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Without legacy IGD, pci.2 is at 1f.0.
	m = igdHost(t, "hostpci0: 00:02.0\nhostpci4: 01:00.0\n")
	if got, want := pathsOf(m), "hostpci0=0000:00:02.0@10.0/fixed hostpci4=0000:01:00.0@1f.0/0d.0/fixed"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// qemu-server's refusals of legacy-igd (parse_hostpci_devices), each with its message.
func TestLegacyIGDRefused(t *testing.T) {
	for _, c := range []struct{ name, conf, want string }{
		{"a display", "hostpci0: 0000:81:00.0,legacy-igd=1\n", "legacy IGD assignment requires VGA mode to be 'none'"},
		{"q35", "hostpci0: 0000:81:00.0,legacy-igd=1\nmachine: q35\nvga: none\n", "not compatible with q35"},
		{"x-vga", "hostpci0: 0000:81:00.0,legacy-igd=1,x-vga=1\nvga: none\n", "not compatible with x-vga"},
		{"rombar off", "hostpci0: 0000:81:00.0,legacy-igd=1,rombar=0\nvga: none\n", "requires rombar to be enabled"},
		{"two", "hostpci0: 0000:81:00.0,legacy-igd=1\nhostpci1: 0000:91:00.0,legacy-igd=1\nvga: none\n", "only one device can be assigned in legacy-igd mode"},
		{"not 00:02.0", "hostpci0: 0000:81:00.0,legacy-igd=1\nvga: none\n", "only works for devices on host bus 00:02.0"},
		{"multifunction", "hostpci0: 0000:81:00,legacy-igd=1\nvga: none\n", "not compatible with multifunction devices"},
		{"a mapping of several", "hostpci0: mapping=pro6000,legacy-igd=1\nvga: none\n", "not compatible with alternate devices"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": c.conf})
			_, err := Predict(h, inv.Tree, 140, now)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "qemu-server refuses") {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// machine: q35,viommu=virtio: qemu-server adds virtio-iommu-pci without an address, and
// QEMU gives it the lowest free slot of pcie.0 (02 behind the display at 01; 01 when
// there is no display): the expander bridges keep off it. Every root port has a port
// number of its own.
func TestLayoutBesideVIOMMU(t *testing.T) {
	for _, c := range []struct {
		name, machine, vga string
		first              string
	}{
		{"no viommu", "q35", "", "addr=0x2"},
		{"viommu=virtio", "q35,viommu=virtio", "", "addr=0x3"},
		{"viommu=virtio, no display", "q35,viommu=virtio", "vga: none\n", "addr=0x2"},
		{"viommu=intel", "type=q35,viommu=intel", "", "addr=0x2"}, // intel-iommu is no PCI device
	} {
		t.Run(c.name, func(t *testing.T) {
			conf := "hostpci0: 0000:81:00,pcie=1\nhostpci1: 0000:91:00,pcie=1\nmachine: " + c.machine + "\nmemory: 4096\n" + c.vga
			h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": conf})
			m, err := Predict(h, inv.Tree, 140, now)
			if err != nil {
				t.Fatal(err)
			}
			g, err := pve.ReadGuest(h, pve.QEMU, 140)
			if err != nil {
				t.Fatal(err)
			}
			l, err := Apply(g, inv.Tree, m)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(l.Args, "-device pxb-pcie,id=gpusplit-pxb0,bus_nr=128,numa_node=0,bus=pcie.0,"+c.first+" ") {
				t.Errorf("the first expander bridge is not at %s: %s", c.first, l.Args)
			}
			for _, port := range []string{"id=gpusplit-rp0,bus=gpusplit-pxb0,addr=0x0,port=128,", "id=gpusplit-rp1,bus=gpusplit-pxb1,addr=0x0,port=129,"} {
				if !strings.Contains(l.Args, port) {
					t.Errorf("args lack %q: %s", port, l.Args)
				}
			}
		})
	}
}

// vgpuHost is a host with an RTX PRO 6000 Blackwell Server Edition on NVIDIA's vGPU
// manager (kernel 6.8 and later): the GPU on nvidia with two SR-IOV virtual functions,
// each with the manager's nvidia/ directory (creatable_vgpu_types, current_vgpu_type),
// as pve-common's lspci looks for it. The vGPU type's id and name are illustrative.
func vgpuHost(t *testing.T, conf string) (*Manifest, error) {
	t.Helper()
	vf := func(fn uint8) fakehost.Device {
		return fakehost.Device{Slot: 0, Func: fn, Vendor: 0x10de, Device: 0x2bb5, SubVendor: 0x10de, SubDevice: 0x204e, Class: 0x030200, Group: 30 + int(fn), Speed: "32.0 GT/s PCIe", Width: 16}
	}
	m := fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-7"}, {ID: 1, CPUs: "8-15"}},
		IOMMU: true,
		Bridges: []fakehost.HostBridge{{Bus: 0x80, NUMA: 1, Devices: []fakehost.Device{
			{Slot: 0, Vendor: 0x1022, Device: 0x153a, Class: 0x060000, Group: 20},
			{Slot: 1, Func: 1, Vendor: 0x1022, Device: 0x153e, Class: 0x060400, Group: 21, Speed: "32.0 GT/s PCIe", Width: 16, Secondary: 0x81, Children: []fakehost.Device{{
				Slot: 0, Vendor: 0x10de, Device: 0x2bb5, SubVendor: 0x10de, SubDevice: 0x204e, Class: 0x030200, Driver: "nvidia", Group: 22,
				Speed: "32.0 GT/s PCIe", Width: 16, VirtFns: []fakehost.Device{vf(4), vf(5)},
			}}},
		}}},
		Drivers: []string{"vfio-pci"},
		Links:   map[string]string{"etc/pve/local": "nodes/pve1", "etc/pve/qemu-server": "nodes/pve1/qemu-server"},
		Files: map[string]string{
			"etc/hostname": "pve1\n",
			"etc/pve/nodes/pve1/qemu-server/140.conf": conf,
		},
	}
	for _, fn := range []string{"4", "5"} {
		dir := "sys/devices/pci0000:80/0000:80:01.1/0000:81:00." + fn + "/nvidia/"
		m.Files[dir+"creatable_vgpu_types"] = "ID    : vGPU Name\n1234  : NVIDIA RTX PRO 6000 Blackwell DC-24Q\n"
		m.Files[dir+"current_vgpu_type"] = "0\n"
	}
	h, inv := guest(t, m) // a host here, made the same way
	return Predict(h, inv.Tree, 140, now)
}

// mdev=nvidia-N on a VF with the vGPU manager's sysfs: qemu-server passes the VF whole
// (vfio-pci,host=<VF>), so the manifest has it as the GPU's vGPU, on the GPU's node.
func TestNVIDIAVGPU(t *testing.T) {
	m, err := vgpuHost(t, "hostpci0: 0000:81:00.4,mdev=nvidia-1234,pcie=1\nhostpci1: 0000:81:00.5,mdev=nvidia-1234,pcie=1\nmachine: q35\n")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pathsOf(m), "hostpci0=0000:81:00.4@1c.0/00.0/fixed hostpci1=0000:81:00.5@1c.1/00.0/fixed"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for _, d := range m.Devices {
		if d.VGPU != "nvidia-1234" || d.PhysFn != "0000:81:00.0" || d.HostNUMA != 1 || d.Vendor != "10de" || d.Device != "2bb5" || !d.IsGPU() {
			t.Errorf("%s: %+v", d.Hostpci, d)
		}
	}
	if notes := strings.Join(m.Notes, "\n"); strings.Contains(notes, "not on vfio-pci") || strings.Contains(notes, "mediated") {
		t.Errorf("notes %q", m.Notes)
	}
	// A classic mediated device (no nvidia/ directory: the GPU itself here) is named in
	// a note and left out; several functions with mdev are refused as qemu-server does.
	if m, err = vgpuHost(t, "hostpci0: 0000:81:00.0,mdev=nvidia-1234,pcie=1\nhostpci1: 0000:81:00.4,mdev=nvidia-1234,pcie=1\nmachine: q35\n"); err != nil {
		t.Fatal(err)
	}
	if len(m.Devices) != 1 || m.Devices[0].Hostpci != "hostpci1" || !strings.Contains(strings.Join(m.Notes, "\n"), "hostpci0 is a mediated device (mdev=nvidia-1234)") {
		t.Errorf("devices %+v, notes %q", m.Devices, m.Notes)
	}
	if _, err := vgpuHost(t, "hostpci0: 0000:81:00.4;0000:81:00.5,mdev=nvidia-1234,pcie=1\nmachine: q35\n"); err == nil || !strings.Contains(err.Error(), "cannot use mediated device with multifunction device") {
		t.Errorf("err = %v", err)
	}
}

// vm-layout leaves a vGPU to qemu-server, which sets the VF's type at start.
func TestLayoutRefusesVGPU(t *testing.T) {
	m, err := vgpuHost(t, "hostpci0: 0000:81:00.4,mdev=nvidia-1234,pcie=1\nmachine: q35\nmemory: 4096\n")
	if err != nil {
		t.Fatal(err)
	}
	g, err := pve.ParseGuest("140.conf", pve.QEMU, 140, "hostpci0: 0000:81:00.4,mdev=nvidia-1234,pcie=1\nmachine: q35\nmemory: 4096\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(g, nil, m); err == nil || !strings.Contains(err.Error(), "hostpci0 is an NVIDIA vGPU (mdev=nvidia-1234)") {
		t.Errorf("err = %v", err)
	}
}
