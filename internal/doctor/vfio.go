package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
)

// hostDevice returns the host's device at address a, when the log is the host's.
func (e *Env) hostDevice(a string) *pci.Device {
	if e.Log != nil && !e.logHost {
		return nil
	}
	addr, err := pci.ParseAddress(a)
	if err != nil {
		return nil
	}
	return e.Inv.Tree.Lookup(addr)
}

// groupMembers describes the devices of IOMMU group g on the host, with their drivers.
func (e *Env) groupMembers(g int) []string {
	var out []string
	for _, d := range e.Inv.Tree.Devices {
		if d.IOMMUGroup == g {
			drv := d.Driver
			if drv == "" {
				drv = "no driver"
			}
			out = append(out, fmt.Sprintf("%s %s (%s)", d.Address, d.Name(), drv))
		}
	}
	return out
}

// groupOnBus reports whether IOMMU group g holds a device on d's bus: then it is a group
// a bus reset of d reaches, and the host is the machine the line is from.
func (e *Env) groupOnBus(g int, d *pci.Device) bool {
	for _, o := range e.Inv.Tree.Devices {
		if o.IOMMUGroup == g && o.Address.Domain == d.Address.Domain && o.Address.Bus == d.Address.Bus {
			return true
		}
	}
	return false
}

// checkVFIOReset finds devices that did not come back from a reset (FLR, a bus reset), or
// that QEMU could not reset because it does not own every device the reset reaches. A
// device that did not come back after resume is gpu-init-failed's: a power state.
func checkVFIOReset(e *Env) []Finding {
	if e.Log == nil {
		return nil
	}
	var evidence []string
	notOwned, gaveUp := false, false
	seen := map[string]bool{}
	for _, v := range e.Log.VFIO {
		var device string
		switch {
		case v.Err != nil && v.Err.Kind == "reset":
			notOwned, device = true, v.Err.Device
		case v.NotReady != nil:
			gaveUp, device = true, v.NotReady.Device
		default:
			continue
		}
		if seen[v.Line] {
			continue
		}
		seen[v.Line] = true
		evidence = append(evidence, "kernel: "+v.Line)
		if d := e.hostDevice(device); d != nil && !seen[device] {
			seen[device] = true
			if m, err := e.H.ReadString(d.Path + "/reset_method"); err == nil {
				evidence = append(evidence, fmt.Sprintf("%s/reset_method: %s", d.Path, m))
			}
			if v.Err != nil && v.Err.Kind == "reset" && e.groupOnBus(v.Err.Group, d) {
				for _, m := range e.groupMembers(v.Err.Group) {
					evidence = append(evidence, fmt.Sprintf("IOMMU group %d: %s", v.Err.Group, m))
				}
			}
		}
	}
	if len(evidence) == 0 {
		return nil
	}
	var r []string
	if notOwned {
		r = append(r, "QEMU resets a device by resetting its bus when the device has no reset of its own, and it may only do that "+
			"when the VM owns every device on that bus: give the VM all functions of the GPU (on Proxmox `hostpci0: 0000:03:00`, "+
			"the slot without a function, passes .0 and its audio .1 together) and bind the group's other devices to vfio-pci "+
			"(gpusplit apply moves whole groups).")
	}
	if gaveUp {
		r = append(r, "The device did not answer after the reset the line names, so it is unusable until the "+
			"host is powered off and on. reset_method lists what the kernel tries, in order; writing one of them (`echo bus > "+
			".../reset_method`) makes it use that one, and a kernel with the device's reset quirk may be needed. Do not pass a "+
			"GPU's audio function to a VM without its GPU.")
	}
	return []Finding{{
		Severity: Error,
		Title:    "devices that could not be reset for a VM",
		Evidence: capped(evidence, 12),
		Remedy:   strings.Join(r, " "),
	}}
}

// framebuffers are /proc/iomem owners that hold a GPU's BAR for the boot console.
var framebuffers = []string{"BOOTFB", "efifb", "simplefb", "vesafb", "simple-framebuffer", "sysfb"}

// iomemOwners returns the names /proc/iomem gives to ranges inside [start, end] or that
// contain it, but for the PCI core's own (buses, the device itself).
func iomemOwners(iomem string, start, end uint64, device string) []string {
	var out []string
	for _, line := range strings.Split(iomem, "\n") {
		rng, name, ok := strings.Cut(strings.TrimSpace(line), " : ")
		if !ok {
			continue
		}
		lo, hi, ok := strings.Cut(rng, "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || b < start || a > end || (a == 0 && b == 0) {
			continue
		}
		if strings.HasPrefix(name, "PCI Bus") || name == device || name == "vfio-pci" || strings.HasPrefix(name, "PCI ECAM") {
			continue
		}
		out = append(out, fmt.Sprintf("%s : %s", rng, name))
	}
	return out
}

// checkVFIOBar finds BARs vfio-pci could not reserve: another driver, usually the boot
// console's framebuffer, still holds the GPU's memory.
func checkVFIOBar(e *Env) []Finding {
	if e.Log == nil {
		return nil
	}
	var evidence []string
	fb := false
	iomem, _ := e.H.ReadFile("/proc/iomem")
	for _, v := range e.Log.VFIO {
		if v.Err == nil || v.Err.Kind != "bar" || slices.Contains(evidence, "kernel: "+v.Line) {
			continue
		}
		evidence = append(evidence, "kernel: "+v.Line)
		if e.hostDevice(v.Err.Device) == nil {
			continue
		}
		for _, o := range iomemOwners(string(iomem), v.Err.Start, v.Err.End, v.Err.Device) {
			evidence = append(evidence, "/proc/iomem: "+o)
			for _, f := range framebuffers {
				fb = fb || strings.Contains(o, f)
			}
		}
	}
	if len(evidence) == 0 {
		return nil
	}
	r := "Another driver holds the BAR's memory, most often the firmware's framebuffer that the boot console draws on (BOOTFB, efifb, " +
		"simplefb in /proc/iomem; as root it shows the owners). Keep the kernel off the GPU that goes to the VM: on kernels since 5.15, " +
		"where the firmware framebuffer is set up by sysfb, add `initcall_blacklist=sysfb_init`; on older ones `video=efifb:off` " +
		"(and `video=vesafb:off`). Or boot with the console on another GPU (the firmware's primary display setting)."
	if !fb && len(iomem) > 0 {
		r += " /proc/iomem names no framebuffer there: another driver (nvidia, amdgpu, a second vfio-pci) may still be bound to the device."
	}
	return []Finding{{
		Severity: Error,
		Title:    "vfio-pci could not reserve a GPU's memory: a VM cannot use it",
		Evidence: capped(evidence, 12),
		Remedy:   r,
	}}
}

// checkVFIONotViable finds QEMU's "group N is not viable": a device of the group is not
// bound to vfio-pci.
func checkVFIONotViable(e *Env) []Finding {
	if e.Log == nil {
		return nil
	}
	var evidence []string
	groups := map[int]bool{}
	for _, v := range e.Log.VFIO {
		if v.Err == nil || v.Err.Kind != "group" || slices.Contains(evidence, "kernel: "+v.Line) {
			continue
		}
		evidence = append(evidence, "kernel: "+v.Line)
		if d := e.hostDevice(v.Err.Device); d != nil && d.IOMMUGroup == v.Err.Group && !groups[v.Err.Group] {
			groups[v.Err.Group] = true
			for _, m := range e.groupMembers(v.Err.Group) {
				evidence = append(evidence, fmt.Sprintf("IOMMU group %d: %s", v.Err.Group, m))
			}
		}
	}
	if len(evidence) == 0 {
		return nil
	}
	return []Finding{{
		Severity: Error,
		Title:    "QEMU refused an IOMMU group: not every device of it is on vfio-pci",
		Evidence: capped(evidence, 12),
		Remedy: "A VM gets a whole IOMMU group or nothing: every device of the group must be bound to vfio-pci (or have no driver). " +
			"Bind the others too (gpusplit apply moves whole groups, and plans refuse a group shared with a device you did not name); " +
			"a group that also holds a device the host needs is the iommu-group-shared finding, whose remedy is the slot or ACS.",
	}}
}
