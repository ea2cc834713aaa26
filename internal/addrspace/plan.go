// Package addrspace plans a VM's guest-physical address space for the devices it is
// given: the 64-bit MMIO window its firmware (SeaBIOS or OVMF) must open for their
// BARs, the phys-bits that window needs, and the VM settings (qemu-server's cpu and
// args options) that get it. The rules are the firmwares', QEMU's and qemu-server's
// own, read from their source; docs/vm-topology.md ("The guest's address space") names
// each with the function it comes from.
package addrspace

import (
	"fmt"
	"strings"

	"github.com/gpusplit/gpusplit/internal/plural"
)

// HostCPU is what the host's processor can give a VM.
type HostCPU struct {
	PhysBits int    // /proc/cpuinfo "address sizes": N bits physical
	Vendor   string // /proc/cpuinfo vendor_id
	PDPE1GB  bool   // /proc/cpuinfo flags: pdpe1gb, 1 GiB pages
}

// Outcome is what a VM needs for its devices' BARs.
type Outcome string

const (
	// OK: the firmware places every BAR as the VM is set up.
	OK Outcome = "ok"
	// NeedsSettings: the CPU and Args of the result make it so.
	NeedsSettings Outcome = "needs-settings"
	// NeedsRealloc: the firmware cannot, the guest's kernel can, with pci=realloc,
	// in the window the result's Args make QEMU describe.
	NeedsRealloc Outcome = "needs-pci-realloc"
	// Refused: no setting makes it work on this host; Problems say the way out.
	Refused Outcome = "refused"
)

// Result is the plan of one VM's address space.
type Result struct {
	Firmware string `json:"firmware"` // "seabios" or "ovmf": the VM's bios
	Machine  string `json:"machine"`  // "q35" or "i440fx"
	// PhysBits is what the guest's CPU reports now; HostBits what the host has.
	PhysBits int `json:"phys_bits"`
	HostBits int `json:"host_bits"`
	// BARs64 is the sum of the devices' 64-bit prefetchable BARs, before any
	// alignment; Largest the largest of them.
	BARs64  uint64 `json:"bars_64bit"`
	Largest uint64 `json:"largest_bar"`
	// SeaBIOS and OVMF are what each firmware makes of the VM as it is set up now.
	SeaBIOS Placement `json:"seabios"`
	OVMF    Placement `json:"ovmf"`
	Outcome Outcome   `json:"outcome"`
	// Planned is what the VM's firmware makes of it with the settings below.
	Planned *Placement `json:"planned,omitempty"`
	// CPU and Args are the values of the VM's cpu and args options with the settings
	// applied: "" where the option stays as it is. The rest of each option is kept.
	CPU  string `json:"cpu,omitempty"`
	Args string `json:"args,omitempty"`
	// Settings say each change and why; Kernel is what the guest's kernel command line
	// needs ("pci=realloc"), "" for nothing; Problems are why it is refused, with the
	// way out; Notes what else to know.
	Settings []string `json:"settings"`
	Kernel   string   `json:"kernel,omitempty"`
	Problems []string `json:"problems"`
	Notes    []string `json:"notes"`
}

// Plan works out the address space of the VM whose qemu-server config is config,
// given devices (one per hostpciN entry it has or is given) on a host with host's CPU.
// It needs no host: the devices' BAR sizes and the host's width are all it reads.
func Plan(config string, devices []Device, host HostCPU) (*Result, error) {
	c := parseConfig(config)
	g, err := newGuest(c, host)
	if err != nil {
		return nil, err
	}
	r := &Result{Firmware: "seabios", Machine: "i440fx", PhysBits: g.physBits, HostBits: host.PhysBits, Settings: []string{}, Problems: []string{}, Notes: []string{}}
	if g.ovmf {
		r.Firmware = "ovmf"
	}
	if g.q35 {
		r.Machine = "q35"
	}
	for _, d := range devices {
		for _, f := range d.Functions {
			for _, b := range f.BARs {
				if b.pref64() {
					r.BARs64 += b.Size
					r.Largest = max(r.Largest, b.Size)
				}
			}
		}
	}
	r.SeaBIOS, r.OVMF = seabios(g, devices), ovmf(g, devices)
	now := r.placement(g)
	if len(devices) == 0 {
		r.Outcome = OK
		return r, nil
	}
	if !now.Mem32Fits() {
		r.Outcome = Refused
		r.Problems = append(r.Problems, r.mem32Problem(now))
		return r, nil
	}
	if now.Fits() && g.startsQEMU() {
		r.Outcome = OK
		return r, nil
	}
	if !g.startsQEMU() {
		r.Notes = append(r.Notes, fmt.Sprintf("QEMU would not start the VM: its 64-bit PCI hole ends at %s, past what %d phys-bits address", size(g.hole64Start+g.hole64Size), g.physBits))
	}
	if !now.Fits() {
		r.Notes = append(r.Notes, fmt.Sprintf("as set up, %s places the 64-bit BARs of %d of %s (%s): %s stay unassigned in the guest",
			firmwareName(g), len(now.Assigned), plural.S(len(devices), "device"), r.needLine(g, now), strings.Join(now.Unassigned, ", ")))
	}
	r.search(c, g, devices, host)
	return r, nil
}

func (r *Result) placement(g *guest) Placement {
	if g.ovmf {
		return r.OVMF
	}
	return r.SeaBIOS
}

func firmwareName(g *guest) string {
	if g.ovmf {
		return "OVMF"
	}
	return "SeaBIOS"
}

func (r *Result) needLine(g *guest, p Placement) string {
	took := fmt.Sprintf("they take %s, aligned to %s", size(p.Need), size(p.Align))
	if p.Window.End <= p.Window.Start || p.Window.Start < g.ramEnd() {
		// SeaBIOS's window wrapped: it is larger than the top it is placed below.
		return fmt.Sprintf("%s, more than fits below the %s the guest's %d phys-bits address", took, size(uint64(1)<<min(g.physBits, 63)), g.physBits)
	}
	return fmt.Sprintf("%s, in a window of %s at %s", took, size(p.Window.Size()), size(p.Window.Start))
}

// place runs the VM's own firmware on a config.
func place(c vmConfig, devices []Device, host HostCPU) (*guest, Placement, error) {
	g, err := newGuest(c, host)
	if err != nil {
		return nil, Placement{}, err
	}
	if g.ovmf {
		return g, ovmf(g, devices), nil
	}
	return g, seabios(g, devices), nil
}

// search finds the least change that places every device: the smallest phys-bits
// (with the 1 GiB pages OVMF needs past 40) and, for OVMF, the smallest window, a power
// of two, set through X-PciMmio64Mb so that it does not depend on the OVMF build's
// rule for its default window. SeaBIOS has no such setting: it sizes its window to what
// the devices take, at the top of the address width.
func (r *Result) search(c vmConfig, g *guest, devices []Device, host HostCPU) {
	fixed := g.cpu.PhysBits == "host" || g.cpu.PhysBits == "" && (g.cpu.Type == "host" || g.cpu.Type == "max")
	first, last := g.physBits, host.PhysBits
	if fixed {
		last = first // the host's own width: nothing to raise
	}
	for bits := first; bits <= last; bits++ {
		flag := ""
		if g.ovmf && bits > 40 && !g.pdpe1gb {
			if !host.PDPE1GB {
				break // OVMF stays at 40 bits: only the kernel can go past
			}
			flag = "pdpe1gb"
		}
		try := clone(c)
		if bits != g.physBits || flag != "" {
			try["cpu"] = withCPU(cpuOption(c), bitsIfChanged(bits, g.physBits, fixed), flag)
		}
		if !g.ovmf {
			if tg, p, err := place(try, devices, host); err == nil && p.Fits() && p.Mem32Fits() && tg.startsQEMU() {
				r.settle(c, try, tg, p, g)
				return
			}
			continue
		}
		for w := max(pow2Ceil(r.OVMF.Need), GiB); w <= ovmfOverrideMax; w <<= 1 {
			win := clone(try)
			win["args"] = withArgsWindow(c["args"], w/MiB)
			if tg, p, err := place(win, devices, host); err == nil && p.Fits() && p.Mem32Fits() && tg.startsQEMU() {
				r.settle(c, win, tg, p, g)
				return
			}
		}
	}
	if g.ovmf && r.realloc(c, g, devices, host) {
		return
	}
	r.Outcome = Refused
	need := r.SeaBIOS
	if g.ovmf {
		need = r.OVMF
	}
	r.Problems = append(r.Problems, fmt.Sprintf("the host's CPU addresses %d bits, too few for %s of BARs (%s) above %s of RAM and hotplug memory: pass fewer GPUs to this VM, or give it less memory",
		host.PhysBits, size(need.Need), plural.S(len(devices), "device"), size(max(g.ramEnd(), g.reservedEnd))))
}

func bitsIfChanged(bits, was int, fixed bool) int {
	if bits == was || fixed {
		return 0
	}
	return bits
}

// settle records the settings that try has over c.
func (r *Result) settle(c, try vmConfig, tg *guest, p Placement, g *guest) {
	r.Outcome = NeedsSettings
	r.Planned = &p
	if try["cpu"] != c["cpu"] {
		r.CPU = try["cpu"]
		if tg.physBits != g.physBits {
			r.Settings = append(r.Settings, fmt.Sprintf("cpu: phys-bits=%d (was %d): the guest's address width must reach past the 64-bit window", tg.physBits, g.physBits))
		}
		if tg.pdpe1gb && !g.pdpe1gb {
			r.Settings = append(r.Settings, "cpu: flags +pdpe1gb: without 1 GiB pages OVMF maps no more than 40 bits")
		}
	}
	if try["args"] != c["args"] {
		r.Args = try["args"]
		r.Settings = append(r.Settings, fmt.Sprintf("args: -fw_cfg name=%s,string=%d: OVMF's 64-bit window, %s at %s, holds the BARs (%s aligned to %s)",
			fwCfgKey, tg.window/MiB, size(p.Window.Size()), size(p.Window.Start), size(p.Need), size(p.Align)))
	}
}

// realloc is the way when OVMF cannot open the window (no 1 GiB pages on the host, or
// more than its 46 bits) but the CPU's width holds it: QEMU's ACPI tables describe a
// 64-bit hole as large as pci-hole64-size says, from wherever OVMF put its BARs (at
// most 2^40 then), and the guest's kernel places the BARs there with pci=realloc.
func (r *Result) realloc(c vmConfig, g *guest, devices []Device, host HostCPU) bool {
	fw := max(ovmfBits(g), 40)
	// The kernel packs each device's window at its alignment: at most the devices'
	// SeaBIOS-style windows, plus one alignment of slack.
	need := r.SeaBIOS.Need + r.Largest
	top := uint64(1)<<fw + need
	if g.hole64Start >= top {
		return false
	}
	hole := alignUp(top-g.hole64Start, GiB)
	for bits := max(g.physBits, fw+1); bits <= host.PhysBits; bits++ {
		if g.hole64Start+hole > uint64(1)<<bits {
			continue
		}
		try := clone(c)
		fixed := g.cpu.PhysBits == "host" || g.cpu.PhysBits == "" && (g.cpu.Type == "host" || g.cpu.Type == "max")
		if bits != g.physBits && !fixed {
			try["cpu"] = withCPU(cpuOption(c), bits, "")
		} else if bits != g.physBits {
			return false
		}
		try["args"] = withArgsHole64(c["args"], g.q35, hole)
		tg, err := newGuest(try, host)
		if err != nil || !tg.startsQEMU() {
			continue
		}
		r.Outcome = NeedsRealloc
		r.Kernel = "pci=realloc"
		if try["cpu"] != c["cpu"] {
			r.CPU = try["cpu"]
			r.Settings = append(r.Settings, fmt.Sprintf("cpu: phys-bits=%d (was %d): the guest's address width must reach past the 64-bit hole", bits, g.physBits))
		}
		r.Args = try["args"]
		r.Settings = append(r.Settings, fmt.Sprintf("args: -global %s=%dG: QEMU's ACPI tables give the guest's kernel a 64-bit window of %s from %s",
			hole64Property(g.q35), hole>>30, size(hole), size(g.hole64Start)))
		why := "the host's CPU has no 1 GiB pages (pdpe1gb), without which OVMF maps no more than 40 bits"
		if host.PDPE1GB {
			why = "OVMF maps no more than 46 bits"
		}
		r.Notes = append(r.Notes, why+": the firmware leaves the BARs unassigned, and the guest's kernel must place them: boot it with pci=realloc (in GRUB_CMDLINE_LINUX_DEFAULT, and check that no file in /etc/default/grub.d sets it again)")
		return true
	}
	return false
}

// mem32Problem says why the BARs below 4 GiB do not fit, and the way out.
func (r *Result) mem32Problem(p Placement) string {
	what := "OVMF leaves the devices that do not fit unassigned"
	way := "pass fewer GPUs to this VM"
	if r.Firmware == "seabios" {
		what = "SeaBIOS stops the boot (\"PCI: out of 32bit address space\")"
		way = "use OVMF (bios: ovmf, with an efidisk0), whose window there is larger, or pass fewer GPUs to this VM"
	}
	return fmt.Sprintf("the devices' BARs below 4 GiB (non-prefetchable BARs and option ROMs) take %s as %s packs them, its window there holds %s: %s; %s",
		size(p.Mem32Need), map[string]string{"seabios": "SeaBIOS", "ovmf": "OVMF"}[r.Firmware], size(p.Mem32Window.Size()), what, way)
}

func clone(c vmConfig) vmConfig {
	out := vmConfig{}
	for k, v := range c {
		out[k] = v
	}
	return out
}

// size writes a size in the largest binary unit that divides it, else in GiB and
// MiB: "128 GiB", "1 TiB", "1920 GiB + 32 MiB".
func size(n uint64) string {
	switch {
	case n >= TiB && n%TiB == 0:
		return fmt.Sprintf("%d TiB", n/TiB)
	case n >= GiB && n%GiB == 0:
		return fmt.Sprintf("%d GiB", n/GiB)
	case n >= GiB:
		return fmt.Sprintf("%d GiB + %d MiB", n/GiB, n%GiB/MiB)
	case n >= MiB:
		return fmt.Sprintf("%d MiB", n/MiB)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
