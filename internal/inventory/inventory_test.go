package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

func writeHost(t *testing.T, m fakehost.Machine) (*host.Host, string) {
	t.Helper()
	dir := t.TempDir()
	h, err := m.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h, dir
}

func gpuAt(slot uint8, driver string, group int) fakehost.Device {
	return fakehost.Device{
		Slot: 0, Vendor: 0x10de, Device: 0x2bb1, SubVendor: 0x10de, SubDevice: 0x204b, Class: 0x030000,
		Driver: driver, Group: group, Speed: "32.0 GT/s PCIe", Width: 16,
	}
}

func port(slot, bus uint8, group int, child fakehost.Device) fakehost.Device {
	return fakehost.Device{
		Slot: slot, Func: 0, Vendor: 0x1b36, Device: 0x000c, Class: 0x060400, Driver: "pcieport",
		Group: group, Speed: "16.0 GT/s PCIe", Width: 16, Secondary: bus, Children: []fakehost.Device{child},
	}
}

func machine() fakehost.Machine {
	return fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-7"}},
		IOMMU: true,
		Bridges: []fakehost.HostBridge{{NUMA: 0, Devices: []fakehost.Device{
			port(1, 1, 1, gpuAt(0, "nvidia", 11)),
			port(2, 2, 2, gpuAt(0, "vfio-pci", 12)),
			port(3, 3, 3, gpuAt(0, "", 13)),
		}}},
		NvidiaVersion: "580.95.05",
		Processes: []fakehost.Process{
			{PID: 100, Comm: "nvidia-smi", Cgroup: "/user.slice", Files: []string{"/dev/nvidiactl", "/dev/nvidia0"}},
			{PID: 200, Comm: "kvm", Cmdline: []string{"/usr/bin/kvm", "-id", "131"}, Cgroup: "/qemu.slice/131.scope", Files: []string{"/dev/vfio/vfio", "/dev/vfio/12"}},
			{PID: 300, Comm: "bash", Cgroup: "/user.slice", Files: []string{"/dev/vfio/13"}},
		},
	}
}

func TestBuild(t *testing.T) {
	h, _ := writeHost(t, machine())
	inv, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 3 {
		t.Fatalf("%d GPUs, want 3", len(inv.GPUs))
	}
	nv, vfio, none := inv.GPUs[0], inv.GPUs[1], inv.GPUs[2]
	if nv.Minor != 0 || strings.Join(nv.Nodes, ",") != "/dev/nvidia0" || len(nv.Holders) != 1 || nv.Holders[0].PID != 100 {
		t.Errorf("nvidia GPU: minor %d nodes %v holders %+v", nv.Minor, nv.Nodes, nv.Holders)
	}
	if vfio.Minor != -1 || strings.Join(vfio.Nodes, ",") != "/dev/vfio/12" || len(vfio.Holders) != 1 || vfio.Holders[0].VM != 131 {
		t.Errorf("vfio GPU: minor %d nodes %v holders %+v", vfio.Minor, vfio.Nodes, vfio.Holders)
	}
	// An unbound GPU has no device node, so the process holding /dev/vfio/13 is no holder.
	if len(none.Nodes) != 0 || len(none.Holders) != 0 {
		t.Errorf("unbound GPU: nodes %v holders %+v", none.Nodes, none.Holders)
	}
	if len(inv.Warnings) != 0 {
		t.Errorf("warnings: %v", inv.Warnings)
	}
}

func TestBuildSelectorsAndMissingInformation(t *testing.T) {
	h, dir := writeHost(t, machine())
	if err := os.Remove(filepath.Join(dir, "proc/driver/nvidia/gpus/0000:01:00.0/information")); err != nil {
		t.Fatal(err)
	}
	sels, err := pci.ParseSelectors("0000:01:00.0")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Build(h, sels)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 1 || inv.GPUs[0].Minor != -1 || len(inv.GPUs[0].Holders) != 0 {
		t.Fatalf("got %+v", inv.GPUs)
	}
	if len(inv.Warnings) != 1 || !strings.Contains(inv.Warnings[0], "0000:01:00.0") || !strings.Contains(inv.Warnings[0], "information") {
		t.Errorf("warnings %v, want one naming the GPU and its information file", inv.Warnings)
	}
	if _, err := Build(h, mustSelectors(t, "numa:3")); err == nil || !strings.Contains(err.Error(), "numa:3") {
		t.Errorf("numa:3: %v", err)
	}
}

func mustSelectors(t *testing.T, s string) []pci.Selector {
	t.Helper()
	sels, err := pci.ParseSelectors(s)
	if err != nil {
		t.Fatal(err)
	}
	return sels
}

func TestNvidiaMinor(t *testing.T) {
	real := "Model: \t\t NVIDIA RTX PRO 6000 Blackwell Workstation Edition\nIRQ:   \t\t 180\nGPU UUID: \t GPU-5e1a0001-2bb1-4c6e-9a00-3f52a0d10001\nVideo BIOS: \t 98.02.52.00.02\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t 0000:01:00.0\nDevice Minor: \t 5\nGPU Firmware: \t 580.95.05\nGPU Excluded:\t No\n"
	cases := []struct {
		name, text string
		want       int
		wantErr    bool
	}{
		{"real", real, 5, false},
		{"no minor line", "Model: \t\t NVIDIA\n", -1, true},
		{"garbage minor", "Device Minor: \t five\n", -1, true},
		{"control minor is not a GPU", "Device Minor: \t 255\n", -1, true},
		{"negative", "Device Minor: \t -1\n", -1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "proc/driver/nvidia/gpus/0000:01:00.0/information")
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			h, _ := host.Open(dir)
			got, err := NvidiaMinor(h, pci.Address{Bus: 1})
			if (err != nil) != c.wantErr || got != c.want {
				t.Errorf("got %d, %v; want %d (error %v)", got, err, c.want, c.wantErr)
			}
		})
	}
}
