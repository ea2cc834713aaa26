package vmlayout

import (
	"encoding/json"
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
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

var now = time.Unix(1764500000, 0)

// sample lays the sample host out in a directory, with files (paths from the root)
// replaced, and returns it with its inventory.
func sample(t *testing.T, files map[string]string) (*host.Host, *inventory.Inventory, string) {
	t.Helper()
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	write(t, dir, files)
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, inv, dir
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// afterSplit is the sample host after the reference split: the NUMA-1 GPUs on vfio-pci
// and pve sync's changes written (mapping pro6000-vm, VM 131 on it, bound to host node 1).
func afterSplit(t *testing.T) (*host.Host, *inventory.Inventory) {
	t.Helper()
	h, inv, dir := sample(t, nil)
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
	files := map[string]string{}
	for _, c := range changes {
		files[c.Path] = c.New
	}
	write(t, dir, files)
	return h, inv
}

func guest(t *testing.T, m fakehost.Machine) (*host.Host, *inventory.Inventory) {
	t.Helper()
	m.Files["proc/cpuinfo"] = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC 9335 32-Core Processor\nflags\t\t: fpu hypervisor\n\n"
	h, err := m.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, inv
}

func pathsOf(m *Manifest) string {
	var s []string
	for _, d := range m.Devices {
		s = append(s, d.Hostpci+"="+d.HostAddress.String()+"@"+d.GuestPath+"/"+d.Choice)
	}
	return strings.Join(s, " ")
}

// Before the split VM 131's four hostpci take the first four devices of mapping pro6000
// (which lists all eight), GPU and HDMI audio as functions 0 and 1 behind the root ports
// qemu-server gives hostpci0–3.
func TestPredictBeforeSplit(t *testing.T) {
	h, inv, _ := sample(t, nil)
	m, err := Predict(h, inv.Tree, 131, now)
	if err != nil {
		t.Fatal(err)
	}
	want := "hostpci0=0000:01:00.0@1c.0/00.0/predicted hostpci0=0000:01:00.1@1c.0/00.1/predicted " +
		"hostpci1=0000:11:00.0@1c.1/00.0/predicted hostpci1=0000:11:00.1@1c.1/00.1/predicted " +
		"hostpci2=0000:61:00.0@1c.2/00.0/predicted hostpci2=0000:61:00.1@1c.2/00.1/predicted " +
		"hostpci3=0000:71:00.0@1c.3/00.0/predicted hostpci3=0000:71:00.1@1c.3/00.1/predicted"
	if got := pathsOf(m); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if m.Machine != "q35" || m.Node != "kpro6" || len(m.GuestNUMA) != 0 {
		t.Errorf("machine %s node %s numa %v", m.Machine, m.Node, m.GuestNUMA)
	}
	joined := strings.Join(m.Notes, "\n")
	for _, w := range []string{"mapping pro6000 has 8 devices on this node", "hostpci3 gets 0000:71:00.0", "host NUMA nodes [0]", "numaN entries bind no guest node", "0000:01:00.0 (nvidia), 0000:11:00.0 (nvidia)"} {
		if !strings.Contains(joined, w) {
			t.Errorf("notes lack %q:\n%s", w, joined)
		}
	}
	d := m.Devices[0]
	if d.Vendor != "10de" || d.Device != "2bb1" || d.Class != "0x030000" || d.HostNUMA != 0 || d.LinkSpeed != "32.0 GT/s PCIe" || d.LinkWidth != 16 || d.Mapping != "pro6000" {
		t.Errorf("hostpci0: %+v", d)
	}
}

// The reference case end to end: the split and pve sync, the manifest of VM 131 on the
// host, the guest that VM is (four GPUs behind 1c.0–1c.3, one guest NUMA node bound to
// host node 1), and the topology file written in it.
func TestReferenceRoundTrip(t *testing.T) {
	h, inv := afterSplit(t)
	m, err := Predict(h, inv.Tree, 131, now)
	if err != nil {
		t.Fatal(err)
	}
	want := "hostpci0=0000:81:00.0@1c.0/00.0/predicted hostpci0=0000:81:00.1@1c.0/00.1/predicted " +
		"hostpci1=0000:91:00.0@1c.1/00.0/predicted hostpci1=0000:91:00.1@1c.1/00.1/predicted " +
		"hostpci2=0000:e1:00.0@1c.2/00.0/predicted hostpci2=0000:e1:00.1@1c.2/00.1/predicted " +
		"hostpci3=0000:f1:00.0@1c.3/00.0/predicted hostpci3=0000:f1:00.1@1c.3/00.1/predicted"
	if got := pathsOf(m); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if len(m.GuestNUMA) != 1 || m.GuestNUMA[0] != (GuestNode{Guest: 0, Host: 1, CPUs: "0-63"}) {
		t.Errorf("guest NUMA %+v", m.GuestNUMA)
	}
	// Through JSON, as the file travels to the guest.
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	gh, ginv := guest(t, fakehost.ProxmoxQ35Guest(4, []fakehost.Node{{ID: 0, CPUs: "0-63"}}))
	pairs, err := Match(m2, ginv.Tree, ginv.Devices())
	if err != nil {
		t.Fatal(err)
	}
	x, notes := GuestTopology(gh, m2, pairs)
	if len(notes) != 0 {
		t.Errorf("notes: %q", notes)
	}
	gpu := func(bus string) string {
		return `    <pci busid="0000:` + bus + `:00.0" class="0x030000" vendor="0x10de" device="0x2bb1" subsystem_vendor="0x10de" subsystem_device="0x204b" link_speed="32.0 GT/s PCIe" link_width="16"/>` + "\n"
	}
	wantXML := `<system version="1">
  <cpu numaid="0" affinity="ffffffff,ffffffff" arch="x86_64" vendor="AuthenticAMD" familyid="191" modelid="2">
` + gpu("01") + gpu("02") + gpu("03") + gpu("04") + `  </cpu>
</system>
`
	if got := string(nccl.Marshal(x)); got != wantXML {
		t.Errorf("got:\n%s\nwant:\n%s", got, wantXML)
	}
	if _, err := nccl.Parse(nccl.Marshal(x)); err != nil {
		t.Error(err)
	}
}

// Eight GPUs from both host nodes, with guest nodes bound to each: hostpci4–7 sit on
// root ports 10.0–10.3, which the firmware numbers first (buses 01–04), hostpci0–3 on
// 1c.0–1c.3 (buses 05–08); each guest node gets the GPUs of its host node.
func TestTwoNodes(t *testing.T) {
	vm := "cores: 32\nhostpci0: 0000:01:00,pcie=1\nhostpci1: 0000:11:00,pcie=1\nhostpci2: 0000:61:00,pcie=1\nhostpci3: 0000:71:00,pcie=1\n" +
		"hostpci4: 0000:81:00,pcie=1\nhostpci5: 0000:91:00,pcie=1\nhostpci6: 0000:e1:00,pcie=1\nhostpci7: 0000:f1:00,pcie=1\n" +
		"machine: q35\nmemory: 131072\nnuma: 1\nnuma0: cpus=0-31,hostnodes=0,memory=65536,policy=bind\nnuma1: cpus=32-63,hostnodes=1,memory=65536,policy=bind\nostype: l26\nsockets: 2\n"
	h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/132.conf": vm})
	m, err := Predict(h, inv.Tree, 132, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "0000:f1:00.0 (nvidia) not on vfio-pci now") {
		t.Errorf("notes: %q", m.Notes)
	}
	for _, d := range m.Devices {
		if d.Choice != "fixed" {
			t.Errorf("%s: choice %s", d.Hostpci, d.Choice)
		}
	}
	gh, ginv := guest(t, fakehost.ProxmoxQ35Guest(8, []fakehost.Node{{ID: 0, CPUs: "0-31"}, {ID: 1, CPUs: "32-63"}}))
	pairs, err := Match(m, ginv.Tree, ginv.Devices())
	if err != nil {
		t.Fatal(err)
	}
	x, _ := GuestTopology(gh, m, pairs)
	var got []string
	for _, c := range x.Children {
		id, _ := c.Get("numaid")
		aff, _ := c.Get("affinity")
		var buses []string
		for _, p := range c.Children {
			b, _ := p.Get("busid")
			buses = append(buses, b[5:7])
		}
		got = append(got, id+"("+aff+"):"+strings.Join(buses, ","))
	}
	if g := strings.Join(got, " "); g != "0(00000000,ffffffff):05,06,07,08 1(ffffffff,00000000):01,02,03,04" {
		t.Errorf("got %s", g)
	}
}

// The places of hostpci entries without pcie=1: on q35 the PCI bridges behind the DMI
// bridge at 1e.0, on i440fx the root bus and the bridge at 1f.0; a Windows 7 guest's
// pcie=1 devices sit on pcie.0 itself.
func TestConventionalSlots(t *testing.T) {
	for _, c := range []struct {
		name, conf, want string
	}{
		{"q35 pci.0", "hostpci0: 0000:01:00.0\nmachine: pc-q35-9.2+pve1\n", "hostpci0=0000:01:00.0@1e.0/01.0/10.0/fixed"},
		{"q35 pci.2", "hostpci5: 0000:01:00.0\nmachine: q35\n", "hostpci5=0000:01:00.0@1e.0/03.0/0e.0/fixed"},
		{"i440fx", "hostpci1: 01:00.0\n", "hostpci1=0000:01:00.0@11.0/fixed"},
		{"i440fx pci.2", "hostpci4: 01:00.0\n", "hostpci4=0000:01:00.0@1f.0/0d.0/fixed"},
		{"win7", "hostpci4: 0000:01:00.0,pcie=1\nmachine: q35\nostype: win7\n", "hostpci4=0000:01:00.0@09.0/fixed"},
		{"root port 12", "hostpci12: 0000:01:00.0,pcie=1\nmachine: q35\n", "hostpci12=0000:01:00.0@11.0/00.0/fixed"},
		{"two devices in one slot", "hostpci0: 0000:01:00.0;0000:11:00.0,pcie=1\nmachine: q35\n", "hostpci0=0000:01:00.0@1c.0/00.0/fixed hostpci0=0000:11:00.0@1c.0/00.1/fixed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": c.conf})
			m, err := Predict(h, inv.Tree, 140, now)
			if err != nil {
				t.Fatal(err)
			}
			if got := pathsOf(m); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// qemu-server skips the devices other VMs hold and reserves what it takes; a running VM's
// own reservations name its devices.
func TestReservations(t *testing.T) {
	conf := "hostpci0: mapping=pro6000,pcie=1\nmachine: q35\n"
	res := "0000:01:00.0 150 pid:1\n0000:01:00.1 150 pid:1\n" + // a running VM holds 01
		"0000:11:00.0 151 time:1764400000\n" + // an expired start-up reservation
		"0000:61:00.0 152 pid:99999\n" // a VM whose process is gone
	h, inv, _ := sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": conf, "run/qemu-server/pci-id-reservations": res, "proc/1/stat": "1 (kvm) S\n"})
	m, err := Predict(h, inv.Tree, 140, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Devices[0].HostAddress.String(); got != "0000:11:00.0" {
		t.Errorf("took %s, want 0000:11:00.0 (01 is held by VM 150)", got)
	}
	res += "0000:91:00.0 140 pid:1\n0000:91:00.1 140 pid:1\n0000:11:00.1 150 pid:1\n"
	h, inv, _ = sample(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": conf, "run/qemu-server/pci-id-reservations": res, "proc/1/stat": "1 (kvm) S\n"})
	if m, err = Predict(h, inv.Tree, 140, now); err != nil {
		t.Fatal(err)
	}
	if got := m.Devices[0].HostAddress.String() + " " + m.Devices[0].Choice; got != "0000:61:00.0 predicted" {
		t.Errorf("got %s", got)
	}
}

func TestPredictRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		vmid  int
		files map[string]string
		want  string
	}{
		{"no GPU", 140, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: 0000:82:00.0,pcie=1\nmachine: q35\n"}, "passes through no GPU"},
		{"no hostpci", 140, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "cores: 4\n"}, "passes through no GPU"},
		{"mapping on another node", 140, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: mapping=a6000-ws,pcie=1\nmachine: q35\n"}, "has no device on this node kpro6 (only on kpro5)"},
		{"unknown mapping", 140, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: mapping=nope\nmachine: q35\n"}, `mapping "nope"`},
		{"VM on another node", 120, nil, "VM 120 is on node kpro5"},
		{"no such VM", 999, nil, "no VM 999"},
		{"missing device", 140, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: 0000:42:00.0\n"}, "no PCI device 0000:42:00.0"},
		{"pcie on i440fx", 140, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: 0000:01:00.0,pcie=1\n"}, "i440fx"},
		{"twice", 140, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: 0000:01:00.0\nhostpci1: 0000:01:00.0\n"}, "assigned more than once"},
		{"hardware changed", 140, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: mapping=a6000-ws\n", "etc/hostname": "kpro5\n", "proc/sys/kernel/hostname": "kpro5\n"}, "pci device '0000:41:00.0' not found; qemu-server refuses"},
		{"all taken", 140, map[string]string{"etc/pve/nodes/kpro6/qemu-server/140.conf": "hostpci0: mapping=pro6000\nhostpci1: mapping=pro6000\nhostpci2: mapping=pro6000\nhostpci3: mapping=pro6000\nhostpci4: mapping=pro6000\nhostpci5: mapping=pro6000\nhostpci6: mapping=pro6000\nhostpci7: mapping=pro6000\nhostpci8: mapping=pro6000\n"}, "hostpci8: no free device among the 8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, inv, _ := sample(t, c.files)
			_, err := Predict(h, inv.Tree, c.vmid, now)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}

// A manifest that does not fit the guest is refused with every difference named.
func TestMatchRefuses(t *testing.T) {
	h, inv := afterSplit(t)
	m, err := Predict(h, inv.Tree, 131, now)
	if err != nil {
		t.Fatal(err)
	}
	// The eight-GPU guest has four GPUs more than VM 131.
	_, ginv := guest(t, fakehost.Q35Guest8())
	_, err = Match(m, ginv.Tree, ginv.Devices())
	if err == nil || !strings.Contains(err.Error(), "GPU 0000:01:00.0 (10de:2bb1) at 10.0/00.0 is not in the manifest") || strings.Count(err.Error(), "not in the manifest") != 4 {
		t.Errorf("err = %v", err)
	}
	// An i440fx guest has nothing at 1c.0.
	_, ginv = guest(t, fakehost.I440fxGuest4())
	_, err = Match(m, ginv.Tree, ginv.Devices())
	if err == nil || !strings.Contains(err.Error(), "hostpci0 (10de:2bb1, host 0000:81:00.0) should be at 1c.0/00.0, where this guest has no device") || !strings.Contains(err.Error(), "nccl-topo --vm 131") {
		t.Errorf("err = %v", err)
	}
	// Other ids at the right place.
	m.Devices[0].Device = "2bb5"
	_, ginv = guest(t, fakehost.ProxmoxQ35Guest(4, []fakehost.Node{{ID: 0, CPUs: "0-63"}}))
	_, err = Match(m, ginv.Tree, ginv.Devices())
	if err == nil || !strings.Contains(err.Error(), "where this guest has 10de:2bb1 (0000:01:00.0)") {
		t.Errorf("err = %v", err)
	}
}

func TestParseManifestRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"version": 2, "devices": [{}]}`, "version 2"},
		{`{"version": 1, "vmid": 5, "devices": []}`, "lists no devices"},
		{`{"version": 1, "devices": [{"hostpci": "hostpci0", "guest_path": "1c.0/0"}]}`, "not a device.function"},
		{`{"version": 1, "surprise": 1}`, "unknown field"},
		{`<system version="1">`, "not a gpusplit VM manifest"},
	} {
		if _, err := ParseManifest([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.in, err, c.want)
		}
	}
}
