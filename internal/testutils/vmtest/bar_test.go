package vmtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/addrspace"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// standIn is a QEMU device playing one function of a passed device, with the BARs the
// address-space plan is given for it: those addrspace.DeviceOf would read from the
// function's sysfs resource (memory BARs only).
type standIn struct {
	qemu string
	bars []addrspace.BAR
}

// testdev is QEMU's pci-testdev (hw/misc/pci-testdev.c) with a membar: BAR 0 of 4 KiB
// 32-bit memory, BAR 1 I/O ports (which DeviceOf leaves out), BAR 2 the membar, 64-bit
// prefetchable of any power-of-two size backed by nothing, and no ROM without a romfile.
// Each boot checks this against the guest's sysfs (checkLayout).
func testdev(membar uint64) standIn {
	size := fmt.Sprintf("%dM", membar>>20)
	if membar%(1<<30) == 0 {
		size = fmt.Sprintf("%dG", membar>>30)
	}
	return standIn{
		qemu: "pci-testdev,membar=" + size,
		bars: []addrspace.BAR{{Index: 0, Size: 4 << 10}, {Index: 2, Size: membar, Is64Bit: true, Prefetchable: true}},
	}
}

// bar64 is the 64-bit BAR of a stand-in.
func (s standIn) bar64() addrspace.BAR {
	for _, b := range s.bars {
		if b.Is64Bit {
			return b
		}
	}
	panic("stand-in " + s.qemu + " has no 64-bit BAR")
}

// standIns gives each of the VM's hostpci0…hostpci(n-1) the functions fns: the
// harness's StandIns, and the devices as the plan takes them.
func standIns(n int, fns []standIn) (map[string]string, []addrspace.Device) {
	qemu := map[string]string{}
	var devices []addrspace.Device
	for i := range n {
		entry := fmt.Sprintf("hostpci%d", i)
		d := addrspace.Device{Entry: entry}
		var devs []string
		for f, fn := range fns {
			d.Functions = append(d.Functions, addrspace.Function{Address: fmt.Sprintf("%s.%d", entry, f), BARs: fn.bars})
			devs = append(devs, fn.qemu)
		}
		qemu[entry] = strings.Join(devs, ";")
		devices = append(devices, d)
	}
	return qemu, devices
}

// withSettings writes the plan's cpu and args values into the config as pve sync does
// (syncAddressSpace: Guest.Set of each that the plan gives).
func withSettings(t *testing.T, config string, r *addrspace.Result) string {
	t.Helper()
	g, err := pve.ParseGuest("vm.conf", pve.QEMU, 131, config)
	if err != nil {
		t.Fatal(err)
	}
	if r.CPU != "" {
		g.Set("cpu", r.CPU)
	}
	if r.Args != "" {
		g.Set("args", r.Args)
	}
	return g.String()
}

// placement is what the plan's model says the VM's own firmware makes of it as set up.
func placement(r *addrspace.Result) addrspace.Placement {
	if r.Firmware == "ovmf" {
		return r.OVMF
	}
	return r.SeaBIOS
}

// sampleCPU is the sample host's CPU (AMD EPYC, 52 bits, 1 GiB pages), which the plans
// here are made for. The harness's guests run QEMU's qemu64 under TCG, which reports
// AuthenticAMD, as KVM would report the host's vendor: the plan's vendor is the guest's.
func sampleCPU(t *testing.T) addrspace.HostCPU {
	t.Helper()
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := addrspace.ReadHostCPU(h)
	if err != nil {
		t.Fatal(err)
	}
	return cpu
}

// barCase is one firmware with the cpu:/args: lines of a VM whose GPUs' BARs do not all
// find room as it is set up: the address-space plan gives the settings that make room.
//
//   - SeaBIOS with QEMU's default 40 address bits: Debian's SeaBIOS 1.16.2 puts the 64-bit
//     window right above memory, aligned to its largest BAR: [128 GiB, 1152 GiB) for
//     eight 128 GiB BARs, past the 1 TiB that 40 bits reach; the guest kernel ignores the
//     part beyond, and the BAR in it. (The plan follows SeaBIOS 1.16.3 and later, which
//     put the window at the top of the address width instead.)
//   - OVMF with 40 bits: its window is the top eighth of the width, 128 GiB, one BAR.
//   - OVMF with phys-bits=44 but no 1 GiB pages: OVMF believes CPUID's width above 40
//     bits only with pdpe1gb, and takes 40.
var barCases = []barCase{
	{name: "seabios", firmware: "seabios"},
	{name: "ovmf", firmware: "ovmf"},
	{name: "ovmf-44-bits", firmware: "ovmf", without: "cpu: qemu64,phys-bits=44\n"},
}

type barCase struct {
	name     string
	firmware string // seabios or ovmf
	without  string
}

// barBoot is one VM to boot, and what the plan's model says its firmware makes of it.
type barBoot struct {
	name    string
	vm      PVEVM
	fns     []standIn // the functions of each hostpci entry's stand-in
	model   addrspace.Placement
	planned bool // the config has the plan's settings: every BAR must be assigned
}

// vm131Drop are the keys of the sample host's VM 131 that add devices the harness
// does not model (disks, the NIC, the agent's and balloon's virtio devices, NUMA
// nodes); none of them has a BAR in the 64-bit window.
var vm131Drop = []string{"agent", "balloon", "net0", "numa", "scsi0", "scsihw"}

// vm131 is the sample host's VM 131 given all eight GPUs through its mapping pro6000
// (it has hostpci0–3; the mapping holds kpro6's eight), with Proxmox's default CPU model
// for new VMs, x86-64-v2-AES, and so QEMU's 40 bits, in place of its cpu: host (which
// gives it the host's 52 bits and needs no settings). tcg makes it run in the harness:
// kvm: 0, one vCPU (sockets and cores 1, for 2 × 32), 1 GiB of memory (for 256 GiB; the
// plan is the same, checked in barBoots), and without the devices of vm131Drop.
func vm131(t *testing.T, tcg bool) string {
	t.Helper()
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	text, err := h.ReadString("/etc/pve/nodes/kpro6/qemu-server/131.conf")
	if err != nil {
		t.Fatal(err)
	}
	g, err := pve.ParseGuest("131.conf", pve.QEMU, 131, text)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := g.Get("cpu"); v != "host" {
		t.Fatalf("the sample's VM 131 has cpu %q, not host", v)
	}
	g.Set("cpu", "x86-64-v2-AES")
	for i := 4; i < 8; i++ {
		g.Set(fmt.Sprintf("hostpci%d", i), "mapping=pro6000,pcie=1")
	}
	if tcg {
		g.Set("kvm", "0")
		g.Set("sockets", "1")
		g.Set("cores", "1")
		g.Set("memory", "1024")
		for _, k := range vm131Drop {
			if !g.Delete(k) {
				t.Fatalf("the sample's VM 131 has no %s", k)
			}
		}
	}
	return g.String()
}

// sampleGPUs are the sample host's eight GPUs as pve sync passes them to VM 131
// (passedDevices: the mapping's GPUs of this node, all alike, each a whole slot with its
// HDMI function), their BARs read by addrspace.DeviceOf from the sample's sysfs.
func sampleGPUs(t *testing.T) []addrspace.Device {
	t.Helper()
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 8 {
		t.Fatalf("the sample host has %d GPUs", len(inv.GPUs))
	}
	var out []addrspace.Device
	for i, g := range inv.GPUs {
		out = append(out, addrspace.DeviceOf(h, fmt.Sprintf("hostpci%d", i), append([]*pci.Device{g.Device}, g.Functions...)...))
	}
	return out
}

// barBoots are the VMs TestFirmwareAssignsLargeBARs boots: each case without and with
// the plan's settings, and VM 131 with those the plan gives it.
func barBoots(t *testing.T) []barBoot {
	t.Helper()
	cpu := sampleCPU(t)
	gpu := []standIn{testdev(gpuBAR)}
	qemu, devices := standIns(8, gpu)
	var boots []barBoot
	for _, c := range barCases {
		vm, err := eightGPUs(c.firmware, c.without)
		if err != nil {
			t.Fatal(err)
		}
		vm.StandIns = qemu
		r, err := addrspace.Plan(vm.Config, devices, cpu)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != addrspace.NeedsSettings || r.Planned == nil {
			t.Fatalf("%s: the plan's outcome is %s, want %s (notes %q, problems %q)", c.name, r.Outcome, addrspace.NeedsSettings, r.Notes, r.Problems)
		}
		with := vm
		with.Config = withSettings(t, vm.Config, r)
		t.Logf("%s: the plan sets cpu %q, args %q:\n  %s", c.name, r.CPU, r.Args, strings.Join(r.Settings, "\n  "))
		boots = append(boots,
			barBoot{name: c.name + "/without", vm: vm, fns: gpu, model: placement(r)},
			barBoot{name: c.name + "/with", vm: with, fns: gpu, model: *r.Planned, planned: true})
	}

	// VM 131: the plan pve sync makes for it, from the sample host's GPUs and CPU; the
	// same for the VM as it is and as the harness runs it.
	gpus := sampleGPUs(t)
	r, err := addrspace.Plan(vm131(t, true), gpus, cpu)
	if err != nil {
		t.Fatal(err)
	}
	full, err := addrspace.Plan(vm131(t, false), gpus, cpu)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != addrspace.NeedsSettings || full.Outcome != r.Outcome || full.CPU != r.CPU || full.Args != r.Args {
		t.Fatalf("VM 131 plans as %s: cpu %q, args %q; with 256 GiB and its devices as %s: cpu %q, args %q",
			r.Outcome, r.CPU, r.Args, full.Outcome, full.CPU, full.Args)
	}
	t.Logf("VM 131: the plan sets cpu %q, args %q:\n  %s", r.CPU, r.Args, strings.Join(r.Settings, "\n  "))
	// Each GPU is played by its two 64-bit BARs, BAR 1 (128 GiB) and BAR 3 (32 MiB), as
	// two functions of the slot: together they make each root port's window 128 GiB +
	// 32 MiB, which takes 256 GiB of the firmware's window at its 128 GiB alignment, as
	// the GPU does. Its 32-bit BAR, ROM and HDMI function, all below 4 GiB, are not played.
	slot := []standIn{testdev(gpuBAR), testdev(32 << 20)}
	qemu131, devices131 := standIns(8, slot)
	vm := PVEVM{Name: "131", Config: withSettings(t, vm131(t, true), r), StandIns: qemu131}
	played, err := addrspace.Plan(vm.Config, devices131, cpu)
	if err != nil {
		t.Fatal(err)
	}
	asGPUs, err := addrspace.Plan(vm.Config, gpus, cpu)
	if err != nil {
		t.Fatal(err)
	}
	if played.Outcome != addrspace.OK || asGPUs.Outcome != addrspace.OK || placement(played).Need != placement(asGPUs).Need {
		t.Fatalf("with the plan's settings, the model places the stand-ins as %s (%d bytes of window), the GPUs as %s (%d bytes)",
			played.Outcome, placement(played).Need, asGPUs.Outcome, placement(asGPUs).Need)
	}
	return append(boots, barBoot{name: "vm131/with", vm: vm, fns: slot, model: placement(played), planned: true})
}

// barScript lists every pci-testdev (1b36:0005) as the guest's sysfs shows it: its
// address, the root port above it, and the first seven lines of its resource file (BARs
// 0–5 and the ROM: start end flags); then what the kernel logged of its PCI setup.
const barScript = `
emit bars sh -c 'for d in /sys/bus/pci/devices/*; do if [ "$(cat $d/vendor):$(cat $d/device)" = "0x1b36:0x0005" ]; then echo "$(basename $d) $(basename $(dirname $(readlink -f $d))) $(head -n 7 $d/resource | tr "\n" " ")"; fi; done'
emit log sh -c 'dmesg | grep -iE "pci|bar|window|address"'
emit cpu sh -c 'grep -m1 "address sizes" /proc/cpuinfo'
`

// resource is one line of a sysfs resource file.
type resource struct{ start, end, flags uint64 }

// Kernel resource flags (include/linux/ioport.h).
const (
	ioresourceMem      = 0x200
	ioresourcePrefetch = 0x2000
	ioresourceMem64    = 0x100000
)

func (r resource) size() uint64 {
	if r.flags == 0 {
		return 0
	}
	return r.end - r.start + 1
}

// guestFn is one stand-in function as the guest shows it.
type guestFn struct {
	addr  string // the guest's address
	entry string // the hostpci entry whose root port it sits behind
	fn    int
	res   [7]resource
}

// entryOfPort is the hostpci entry whose root port sits at the guest address port.
func entryOfPort(port string) string {
	for i := range 16 {
		if port == "0000:00:"+rootPortSlot(i) {
			return fmt.Sprintf("hostpci%d", i)
		}
	}
	return ""
}

// guestBARs is what one boot showed: the hostpci entries whose 64-bit BARs the guest's
// sysfs shows all assigned (with their addresses) and those with one unassigned, the
// kernel's lines saying a BAR or window found no room, and the CPU's address sizes.
type guestBARs struct {
	fns        []guestFn
	assigned   []string // "hostpci0: 0000:02:00.0 at 0x000000e000000000"
	unassigned []string // hostpci entries
	failed     []guestFn
	noRoom     []string
	cpu        string
}

var noRoomLine = []string{"no space", "failed to assign", "can't assign", "can't claim", "not CPU addressable"}

func readBARs(t *testing.T, res *Result, entries int, fns []standIn) guestBARs {
	t.Helper()
	var g guestBARs
	text := strings.TrimSpace(string(output(t, res, "bars")))
	lines := strings.Split(text, "\n")
	if len(lines) != entries*len(fns) {
		t.Fatalf("the guest lists %d stand-ins, want %d:\n%s", len(lines), entries*len(fns), text)
	}
	unassigned := map[string]bool{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2+3*7 {
			t.Fatalf("stand-in line %q", line)
		}
		gf := guestFn{addr: f[0], entry: entryOfPort(f[1])}
		_, fn, _ := strings.Cut(gf.addr, ".")
		var err error
		if gf.fn, err = strconv.Atoi(fn); err != nil || gf.entry == "" || gf.fn >= len(fns) {
			t.Fatalf("stand-in %s behind %s: not a function of a hostpci entry's root port", f[0], f[1])
		}
		for i := range gf.res {
			var v [3]uint64
			for j := range v {
				if v[j], err = strconv.ParseUint(f[2+3*i+j], 0, 64); err != nil {
					t.Fatalf("stand-in line %q: %v", line, err)
				}
			}
			gf.res[i] = resource{v[0], v[1], v[2]}
		}
		g.fns = append(g.fns, gf)
		// Assigned: an address, the whole BAR, a 64-bit prefetchable memory resource.
		// The kernel zeroes a resource it failed to assign.
		want := fns[gf.fn].bar64()
		r := gf.res[want.Index]
		if r.start != 0 && r.size() == want.Size && r.flags&(ioresourceMem|ioresourcePrefetch|ioresourceMem64) == ioresourceMem|ioresourcePrefetch|ioresourceMem64 {
			g.assigned = append(g.assigned, fmt.Sprintf("%s: %s at %#x", gf.entry, gf.addr, r.start))
		} else {
			unassigned[gf.entry] = true
			g.failed = append(g.failed, gf)
		}
	}
	g.unassigned = slices.Sorted(maps.Keys(unassigned))
	slices.Sort(g.assigned)
	for _, line := range strings.Split(string(output(t, res, "log")), "\n") {
		if slices.ContainsFunc(noRoomLine, func(s string) bool { return strings.Contains(line, s) }) {
			g.noRoom = append(g.noRoom, strings.TrimSpace(line))
		}
	}
	g.cpu = strings.TrimSpace(string(output(t, res, "cpu")))
	return g
}

// checkLayout compares each stand-in's memory BARs in the guest with those the plan was
// given for it: every BAR the guest shows is one of them, with its size, width and
// prefetchability; every one but the 64-bit BAR is there (that one may be unassigned).
func checkLayout(t *testing.T, g guestBARs, fns []standIn) {
	t.Helper()
	for _, gf := range g.fns {
		bars := fns[gf.fn].bars
		for i, r := range gf.res {
			if r.flags&ioresourceMem == 0 {
				continue // I/O ports or nothing
			}
			k := slices.IndexFunc(bars, func(b addrspace.BAR) bool { return b.Index == i })
			if k < 0 {
				t.Errorf("%s: BAR %d (%d bytes, flags %#x) is not among the BARs the plan was given: %+v", gf.addr, i, r.size(), r.flags, bars)
				continue
			}
			b := bars[k]
			if r.size() != b.Size || r.flags&ioresourceMem64 != 0 != b.Is64Bit || r.flags&ioresourcePrefetch != 0 != b.Prefetchable {
				t.Errorf("%s: BAR %d is %d bytes, flags %#x; the plan was given %+v", gf.addr, i, r.size(), r.flags, b)
			}
		}
		for _, b := range bars {
			if !b.Is64Bit && gf.res[b.Index].flags&ioresourceMem == 0 {
				t.Errorf("%s: the guest shows no BAR %d, which the plan was given: %+v", gf.addr, b.Index, b)
			}
		}
	}
}

// Eight GPU-sized BARs in a VM started as qemu-server starts it: without the settings
// some stay unassigned, as in the story, and the kernel says for each that it found no
// space; with those the address-space plan gives, the firmware assigns all eight, read
// from the guest's own sysfs. Under SeaBIOS and under OVMF, each boot timed; and the
// sample host's VM 131, given its eight GPUs, with the settings pve sync writes for it.
// Each boot is also held against the plan's model of that firmware: the guest must
// leave as many entries unassigned as the model says (which ones, it logs where they
// differ).
func TestFirmwareAssignsLargeBARs(t *testing.T) {
	vm := newVM(t)
	vm.Timeout = 4 * time.Minute // OVMF under TCG takes up to a minute to start
	for _, b := range barBoots(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			boots <- struct{}{}
			start := time.Now()
			res, err := vm.RunPVE(context.Background(), b.vm, barScript)
			took := time.Since(start)
			<-boots
			if res != nil && res.Retried != "" {
				t.Logf("booted a second time, the first boot failed before the test ran: %s", res.Retried)
			}
			if err != nil {
				t.Fatal(err)
			}
			g := readBARs(t, res, 8, b.fns)
			t.Logf("%d of 8 entries' BARs assigned, boot and script in %.0f s; %s\nconfig:\n%s\nassigned: %v\nunassigned: %v\nthe kernel's lines on room:\n  %s",
				8-len(g.unassigned), took.Seconds(), g.cpu, b.vm.Config, g.assigned, g.unassigned, strings.Join(g.noRoom, "\n  "))
			checkLayout(t, g, b.fns)
			model := slices.Sorted(slices.Values(b.model.Unassigned))
			if len(model) != len(g.unassigned) {
				t.Errorf("the plan's model says the firmware leaves %d entries unassigned (%v), the guest shows %d (%v)",
					len(b.model.Unassigned), b.model.Unassigned, len(g.unassigned), g.unassigned)
			} else if !slices.Equal(model, g.unassigned) {
				t.Logf("the plan's model and the guest agree on the number unassigned, not on which: the model %v, the guest %v", b.model.Unassigned, g.unassigned)
			}
			if b.planned {
				if len(g.unassigned) > 0 {
					t.Errorf("with the plan's settings, %d of 8 entries have a BAR unassigned: %v", len(g.unassigned), g.unassigned)
				}
				return
			}
			if len(g.unassigned) == 0 {
				t.Errorf("without the settings all 8 BARs were assigned: the case proves nothing")
			}
			// The story's line, for each BAR the guest's sysfs shows unassigned.
			for _, gf := range g.failed {
				bar := b.fns[gf.fn].bar64()
				story := fmt.Sprintf("%s: BAR %d [mem size %#010x 64bit pref]: can't assign; no space", gf.addr, bar.Index, bar.Size)
				if !slices.ContainsFunc(g.noRoom, func(l string) bool { return strings.HasSuffix(l, story) }) {
					t.Errorf("%s: BAR %d unassigned, but the kernel did not log %q", gf.addr, bar.Index, story)
				}
			}
		})
	}
}
