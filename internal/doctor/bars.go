package doctor

import (
	"fmt"
	"strings"

	"github.com/gpusplit/gpusplit/internal/kmsg"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plural"
)

// checkBARs finds GPUs whose memory BARs the firmware and the kernel could not place:
// the driver then refuses the GPU ("BAR1 is 0M"), and in VMs it is why only some of the
// GPUs come up.
func checkBARs(e *Env) []Finding {
	var out []Finding
	gpus := map[string]bool{}
	for _, g := range e.Inv.GPUs {
		gpus[g.Address.String()] = true
	}
	var evidence, logLines []string
	nonPref := false
	for _, g := range e.Inv.GPUs {
		var bars []string
		for _, b := range g.BARs {
			if b.IO || b.Index == 6 || b.Size == 0 {
				continue
			}
			if b.Unassigned {
				bars = append(bars, fmt.Sprintf("%s %s", b.Name(), barShape(b)))
			}
			if b.Is64Bit && !b.Prefetchable && b.Size >= 1<<30 {
				nonPref = true
				evidence = append(evidence, fmt.Sprintf("%s %s, %s: a 64-bit aperture exposed non-prefetchable", g.Address, b.Name(), barShape(b)))
			}
		}
		if len(bars) > 0 {
			drv := "no driver"
			if g.Driver != "" {
				drv = "on " + g.Driver
			}
			evidence = append(evidence, fmt.Sprintf("%s (%s): %s unassigned (start 0 in %s/resource)", g.Address, drv, strings.Join(bars, ", "), g.Path))
		}
	}
	hostGPUs := len(evidence) > 0 // what sysfs shows of the host's own GPUs
	windows := false
	if e.Log != nil {
		seen := map[string]bool{}
		add := func(line string) {
			if !seen[line] {
				seen[line] = true
				logLines = append(logLines, line)
			}
		}
		for i, b := range e.Log.BARFailures {
			switch {
			case e.logGPU(b.Device, "", false):
				add("kernel: " + e.Log.BARLines[i])
				hostGPUs = hostGPUs || gpus[b.Device]
			case isWindow(b) && len(e.gpusBelow(b.Device)) > 0:
				// The bridge above a GPU had no room for it: the cause.
				add("kernel: " + e.Log.BARLines[i])
				windows = true
			}
		}
		for i, b := range e.Log.NVRMBars {
			if b.SizeMB == 0 {
				logLines = append(logLines, "kernel: "+oneLine(e.Log.NVRMLines[i]))
			}
		}
		for i, p := range e.Log.Probes {
			if e.logGPU(p.Device, p.Driver, false) {
				logLines = append(logLines, "kernel: "+e.Log.ProbeLines[i])
			}
		}
		// A bridge's window that failed beside the GPUs' BARs is their cause too,
		// where the topology cannot say which bridge is above which GPU.
		if len(logLines) > 0 {
			for i, b := range e.Log.BARFailures {
				if isWindow(b) && !seen["kernel: "+e.Log.BARLines[i]] {
					add("kernel: " + e.Log.BARLines[i])
					windows = true
				}
			}
		}
		if len(evidence)+len(logLines) > 0 {
			for _, l := range e.Log.ReallocHint {
				logLines = append(logLines, "kernel: "+l)
			}
		}
	}
	evidence = append(capped(evidence, 8), capped(logLines, 6)...)
	if len(evidence) == 0 {
		return nil
	}
	probed, total := 0, 0
	for _, g := range e.Inv.GPUs {
		if g.VendorID == pci.VendorNVIDIA {
			total++
			if g.Minor >= 0 {
				probed++
			}
		}
	}
	title := "GPU memory BARs are not assigned: the GPUs behind them cannot be used"
	if total > 0 && hostGPUs && e.H.Exists("/proc/driver/nvidia") {
		title = fmt.Sprintf("GPU memory BARs are not assigned: the nvidia driver set up %d of %s", probed, plural.S(total, "GPU"))
	}
	var remedy strings.Builder
	if nonPref {
		remedy.WriteString("A 64-bit GPU aperture is exposed non-prefetchable: the hypervisor presents the BAR wrongly, and the nvidia driver reads the empty upper half as a second BAR of size 0. Update the VMM (cloud-hypervisor fixed this by preserving the prefetchable flag), or use QEMU/Proxmox, which keep it. ")
	}
	if e.Guest {
		window := windowMB(e)
		fmt.Fprintf(&remedy, "In a VM the firmware's 64-bit MMIO window is too small for the GPUs' apertures, or lies past the guest's "+
			"phys-bits (OVMF sizes it from the CPU's physical address bits, which are 40 unless set; q35's default hole is 32 GB). "+
			"On the Proxmox host, `gpusplit pve sync` plans this VM's address space and writes what it needs (phys-bits and +pdpe1gb "+
			"in `cpu`, OVMF's window in `args`; docs/vm-topology.md, The guest's address space). By hand: give the VM `cpu: host` "+
			"(or `cpu: <type>,phys-bits=host`) so OVMF sees the host's address width, or set the window explicitly with "+
			"`args: -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=%d` (in MB: %d GiB, the GPUs' 64-bit BARs, %d GiB, rounded up to a power of two). "+
			"Inside the guest, `pci=realloc` lets the kernel re-place what the firmware left out. Then restart the VM.", window, window>>10, sum64(e)>>30)
	} else {
		remedy.WriteString("On bare metal enable \"Above 4G decoding\" (and Resizable BAR support) in the firmware, which reserves 64-bit MMIO " +
			"space for large BARs; boot with `pci=realloc` so the kernel re-places what the firmware left out. Then reboot.")
		if windows {
			remedy.WriteString(" A bridge's window failed too: behind a Thunderbolt or other hot-plug bridge (an external GPU) the firmware " +
				"reserves little room, which Above 4G decoding does not change; `pci=realloc,hpmmioprefsize=64G` (the GPU's BARs together, " +
				"rounded up) has the kernel reserve enough for what is plugged in there.")
		}
	}
	out = append(out, Finding{Severity: Error, Title: title, Evidence: evidence, Remedy: remedy.String()})
	return out
}

func barShape(b pci.BAR) string {
	s := fmt.Sprintf("%d MiB", b.Size>>20)
	if b.Size >= 1<<30 {
		s = fmt.Sprintf("%d GiB", b.Size>>30)
	}
	if b.Is64Bit {
		s += " 64-bit"
	}
	if b.Prefetchable {
		s += " prefetchable"
	}
	return s
}

// oneLine joins a multi-line kernel message for a line of evidence.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}

// sum64 is the size of every GPU's 64-bit memory BARs together.
func sum64(e *Env) uint64 {
	var sum uint64
	for _, g := range e.Inv.GPUs {
		for _, b := range g.BARs {
			if b.Is64Bit && !b.IO && b.Index != 6 {
				sum += b.Size
			}
		}
	}
	return sum
}

// windowMB is the 64-bit MMIO window to give OVMF: the GPUs' 64-bit BARs together,
// rounded up to a power of two, at least 64 GiB, in MB as X-PciMmio64Mb wants it.
func windowMB(e *Env) uint64 {
	w := uint64(64 << 30)
	for w < sum64(e) {
		w <<= 1
	}
	return w >> 20
}

// isWindow reports whether a resource is a bridge's window: named so since 6.8, and
// numbered 13 to 16 (after the 7 standard and 6 SR-IOV resources) before.
func isWindow(b kmsg.BARFailure) bool {
	switch b.Resource {
	case "bridge window", "BAR 13", "BAR 14", "BAR 15", "BAR 16":
		return true
	}
	return false
}
