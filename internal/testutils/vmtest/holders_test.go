package vmtest

import (
	"encoding/json"
	"strings"
	"testing"
)

// The devices a real kernel shows in use, one of each kind: an NVMe controller whose
// disk is mounted, an e1000e whose interface is up, a bochs display whose DRM node a
// process holds open. Each on its own root port (its own IOMMU group).
func heldDevices() Topology {
	return Topology{Name: "held", IOMMU: true, Devices: []Device{
		rootPort("rp1", "pcie.0", "0x10.0", "multifunction=on"),
		rootPort("rp2", "pcie.0", "0x10.1"),
		rootPort("rp3", "pcie.0", "0x10.2"),
		{ID: "disk", Model: "nvme", Bus: "rp1", Addr: "0x0", Disk: 16 << 20},
		nic("nic", "rp2", "0x0"),
		{ID: "vga", Model: "bochs-display", Bus: "rp3", Addr: "0x0"},
	}}
}

// The devices by vendor:device, with the driver each starts on.
var heldKinds = []struct{ id, driver, holder string }{
	{"1b36:0010", "nvme", "/mnt/data mounted from nvme0n1"},
	{E1000E, "e1000e", "interface eth0 (up)"},
	{"1234:1111", "bochs-drm", "sleep (pid "},
}

const heldScript = `
mke2fs -q /dev/nvme0n1 && mkdir -p /mnt/data && mount -t ext4 /dev/nvme0n1 /mnt/data
ip link set eth0 up
sleep 600 < /dev/dri/card0 &
holder=$!
all=1b36:0010,` + E1000E + `,1234:1111
emit before gpusplit --devices $all inventory -o json
for d in 1b36:0010 ` + E1000E + ` 1234:1111; do
	emit plan-$d gpusplit --devices $d plan --vfio $d -o json
	emit dry-$d sh -c "gpusplit --devices $d apply --vfio $d --dry-run 2>&1"
	emit apply-$d sh -c "gpusplit --devices $d apply --vfio $d --yes 2>&1"
done
emit refused gpusplit --devices $all inventory -o json
emit journal sh -c 'ls /var/lib/gpusplit 2>&1'
# Released, the holders are gone and the same apply goes through: the refusals were
# their doing. The display stays on bochs-drm, under the guest's framebuffer console:
# that its holder is gone is what inventory shows.
umount /mnt/data
ip link set eth0 down
kill $holder
wait
emit free gpusplit --devices $all inventory -o json
emit released sh -c "gpusplit --devices 1b36:0010,` + E1000E + ` apply --vfio 1b36:0010,` + E1000E + ` --yes 2>&1"
emit after gpusplit --devices $all inventory -o json
`

// apply refuses to take a device a real kernel shows in use, changing nothing, and names
// the holder with the way to release it; released, the device moves.
func TestApplyRefusesDevicesInUse(t *testing.T) {
	vm, err := NewVM(binary, "e1000e", "vfio-pci", "vfio_iommu_type1", "nvme", "ext4", "crc32c_generic", "bochs")
	if err != nil {
		t.Fatal(err)
	}
	res := boot(t, vm, heldDevices(), heldScript)

	type invDoc struct {
		GPUs []struct {
			Address     string   `json:"address"`
			Vendor      string   `json:"vendor"`
			Device      string   `json:"device"`
			Driver      string   `json:"driver"`
			DeviceNodes []string `json:"device_nodes"`
			Holders     []struct {
				Kind string `json:"kind"`
				What string `json:"what"`
			} `json:"holders"`
		} `json:"gpus"`
	}
	drivers := func(name string) (map[string]string, invDoc) {
		var doc invDoc
		if err := json.Unmarshal(output(t, res, name), &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out := map[string]string{}
		for _, g := range doc.GPUs {
			out[g.Vendor+":"+g.Device] = g.Driver
		}
		return out, doc
	}
	before, doc := drivers("before")
	for _, k := range heldKinds {
		if before[k.id] != k.driver {
			t.Fatalf("%s starts on %q, want %s: %v", k.id, before[k.id], k.driver, before)
		}
	}
	for _, g := range doc.GPUs {
		if g.Vendor+":"+g.Device == "1234:1111" && !strings.Contains(strings.Join(g.DeviceNodes, " "), "/dev/dri/card0") {
			t.Errorf("the display's device nodes %v lack /dev/dri/card0", g.DeviceNodes)
		}
	}

	for _, k := range heldKinds {
		var p struct {
			Actions []struct {
				Device  string `json:"device"`
				Holders []struct {
					What    string `json:"what"`
					Release string `json:"release"`
				} `json:"holders"`
			} `json:"actions"`
		}
		if err := json.Unmarshal(output(t, res, "plan-"+k.id), &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Actions) != 1 || len(p.Actions[0].Holders) != 1 || !strings.HasPrefix(p.Actions[0].Holders[0].What, k.holder) {
			t.Errorf("%s: plan %+v, want its move held by %q", k.id, p.Actions, k.holder)
		}
		for _, run := range []string{"dry-", "apply-"} {
			out := string(res.Files[run+k.id])
			if res.Status[run+k.id] == 0 {
				t.Errorf("%s%s succeeded:\n%s", run, k.id, out)
			}
			// The refusal names the device and the way to release its holder, as the
			// plan gives it.
			release := ""
			if len(p.Actions) == 1 && len(p.Actions[0].Holders) == 1 {
				release = p.Actions[0].Holders[0].Release
			}
			if !strings.Contains(out, "nothing was changed") || !strings.Contains(out, "in use: "+p.Actions[0].Device) || release == "" || !strings.Contains(strings.Join(strings.Fields(out), " "), release) {
				t.Errorf("%s%s does not name the holder %q and its release:\n%s", run, k.id, k.holder, out)
			}
		}
	}
	refused, _ := drivers("refused")
	for _, k := range heldKinds {
		if refused[k.id] != k.driver {
			t.Errorf("after the refusals %s is on %q, want %s still", k.id, refused[k.id], k.driver)
		}
	}
	if j := string(res.Files["journal"]); strings.Contains(j, "journal.json") {
		t.Errorf("a refused apply wrote a journal: %s", j)
	}

	_, free := drivers("free")
	for _, g := range free.GPUs {
		if len(g.Holders) != 0 {
			t.Errorf("released, %s:%s still has holders %+v", g.Vendor, g.Device, g.Holders)
		}
	}
	output(t, res, "released")
	after, _ := drivers("after")
	for _, k := range heldKinds[:2] { // the NVMe controller and the NIC
		if after[k.id] != "vfio-pci" {
			t.Errorf("released, %s is on %q, want vfio-pci:\n%s", k.id, after[k.id], res.Files["released"])
		}
	}
}
