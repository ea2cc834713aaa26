package inventory

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// Every device that moves with a GPU is checked, not the GPU alone: an AMD GPU (amdgpu,
// with DRM nodes) whose IOMMU group also holds a NIC that is up and whose audio function
// a sound server holds; an NVMe controller elsewhere is checked when asked for.
func TestHoldersOfWhatMovesWithAGPU(t *testing.T) {
	gpu := "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
	audio := "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.1"
	nic := "/sys/devices/pci0000:00/0000:00:03.0"
	disk := "/sys/devices/pci0000:00/0000:00:02.0/nvme/nvme0/nvme0n1"
	m := fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-7"}},
		IOMMU: true,
		Bridges: []fakehost.HostBridge{{NUMA: 0, Devices: []fakehost.Device{
			{Slot: 1, Vendor: 0x1022, Device: 0x1483, Class: 0x060400, Driver: "pcieport", Group: 1, Speed: "16.0 GT/s PCIe", Width: 16, Secondary: 1,
				Children: []fakehost.Device{
					{Slot: 0, Func: 0, Vendor: 0x1002, Device: 0x744c, Class: 0x030000, Driver: "amdgpu", Group: 7, Speed: "16.0 GT/s PCIe", Width: 16},
					{Slot: 0, Func: 1, Vendor: 0x1002, Device: 0xab30, Class: 0x040300, Driver: "snd_hda_intel", Group: 7, Speed: "16.0 GT/s PCIe", Width: 16},
				}},
			{Slot: 3, Vendor: 0x8086, Device: 0x10d3, Class: 0x020000, Driver: "e1000e", Group: 7, Speed: "2.5 GT/s PCIe", Width: 1},
			{Slot: 2, Vendor: 0x144d, Device: 0xa80a, Class: 0x010802, Driver: "nvme", Group: 2, Speed: "16.0 GT/s PCIe", Width: 4},
		}}},
		Processes: []fakehost.Process{
			{PID: 50, Comm: "wireplumber", Cgroup: "/user.slice", Files: []string{"/dev/snd/controlC0"}},
			{PID: 60, Comm: "ollama", Cmdline: []string{"/usr/local/bin/ollama", "serve"}, Cgroup: "/system.slice/ollama.service", Files: []string{"/dev/dri/renderD128", "/dev/kfd"}},
		},
		Files: map[string]string{
			gpu + "/drm/card0/uevent":               "MAJOR=226\nMINOR=0\nDEVNAME=dri/card0\nDEVTYPE=drm_minor\n",
			gpu + "/drm/renderD128/uevent":          "MAJOR=226\nMINOR=128\nDEVNAME=dri/renderD128\nDEVTYPE=drm_minor\n",
			audio + "/sound/card0/controlC0/uevent": "MAJOR=116\nMINOR=0\nDEVNAME=snd/controlC0\n",
			nic + "/net/enp1s0f2/flags":             "0x1003\n",
			nic + "/net/enp1s0f2/operstate":         "up\n",
			disk + "/dev":                           "259:0\n",
			"/proc/self/mountinfo":                  "30 1 259:0 / /var/lib/vz rw,relatime shared:5 - ext4 /dev/nvme0n1 rw\n",
			"/sys/devices/virtual/net/lo/flags":     "0x9\n",
			"/sys/devices/virtual/net/lo/operstate": "unknown\n",
		},
		Links: map[string]string{
			"/sys/class/net/enp1s0f2": "../../devices/pci0000:00/0000:00:03.0/net/enp1s0f2",
			"/sys/class/net/lo":       "../../devices/virtual/net/lo",
			"/sys/block/nvme0n1":      "../devices/pci0000:00/0000:00:02.0/nvme/nvme0/nvme0n1",
		},
	}
	h, _ := writeHost(t, m)
	inv, err := Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 1 {
		t.Fatalf("GPUs %+v", inv.GPUs)
	}
	g := inv.GPUs[0]
	if got := strings.Join(g.Nodes, " "); got != "/dev/dri/card0 /dev/dri/renderD128" {
		t.Errorf("GPU nodes %q", got)
	}
	// Build checks them all in one pass over the machine (Holders), not one by one.
	texts := func(a string, lookup func(pci.Address) []holders.Holder) []string {
		addr, _ := pci.ParseAddress(a)
		var out []string
		for _, h := range lookup(addr) {
			out = append(out, h.String())
		}
		return out
	}
	for addr, want := range map[string][]string{
		"0000:01:00.0": {"ollama (pid 60)"},
		"0000:01:00.1": {"wireplumber (pid 50)"},
		"0000:00:03.0": {"interface enp1s0f2 (up)"},
	} {
		if got := texts(addr, func(a pci.Address) []holders.Holder { return inv.Holders[a] }); !slices.Equal(got, want) {
			t.Errorf("%s: holders %q, want %q", addr, got, want)
		}
	}
	if len(g.Holders) != 1 || g.Holders[0].PID != 60 {
		t.Errorf("the GPU's own holders %+v", g.Holders)
	}
	if _, ok := inv.Holders[pci.Address{Bus: 0, Device: 2}]; ok {
		t.Errorf("the NVMe controller moves with no GPU, yet it was checked by Build")
	}
	// Without an IOMMU there are no groups, and the functions still move with the GPU.
	m.IOMMU = false
	h, _ = writeHost(t, m)
	if inv, err = Build(h, nil); err != nil {
		t.Fatal(err)
	}
	if got := texts("0000:01:00.1", func(a pci.Address) []holders.Holder { return inv.Holders[a] }); !slices.Equal(got, []string{"wireplumber (pid 50)"}) {
		t.Errorf("without an IOMMU, the audio function's holders %q", got)
	}
	// A device no GPU takes along (one a rollback journal names) is checked on demand.
	if got := texts("0000:00:02.0", inv.HoldersOf); !slices.Equal(got, []string{"/var/lib/vz mounted from nvme0n1"}) {
		t.Errorf("NVMe controller: holders %q", got)
	}
}
