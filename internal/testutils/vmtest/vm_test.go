package vmtest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"testing"

	"github.com/gpusplit/gpusplit/internal/testutils/gpusplitbin"
)

var update = flag.Bool("update", false, "rewrite the captured snapshots in testdata/vm")

// binary is the static gpusplit built once for every guest.
var binary string

func TestMain(m *testing.M) {
	bin, cleanup, err := gpusplitbin.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// Without QEMU, busybox or the kernel package these tests fail, never skip: they are what
// shows gpusplit reads a real kernel's sysfs right.
func newVM(t *testing.T) *VM {
	t.Helper()
	vm, err := NewVM(binary, "e1000e", "vfio-pci", "vfio_iommu_type1")
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// boots limits how many guests run at once: TCG keeps a core busy per guest CPU.
var boots = make(chan struct{}, 2)

func boot(t *testing.T, vm *VM, topo Topology, script string) *Result {
	t.Helper()
	boots <- struct{}{}
	defer func() { <-boots }()
	res, err := vm.Run(context.Background(), topo, script)
	if res != nil && res.Retried != "" {
		t.Logf("topology %s: booted a second time, the first boot failed before the test ran: %s", topo.Name, res.Retried)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// guestScript gathers gpusplit's view and the kernel's own, with the NICs as GPUs.
const guestScript = `
emit inventory gpusplit --devices ` + E1000E + ` inventory -o json
emit topo gpusplit --devices ` + E1000E + ` topo -o json
emit macs sh -c 'for n in /sys/class/net/*; do if [ -e $n/device ]; then echo "$(basename $(readlink -f $n/device)) $(cat $n/address)"; fi; done'
emit snapshot gpusplit snapshot -
emit kernel sh -c 'for d in /sys/bus/pci/devices/*; do g=$(readlink $d/iommu_group); v=$(readlink $d/driver); echo "$(basename $d) $(cat $d/numa_node) ${g##*/} ${v##*/} $(readlink -f $d)"; done'
`

// expectation is what a topology's description implies, written out by hand.
type expectation struct {
	numa      map[string]int
	relations map[[2]string]string // unordered pairs of endpoint ids
	companion map[string]string    // endpoint id → vendor:device of function 1 of its slot
}

func rel(pairs ...string) map[[2]string]string {
	m := map[[2]string]string{}
	for i := 0; i < len(pairs); i += 3 {
		m[[2]string{pairs[i], pairs[i+1]}] = pairs[i+2]
		m[[2]string{pairs[i+1], pairs[i]}] = pairs[i+2]
	}
	return m
}

var expected = map[string]expectation{
	"two-sockets": {
		numa: map[string]int{"nica": 0, "nicb": 0, "nicc": 1, "nicd": 1},
		relations: rel(
			"nica", "nicb", "NODE", "nicc", "nicd", "NODE",
			"nica", "nicc", "SYS", "nica", "nicd", "SYS", "nicb", "nicc", "SYS", "nicb", "nicd", "SYS"),
	},
	"switches": {
		numa: map[string]int{"nica": -1, "nicb": -1, "nicc": -1, "nicd": -1, "nice": -1},
		relations: rel(
			"nica", "nicb", "PIX", "nicc", "nicd", "PIX",
			"nica", "nicc", "PXB", "nica", "nicd", "PXB", "nicb", "nicc", "PXB", "nicb", "nicd", "PXB",
			"nice", "nica", "PHB", "nice", "nicb", "PHB", "nice", "nicc", "PHB", "nice", "nicd", "PHB"),
	},
	"flat-vm": {
		numa: map[string]int{"nica": -1, "nicb": -1, "nicc": -1, "nicd": -1},
		relations: rel(
			"nica", "nicb", "PHB", "nica", "nicc", "PHB", "nica", "nicd", "PHB",
			"nicb", "nicc", "PHB", "nicb", "nicd", "PHB", "nicc", "nicd", "PHB"),
		companion: map[string]string{"nica": "1b36:0010"},
	},
	"i440fx": {
		numa:      map[string]int{"nica": -1, "nicb": -1, "nicc": -1},
		relations: rel("nica", "nicb", "PHB", "nica", "nicc", "PHB", "nicb", "nicc", "PHB"),
	},
}

// kernelDevice is one line of the guest's own listing of /sys/bus/pci/devices.
type kernelDevice struct {
	numa    string
	group   string
	driver  string
	parents []string // bridges between the host bridge and the device, from its real path
	bridge  string   // the host bridge: pciDDDD:BB
}

func parseKernel(t *testing.T, text string) map[string]kernelDevice {
	t.Helper()
	out := map[string]kernelDevice{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		// "addr numa group driver path": group and driver may be empty, so split by
		// position from both ends.
		f := strings.Split(line, " ")
		if len(f) != 5 {
			t.Fatalf("kernel listing line %q", line)
		}
		comps := strings.Split(strings.TrimPrefix(f[4], "/sys/devices/"), "/")
		d := kernelDevice{numa: f[1], group: f[2], driver: f[3], bridge: comps[0], parents: comps[1 : len(comps)-1]}
		if comps[len(comps)-1] != f[0] {
			t.Fatalf("real path %s does not end in %s", f[4], f[0])
		}
		out[f[0]] = d
	}
	return out
}

type inventoryDoc struct {
	GPUs []struct {
		Address     string   `json:"address"`
		NUMANode    int      `json:"numa_node"`
		IOMMUGroup  int      `json:"iommu_group"`
		Members     []string `json:"iommu_group_members"`
		Driver      string   `json:"driver"`
		HostBridge  string   `json:"host_bridge"`
		RootPort    *string  `json:"root_port"`
		Parents     []string `json:"parents"`
		DeviceNodes []string `json:"device_nodes"`
		Functions   []struct {
			Address string `json:"address"`
			Vendor  string `json:"vendor"`
			Device  string `json:"device"`
		} `json:"functions"`
	} `json:"gpus"`
}

type topoDoc struct {
	GPUs         []string   `json:"gpus"`
	Matrix       [][]string `json:"matrix"`
	NUMAAffinity []int      `json:"numa_affinity"`
	Flat         bool       `json:"flat"`
}

func TestTopologies(t *testing.T) {
	vm := newVM(t)
	for _, topo := range Topologies() {
		t.Run(topo.Name, func(t *testing.T) {
			t.Parallel()
			want, ok := expected[topo.Name]
			if !ok {
				t.Fatalf("no expectation for %s", topo.Name)
			}
			res := boot(t, vm, topo, guestScript)
			checkGuest(t, topo, want, res)
			snap := output(t, res, "snapshot")
			if *update {
				// The snapshot, and which address each described NIC got (by its MAC),
				// for the tests that check the captures without QEMU.
				dir := filepath.Join("..", "..", "..", "testdata", "vm")
				if err := os.WriteFile(filepath.Join(dir, topo.Name+".tar.gz"), snap, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, topo.Name+".macs"), output(t, res, "macs"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// The fixture builder gives what this kernel shows for the same description.
			checkSnapshot(t, "the snapshot taken in the guest", snap, builtSnapshot(t, topo))
		})
	}
}

func output(t *testing.T, res *Result, name string) []byte {
	t.Helper()
	b, ok := res.Files[name]
	if !ok {
		t.Fatalf("the guest sent no %s\n%s", name, tail(res.Console, 30))
	}
	if res.Status[name] != 0 {
		t.Fatalf("%s exited with status %d:\n%s\n%s", name, res.Status[name], b, tail(res.Console, 30))
	}
	return b
}

func checkGuest(t *testing.T, topo Topology, want expectation, res *Result) {
	// Which address the firmware gave each described NIC, from the MACs.
	ids := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(output(t, res, "macs"))), "\n") {
		addr, mac, _ := strings.Cut(line, " ")
		for _, d := range topo.Devices {
			if d.Model == "e1000e" && macFor(d.ID) == mac {
				ids[addr] = d.ID
			}
		}
	}
	if len(ids) != len(want.numa) {
		t.Fatalf("found %d of the %d NICs by MAC address: %v", len(ids), len(want.numa), ids)
	}
	kernel := parseKernel(t, string(output(t, res, "kernel")))

	var inv inventoryDoc
	if err := json.Unmarshal(output(t, res, "inventory"), &inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != len(ids) {
		t.Fatalf("gpusplit counts %d devices %s, the guest has %d", len(inv.GPUs), E1000E, len(ids))
	}
	for _, g := range inv.GPUs {
		id, k := ids[g.Address], kernel[g.Address]
		if id == "" {
			t.Errorf("gpusplit lists %s, which is none of the described NICs", g.Address)
			continue
		}
		// gpusplit agrees with the kernel's own view...
		if fmt.Sprint(g.NUMANode) != k.numa || g.Driver != k.driver || g.HostBridge != k.bridge {
			t.Errorf("%s (%s): gpusplit says numa %d driver %q bridge %s, the kernel %s %q %s", g.Address, id, g.NUMANode, g.Driver, g.HostBridge, k.numa, k.driver, k.bridge)
		}
		if !slices.Equal(g.Parents, k.parents) {
			t.Errorf("%s (%s): parents %v, the kernel's path has %v", g.Address, id, g.Parents, k.parents)
		}
		if (g.RootPort == nil) != (len(k.parents) == 0) || (g.RootPort != nil && *g.RootPort != k.parents[0]) {
			t.Errorf("%s (%s): root port %v, path %v", g.Address, id, g.RootPort, k.parents)
		}
		wantGroup := k.group
		if wantGroup == "" {
			wantGroup = "-1"
		}
		if fmt.Sprint(g.IOMMUGroup) != wantGroup {
			t.Errorf("%s (%s): group %d, the kernel's link says %q", g.Address, id, g.IOMMUGroup, k.group)
		}
		var members []string
		for addr, other := range kernel {
			if k.group != "" && other.group == k.group {
				members = append(members, addr)
			}
		}
		slices.Sort(members)
		if !slices.Equal(g.Members, members) && !(len(members) == 0 && len(g.Members) == 0) {
			t.Errorf("%s (%s): group members %v, the kernel's %v", g.Address, id, g.Members, members)
		}
		// ...and with the description.
		if g.NUMANode != want.numa[id] {
			t.Errorf("%s (%s): NUMA node %d, the description says %d", g.Address, id, g.NUMANode, want.numa[id])
		}
		var companions []string
		for _, f := range g.Functions {
			companions = append(companions, f.Vendor+":"+f.Device)
		}
		if wantC := want.companion[id]; strings.Join(companions, ",") != wantC {
			t.Errorf("%s (%s): companion functions %v, want %q", g.Address, id, companions, wantC)
		}
	}

	var m topoDoc
	if err := json.Unmarshal(output(t, res, "topo"), &m); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(m.GPUs, strings.Compare) || len(m.GPUs) != len(ids) {
		t.Fatalf("topo rows %v", m.GPUs)
	}
	for i, a := range m.GPUs {
		for j, b := range m.GPUs {
			wantRel := "X"
			if i != j {
				wantRel = want.relations[[2]string{ids[a], ids[b]}]
			}
			if m.Matrix[i][j] != wantRel {
				t.Errorf("%s (%s) / %s (%s): %s, the description implies %s", a, ids[a], b, ids[b], m.Matrix[i][j], wantRel)
			}
		}
	}
	allNUMA := true
	for _, n := range want.numa {
		allNUMA = allNUMA && n < 0
	}
	flat := allNUMA && len(m.GPUs) > 1
	for _, r := range want.relations {
		flat = flat && r == "PHB"
	}
	if m.Flat != flat {
		t.Errorf("flat = %v, want %v", m.Flat, flat)
	}
}

// A device really bound to vfio-pci in the guest shows as such, with its /dev/vfio node.
func TestVFIOBinding(t *testing.T) {
	vm := newVM(t)
	script := `
a=$(for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor):$(cat $d/device)" = "0x8086:0x10d3" ] && basename $d; done | tail -1)
echo vfio-pci > /sys/bus/pci/devices/$a/driver_override
echo $a > /sys/bus/pci/devices/$a/driver/unbind
echo $a > /sys/bus/pci/drivers_probe
emit inventory gpusplit --devices $a inventory -o json
emit dev ls /dev/vfio
`
	res := boot(t, vm, FlatVM(), script)
	var inv inventoryDoc
	if err := json.Unmarshal(output(t, res, "inventory"), &inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 1 {
		t.Fatalf("%d devices", len(inv.GPUs))
	}
	g := inv.GPUs[0]
	node := fmt.Sprintf("/dev/vfio/%d", g.IOMMUGroup)
	if g.Driver != "vfio-pci" || g.IOMMUGroup < 0 || !slices.Contains(g.DeviceNodes, node) {
		t.Errorf("after binding: driver %q group %d nodes %v", g.Driver, g.IOMMUGroup, g.DeviceNodes)
	}
	if !slices.Contains(strings.Fields(string(output(t, res, "dev"))), fmt.Sprint(g.IOMMUGroup)) {
		t.Errorf("/dev/vfio holds %q, not group %d", output(t, res, "dev"), g.IOMMUGroup)
	}
}
