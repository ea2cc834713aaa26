package addrspace

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pveprop"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// sample is the embedded sample host (kpro6: 8 × RTX PRO 6000, AMD EPYC 9335).
func sample(t *testing.T) (*host.Host, *inventory.Inventory, HostCPU) {
	t.Helper()
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := ReadHostCPU(h)
	if err != nil {
		t.Fatal(err)
	}
	return h, inv, cpu
}

// gpus are the sample host's first n GPUs as hostpci0…, each with its HDMI audio
// function, their BARs read from the sample's sysfs.
func gpus(t *testing.T, n int) []Device {
	t.Helper()
	h, inv, _ := sample(t)
	if len(inv.GPUs) < n {
		t.Fatalf("the sample host has %d GPUs", len(inv.GPUs))
	}
	var out []Device
	for i, g := range inv.GPUs[:n] {
		out = append(out, DeviceOf(h, fmt.Sprintf("hostpci%d", i), append(g.Functions, g.Device)...))
	}
	return out
}

// vm131 is the sample host's VM 131 given n GPUs through its mapping, with the cpu and
// bios options replaced ("" drops one) and lines added.
func vm131(t *testing.T, n int, cpu, bios string, extra ...string) string {
	t.Helper()
	h, _, _ := sample(t)
	text, err := h.ReadString("/etc/pve/nodes/kpro6/qemu-server/131.conf")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "hostpci"):
			continue
		case strings.HasPrefix(l, "cpu: "):
			if cpu == "" {
				continue
			}
			l = "cpu: " + cpu
		case strings.HasPrefix(l, "bios: "):
			if bios == "" {
				continue
			}
			l = "bios: " + bios
		}
		out = append(out, l)
	}
	for i := range n {
		out = append(out, fmt.Sprintf("hostpci%d: mapping=pro6000,pcie=1", i))
	}
	return strings.Join(append(out, extra...), "\n") + "\n"
}

// apply sets the plan's cpu and args values in a config, as pve sync writes them.
func apply(config string, r *Result) string {
	set := func(text, key, value string) string {
		if value == "" {
			return text
		}
		re := regexp.MustCompile(`(?m)^` + key + `: .*$`)
		if re.MatchString(text) {
			return re.ReplaceAllString(text, key+": "+value)
		}
		return text + key + ": " + value + "\n"
	}
	return set(set(config, "cpu", r.CPU), "args", r.Args)
}

func plan(t *testing.T, config string, devices []Device, cpu HostCPU) *Result {
	t.Helper()
	r, err := Plan(config, devices, cpu)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// VM 131 as the sample host has it (cpu: host, OVMF) takes all eight GPUs as it is:
// the host's 52 bits, capped at 46 by OVMF's 4-level paging, give a dynamic window of
// 2^43 at the top of 2^46, which holds the eight 128 GiB BARs at 256 GiB strides.
func TestVM131AsIs(t *testing.T) {
	_, _, cpu := sample(t)
	devs := gpus(t, 8)
	r := plan(t, vm131(t, 8, "host", "ovmf"), devs, cpu)
	if r.Outcome != OK || r.CPU != "" || r.Args != "" {
		t.Fatalf("outcome %s, cpu %q, args %q, problems %q", r.Outcome, r.CPU, r.Args, r.Problems)
	}
	if r.OVMF.FirmwareBits != 46 || r.OVMF.Window != (Window{Start: 1<<46 - 1<<43, End: 1 << 46}) {
		t.Errorf("OVMF: %d bits, window %#x", r.OVMF.FirmwareBits, r.OVMF.Window)
	}
	if len(r.OVMF.Assigned) != 8 {
		t.Errorf("OVMF assigns %v", r.OVMF.Assigned)
	}
	if r.SeaBIOS.FirmwareBits != 44 || !r.SeaBIOS.Fits() {
		t.Errorf("SeaBIOS: %d bits, assigns %v", r.SeaBIOS.FirmwareBits, r.SeaBIOS.Assigned)
	}
	if r.BARs64 != 8*(128<<30+32<<20) || r.Largest != 128<<30 {
		t.Errorf("BARs %d, largest %d", r.BARs64, r.Largest)
	}
}

// With Proxmox's default CPU model for new VMs (x86-64-v2-AES: QEMU's 40 bits), OVMF
// assigns none of them; the plan's settings make it assign all, and they are the least
// that do: one phys-bit fewer, or half the window, and some stay out.
func TestVM131Planned(t *testing.T) {
	_, _, cpu := sample(t)
	for _, n := range []int{1, 2, 4, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			devs := gpus(t, n)
			config := vm131(t, n, "x86-64-v2-AES", "ovmf")
			r := plan(t, config, devs, cpu)
			if r.Outcome != NeedsSettings || r.Planned == nil {
				t.Fatalf("outcome %s, problems %q, notes %q", r.Outcome, r.Problems, r.Notes)
			}
			if r.OVMF.Fits() {
				t.Errorf("as set up OVMF assigns all: %+v", r.OVMF)
			}
			after := apply(config, r)
			again := plan(t, after, devs, cpu)
			if again.Outcome != OK || !again.OVMF.Fits() {
				t.Fatalf("after the settings: %s, %+v\n%s", again.Outcome, again.OVMF, after)
			}
			mb, ok := argsWindow(r.Args)
			if !ok {
				t.Fatalf("args %q", r.Args)
			}
			// 40 bits hold a window of up to 256 GiB between the RAM's end (258 GiB) and
			// AMD's HyperTransport range below 1 TiB: one or two GPUs need no more.
			if r.CPU == "" && n > 2 || r.CPU != "" && n <= 2 {
				t.Errorf("%d GPUs: cpu %q", n, r.CPU)
			}
			if r.CPU != "" {
				bits, _ := strconv.Atoi(pveprop.Parse(r.CPU, "cputype")["phys-bits"])
				if !strings.Contains(pveprop.Parse(r.CPU, "cputype")["flags"], "+pdpe1gb") || !strings.HasPrefix(r.CPU, "x86-64-v2-AES,") || bits <= 40 {
					t.Errorf("cpu %q", r.CPU)
				}
				fewer := plan(t, apply(config, &Result{CPU: withCPU("x86-64-v2-AES", bits-1, "pdpe1gb"), Args: r.Args}), devs, cpu)
				if fewer.Outcome == OK {
					t.Errorf("phys-bits=%d would do too", bits-1)
				}
			}
			smaller := plan(t, apply(config, &Result{CPU: r.CPU, Args: withArgsWindow("", mb/2)}), devs, cpu)
			if smaller.Outcome == OK {
				t.Errorf("a window of %d MiB would do too", mb/2)
			}
		})
	}
}

// The story: eight RTX PRO 6000 in a q35 VM under SeaBIOS with QEMU's default 40
// phys-bits and 256 GiB of RAM; two came up. By SeaBIOS's pci_bios_map_devices: each
// root port's window is its 128 GiB + 32 MiB aligned to 128 GiB, 256 GiB; with the
// padded hot-plug PCI bridges the window takes 2 TiB + 128 GiB, more than the 1 TiB
// top it is placed below, so its base wraps: 1 TiB − 2176 GiB. The ports land at
// −1152, −896, −640, −384, −128 GiB (wrapping), 128 GiB (in the RAM), 384 and 640 GiB:
// two of them where the guest's kernel can use them.
func TestSeaBIOSStory(t *testing.T) {
	_, _, cpu := sample(t)
	r := plan(t, vm131(t, 8, "x86-64-v2-AES", "seabios"), gpus(t, 8), cpu)
	if got := r.SeaBIOS.Assigned; len(got) != 2 {
		t.Errorf("SeaBIOS assigns %v, want two", got)
	}
	if r.SeaBIOS.Need != 8*256<<30+4*512<<20 {
		t.Errorf("SeaBIOS needs %s", size(r.SeaBIOS.Need))
	}
}

// Under SeaBIOS the GPUs' 32-bit BARs, ROMs and HDMI functions take 128 MiB per root
// port (64 MiB + 528 KiB aligned to 64 MiB): eight do not fit between the end of q35's
// MMCONFIG area (0xC0000000) and the IO-APIC, and SeaBIOS stops the boot; that is a
// refusal whose way out is OVMF. Seven fit, and get the phys-bits they need.
func TestSeaBIOS32Bit(t *testing.T) {
	_, _, cpu := sample(t)
	r := plan(t, vm131(t, 8, "x86-64-v2-AES", "seabios"), gpus(t, 8), cpu)
	if r.Outcome != Refused || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "out of 32bit address space") || !strings.Contains(r.Problems[0], "bios: ovmf") {
		t.Fatalf("outcome %s, problems %q", r.Outcome, r.Problems)
	}
	if r.SeaBIOS.Mem32Window != (Window{Start: 0xc0000000, End: 0xfec00000}) || r.SeaBIOS.Mem32Fits() {
		t.Errorf("32-bit: need %s in %+v", size(r.SeaBIOS.Mem32Need), r.SeaBIOS.Mem32Window)
	}
	if !r.OVMF.Mem32Fits() {
		t.Errorf("OVMF's 32-bit window %+v does not hold %s", r.OVMF.Mem32Window, size(r.OVMF.Mem32Need))
	}

	devs := gpus(t, 7)
	config := vm131(t, 7, "x86-64-v2-AES", "seabios")
	r = plan(t, config, devs, cpu)
	if r.Outcome != NeedsSettings || r.Args != "" || r.CPU == "" {
		t.Fatalf("7 GPUs: %s, cpu %q, args %q, problems %q", r.Outcome, r.CPU, r.Args, r.Problems)
	}
	if again := plan(t, apply(config, r), devs, cpu); again.Outcome != OK {
		t.Errorf("after %q: %s %+v", r.CPU, again.Outcome, again.SeaBIOS)
	}
}

// A host whose CPU addresses 40 bits cannot give eight 128 GiB BARs a window: refused,
// saying the width and the way out.
func TestRefusedNarrowHost(t *testing.T) {
	narrow := HostCPU{PhysBits: 40, Vendor: "AuthenticAMD", PDPE1GB: true}
	r := plan(t, vm131(t, 8, "x86-64-v2-AES", "ovmf"), gpus(t, 8), narrow)
	if r.Outcome != Refused || r.CPU != "" || r.Args != "" {
		t.Fatalf("outcome %s, cpu %q, args %q", r.Outcome, r.CPU, r.Args)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "addresses 40 bits") || !strings.Contains(r.Problems[0], "fewer GPUs") {
		t.Errorf("problems %q", r.Problems)
	}
}

// Without 1 GiB pages on the host OVMF stays at 40 bits whatever phys-bits say; the
// CPU's width still holds the BARs, so the plan widens QEMU's 64-bit hole past where
// OVMF puts anything and has the guest's kernel place the BARs (pci=realloc).
func TestReallocWithoutPDPE1GB(t *testing.T) {
	cpu := HostCPU{PhysBits: 46, Vendor: "GenuineIntel"}
	devs := gpus(t, 4)
	config := vm131(t, 4, "x86-64-v2-AES", "ovmf")
	r := plan(t, config, devs, cpu)
	if r.Outcome != NeedsRealloc || r.Kernel != "pci=realloc" {
		t.Fatalf("outcome %s, kernel %q, problems %q", r.Outcome, r.Kernel, r.Problems)
	}
	hole, ok := argsHole64(r.Args, true)
	if !ok || strings.Contains(r.CPU, "pdpe1gb") {
		t.Fatalf("cpu %q args %q", r.CPU, r.Args)
	}
	g, err := newGuest(parseConfig(apply(config, r)), cpu)
	if err != nil {
		t.Fatal(err)
	}
	// The hole reaches from where QEMU starts it to past 1 TiB (OVMF's limit) plus what
	// the BARs take, and QEMU starts the VM with the phys-bits set.
	if g.hole64Size != hole || g.hole64Start+hole < TiB+r.SeaBIOS.Need || !g.startsQEMU() {
		t.Errorf("hole %s from %s, phys-bits %d", size(hole), size(g.hole64Start), g.physBits)
	}
	if ovmfBits(g) != 40 {
		t.Errorf("OVMF takes %d bits without 1 GiB pages", ovmfBits(g))
	}
}

// Memory hotplug puts qemu-server's maxmem (half of what phys-bits address) and a
// GiB per slot between the RAM and the window: the window moves above it, and more
// phys-bits are needed than without hotplug.
func TestHotplugMemory(t *testing.T) {
	_, _, cpu := sample(t)
	devs := gpus(t, 8)
	plain := plan(t, vm131(t, 8, "x86-64-v2-AES", "ovmf"), devs, cpu)
	hot := vm131(t, 8, "x86-64-v2-AES", "ovmf", "hotplug: disk,network,usb,memory")
	r := plan(t, hot, devs, cpu)
	if r.Outcome != NeedsSettings {
		t.Fatalf("outcome %s, problems %q", r.Outcome, r.Problems)
	}
	g, err := newGuest(parseConfig(apply(hot, r)), cpu)
	if err != nil {
		t.Fatal(err)
	}
	if g.reservedEnd == 0 || r.Planned.Window.Start < g.reservedEnd {
		t.Errorf("window %#x, hotplug area ends at %#x", r.Planned.Window, g.reservedEnd)
	}
	// 8 GPUs take a 2 TiB window: at 2 TiB without hotplug (42 bits); with it, 42 bits
	// make maxmem 2 TiB, the area ends past 2 TiB, and the window moves to 4 TiB.
	if plain.Planned == nil || g.physBits <= plain.Planned.FirmwareBits {
		t.Errorf("hotplug needs %d bits, without it %+v", g.physBits, plain.Planned)
	}
}

// On i440fx the first four hostpci entries sit on the root bus itself: no bridge
// window, each BAR its own resource; OVMF's window below 4 GiB ends at 0xFC000000.
func TestI440fx(t *testing.T) {
	_, _, cpu := sample(t)
	devs := gpus(t, 2)
	config := strings.Replace(vm131(t, 2, "x86-64-v2-AES", "ovmf"), "machine: q35", "machine: pc", 1)
	r := plan(t, config, devs, cpu)
	if r.Machine != "i440fx" || r.OVMF.Mem32Window.End != 0xfc000000 {
		t.Errorf("machine %s, 32-bit window %+v", r.Machine, r.OVMF.Mem32Window)
	}
	// Two 128 GiB and two 32 MiB BARs packed: 2 × 128 GiB, then the small ones.
	if r.OVMF.Need != 2*128<<30+2*32<<20 || r.OVMF.Align != 128<<30 {
		t.Errorf("need %s aligned to %s", size(r.OVMF.Need), size(r.OVMF.Align))
	}
	if r.Outcome != NeedsSettings {
		t.Fatalf("outcome %s", r.Outcome)
	}
	if again := plan(t, apply(config, r), devs, cpu); again.Outcome != OK {
		t.Errorf("after the settings: %s %+v", again.Outcome, again.OVMF)
	}
}

// The sample host's CPU line: 52 bits, AMD, with 1 GiB pages.
func TestReadHostCPU(t *testing.T) {
	_, _, cpu := sample(t)
	if cpu != (HostCPU{PhysBits: 52, Vendor: "AuthenticAMD", PDPE1GB: true}) {
		t.Errorf("%+v", cpu)
	}
}

// OVMF's default window is an eighth of the address width it trusts, at its top
// (PlatformDynamicMmioWindow): for an AMD CPU of 40 bits [896 GiB, 1 TiB), which
// overlaps the HyperTransport range QEMU reserves from 1012 GiB, so it moves below it,
// to (1012 − 128) GiB rounded down to 128 GiB: 768 GiB. An Intel CPU's 40 bits are not
// trusted (QEMU's default, not a real CPU's): the classic 32 GiB above the RAM. Set
// guest-phys-bits make them trusted.
func TestOVMFDefaultWindow(t *testing.T) {
	devs := gpus(t, 1)
	for _, c := range []struct {
		cpu, vendor string
		want        Window
	}{
		{"x86-64-v2-AES", "AuthenticAMD", Window{Start: 768 << 30, End: 896 << 30}},
		{"x86-64-v2-AES", "GenuineIntel", Window{Start: 288 << 30, End: 320 << 30}},
		{"x86-64-v2-AES,guest-phys-bits=40", "GenuineIntel", Window{Start: 896 << 30, End: 1 << 40}},
	} {
		r := plan(t, vm131(t, 1, c.cpu, "ovmf"), devs, HostCPU{PhysBits: 52, Vendor: c.vendor, PDPE1GB: true})
		if r.OVMF.Window != c.want {
			t.Errorf("%s on %s: window [%s, %s), want [%s, %s)", c.cpu, c.vendor, size(r.OVMF.Window.Start), size(r.OVMF.Window.End), size(c.want.Start), size(c.want.End))
		}
	}
}

// SeaBIOS places its window below 2^44 at most (old kernels' limit), unless the guest
// has 1 TiB of RAM or more above 4 GiB (pci_setup).
func TestSeaBIOSTop(t *testing.T) {
	_, _, cpu := sample(t)
	devs := gpus(t, 4)
	for _, c := range []struct {
		memory string
		bits   int
	}{{"262144", 44}, {"1310720", 52}} {
		config := strings.Replace(vm131(t, 4, "host", "seabios"), "memory: 262144", "memory: "+c.memory, 1)
		r := plan(t, config, devs, cpu)
		if r.SeaBIOS.FirmwareBits != c.bits || r.SeaBIOS.Window.End > 1<<c.bits || r.SeaBIOS.Window.End < 1<<c.bits-1<<(c.bits-3) || !r.SeaBIOS.Fits() {
			t.Errorf("memory %s: %d bits, window [%#x, %#x)", c.memory, r.SeaBIOS.FirmwareBits, r.SeaBIOS.Window.Start, r.SeaBIOS.Window.End)
		}
	}
}

// The hotplug area QEMU reserves (pc_get_device_memory_range): from 4 GiB (the static
// 1 GiB all lies below), maxmem less the static GiB, plus a GiB for each of the 255
// slots. With phys-bits=42 qemu-server's maxmem is 2^(42−21) MiB = 2 TiB: the area
// ends at 4 + 2048 − 1 + 255 GiB.
func TestHotplugArea(t *testing.T) {
	_, _, cpu := sample(t)
	g, err := newGuest(parseConfig(vm131(t, 0, "x86-64-v2-AES,phys-bits=42", "ovmf", "hotplug: memory")), cpu)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(4+2048-1+255) << 30; g.reservedEnd != want || g.hole64Start != want {
		t.Errorf("hotplug area ends at %s, hole at %s, want %s", size(g.reservedEnd), size(g.hole64Start), size(want))
	}
}

// rombar=0 drops the ROM BAR: a GPU function passed alone then takes 64 MiB below
// 4 GiB under SeaBIOS, and eight fit; with their 512 KiB ROMs each root port's window
// doubles to 128 MiB, and they do not.
func TestRombar(t *testing.T) {
	_, inv, cpu := sample(t)
	h, _, _ := sample(t)
	var devs []Device
	var lines []string
	for i, g := range inv.GPUs {
		devs = append(devs, DeviceOf(h, fmt.Sprintf("hostpci%d", i), g.Device))
		lines = append(lines, fmt.Sprintf("hostpci%d: %s,pcie=1%%s", i, g.Address))
	}
	for _, rombar := range []string{"", ",rombar=0"} {
		var extra []string
		for _, l := range lines {
			extra = append(extra, fmt.Sprintf(l, rombar))
		}
		r := plan(t, vm131(t, 0, "host", "seabios", extra...), devs, cpu)
		if r.SeaBIOS.Mem32Fits() != (rombar != "") {
			t.Errorf("rombar %q: 32-bit need %s in %s", rombar, size(r.SeaBIOS.Mem32Need), size(r.SeaBIOS.Mem32Window.Size()))
		}
	}
}

// Five GeForce RTX 4090 (32 GiB BAR1, from the fakehost fixture of oracle O2, an EPYC
// host) in a VM with QEMU's 40 bits under OVMF: five root ports of 32 GiB + 32 MiB at
// 64 GiB strides take 288 GiB + 32 MiB (with QEMU's padded PCI bridges 290.5 GiB), more
// than the 128 GiB default window. 40 bits
// are trusted on AMD, so OVMF's window alone does it: 512 GiB at 512 GiB, of which what
// lies past the HyperTransport range at 1012 GiB is of no use — still room enough; no
// cpu change. The fakehost machine whose CPU addresses 40 bits (the story's guest) has
// no room for eight RTX PRO 6000: refused.
func TestFakehostRTX4090(t *testing.T) {
	h, err := fakehost.OracleO2().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	var devs []Device
	for i, g := range inv.GPUs {
		devs = append(devs, DeviceOf(h, fmt.Sprintf("hostpci%d", i), append([]*pci.Device{g.Device}, g.Functions...)...))
	}
	if len(devs) != 5 {
		t.Fatalf("%d GPUs", len(devs))
	}
	config := vm131(t, 5, "x86-64-v2-AES", "ovmf")
	r := plan(t, config, devs, HostCPU{PhysBits: 48, Vendor: "AuthenticAMD", PDPE1GB: true})
	if r.Outcome != NeedsSettings || r.CPU != "" || r.Largest != 32<<30 {
		t.Fatalf("outcome %s, cpu %q, args %q, largest %s", r.Outcome, r.CPU, r.Args, size(r.Largest))
	}
	if mb, _ := argsWindow(r.Args); mb != 512<<10 || r.Planned.Window != (Window{Start: 512 << 30, End: amdHTStart}) {
		t.Errorf("window %d MiB, planned %+v", mb, r.Planned.Window)
	}
	// Then the DMI-to-PCI bridge: its four hot-plug PCI bridges padded to 1/256 of the
	// 128 GiB window, 512 MiB each, after the ports at 512 MiB alignment.
	if r.OVMF.Need != 4*64<<30+32<<30+512<<20+4*512<<20 {
		t.Errorf("need %s", size(r.OVMF.Need))
	}

	story, err := fakehost.CloudGuestBARFailure().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := ReadHostCPU(story)
	if err != nil || narrow.PhysBits != 40 {
		t.Fatalf("%+v, %v", narrow, err)
	}
	if r := plan(t, vm131(t, 8, "host", "ovmf"), gpus(t, 8), narrow); r.Outcome != Refused {
		t.Errorf("on a 40-bit CPU: %s %q", r.Outcome, r.Settings)
	}
}
