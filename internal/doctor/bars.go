package doctor

import (
	"fmt"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
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
	var evidence []string
	nonPref := false
	for _, g := range e.Inv.GPUs {
		for _, b := range g.BARs {
			if b.IO || b.Index == 6 || b.Size == 0 {
				continue
			}
			if b.Unassigned {
				evidence = append(evidence, fmt.Sprintf("%s %s, %s: unassigned (start 0x%x, flags 0x%x in %s/resource)", g.Address, b.Name(), barShape(b), b.Start, b.Flags, g.Path))
			}
			if b.Is64Bit && !b.Prefetchable && b.Size >= 1<<30 {
				nonPref = true
				evidence = append(evidence, fmt.Sprintf("%s %s, %s: a 64-bit aperture exposed non-prefetchable", g.Address, b.Name(), barShape(b)))
			}
		}
	}
	if e.Log != nil {
		for i, b := range e.Log.BARFailures {
			if gpus[b.Device] {
				evidence = append(evidence, "kernel: "+e.Log.BARLines[i])
			}
		}
		for i, b := range e.Log.NVRMBars {
			if b.SizeMB == 0 {
				evidence = append(evidence, "kernel: "+oneLine(e.Log.NVRMLines[i]))
			}
		}
		for i, p := range e.Log.Probes {
			if gpus[p.Device] {
				evidence = append(evidence, "kernel: "+e.Log.ProbeLines[i])
			}
		}
		for _, l := range e.Log.ReallocHint {
			if len(evidence) > 0 {
				evidence = append(evidence, "kernel: "+l)
			}
		}
	}
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
	if total > 0 && e.H.Exists("/proc/driver/nvidia") {
		title = fmt.Sprintf("GPU memory BARs are not assigned: the nvidia driver set up %d of %d GPUs", probed, total)
	}
	var remedy strings.Builder
	if nonPref {
		remedy.WriteString("A 64-bit GPU aperture is exposed non-prefetchable: the hypervisor presents the BAR wrongly, and the nvidia driver reads the empty upper half as a second BAR of size 0. Update the VMM (cloud-hypervisor fixed this by preserving the prefetchable flag), or use QEMU/Proxmox, which keep it. ")
	}
	if e.Guest {
		remedy.WriteString("In a VM the firmware's 64-bit MMIO window is too small for the GPUs' apertures (" +
			"OVMF sizes it from the CPU's physical address bits, q35's default hole is 32 GB). On Proxmox give the VM `cpu: host` " +
			"(or `cpu: <type>,phys-bits=host`) so OVMF sees the host's address width, or set the window explicitly with " +
			"`args: -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=262144` (MB: 256 GB here; at least the sum of the BARs). " +
			"Inside the guest, `pci=realloc` lets the kernel re-place what the firmware left out. Then restart the VM.")
	} else {
		remedy.WriteString("On bare metal enable \"Above 4G decoding\" (and Resizable BAR support) in the firmware, which reserves 64-bit MMIO " +
			"space for large BARs; boot with `pci=realloc` so the kernel re-places what the firmware left out. Then reboot.")
	}
	out = append(out, Finding{Severity: Error, Title: title, Evidence: capped(evidence, 12), Remedy: remedy.String()})
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
