package doctor

import (
	"fmt"
	"strconv"
	"strings"
)

// checkLinks finds GPU links that trained narrower than they can, a cable, riser or
// seating fault; a lower speed is reported only when the slot itself is slower, since an
// idle GPU drops its link speed to save power.
func checkLinks(e *Env) []Finding {
	if e.Guest {
		return nil // a VM's link values are whatever the virtual port advertises
	}
	var narrow, slow, idle []string
	for _, g := range e.Inv.GPUs {
		l := g.Link
		if l.Width > 0 && l.MaxWidth > 0 && l.Width < l.MaxWidth {
			narrow = append(narrow, fmt.Sprintf("%s: x%d of x%d (%s)", g.Address, l.Width, l.MaxWidth, l.String()))
		}
		if len(g.Parents) > 0 {
			parent := e.Inv.Tree.Lookup(g.Parents[len(g.Parents)-1])
			if parent != nil && parent.Link.MaxGen > 0 && l.MaxGen > parent.Link.MaxGen {
				slow = append(slow, fmt.Sprintf("%s: Gen%d capable, but its port %s only Gen%d", g.Address, l.MaxGen, parent.Address, parent.Link.MaxGen))
			}
		}
		if l.Gen > 0 && l.MaxGen > 0 && l.Gen < l.MaxGen {
			idle = append(idle, fmt.Sprintf("%s: Gen%d now, Gen%d capable", g.Address, l.Gen, l.MaxGen))
		}
	}
	if e.Log != nil {
		for i, l := range e.Log.LinkLimits {
			if !e.logGPU(l.Device, "", false) {
				continue // an NVMe drive's or a NIC's link is not a GPU's
			}
			line := "kernel: " + e.Log.LinkLines[i]
			if w := linkWidth(l.LimitedBy); w > 0 && w == linkWidth(l.Capable) {
				// Full width at a lower speed: power saving, or a slower slot.
				idle = append(idle, line)
			} else {
				narrow = append(narrow, line)
			}
		}
	}
	var out []Finding
	if len(narrow) > 0 {
		out = append(out, Finding{
			Severity: Warning,
			Title:    "a GPU link runs narrower than it can",
			Evidence: capped(narrow, 8),
			Remedy: "Unlike the speed, the width does not drop to save power on these GPUs: fewer lanes mean a bad seat, a riser or " +
				"cable, a bifurcated or shared slot, or a slot wired narrower than it looks. Reseat the card, check the riser and the " +
				"slot's wiring and the firmware's bifurcation setting.",
		})
	}
	if len(slow) > 0 {
		out = append(out, Finding{
			Severity: Info,
			Title:    "a GPU sits in a slot slower than the GPU",
			Evidence: capped(slow, 8),
			Remedy:   "The port above the GPU cannot reach the GPU's speed, so the link runs at the port's: expected on an older platform; otherwise use a faster slot, or check the firmware's PCIe generation setting for it.",
		})
	}
	if len(idle) > 0 && len(slow) == 0 {
		out = append(out, Finding{
			Severity: Info,
			Title:    "GPU links run below their top speed, as idle GPUs do",
			Evidence: capped(idle, 8),
			Remedy:   "A GPU lowers its link speed when idle and trains back up under load: check the speed again while it works (nvidia-smi -q shows the current generation).",
		})
	}
	return out
}

// linkWidth returns the lanes of a link as the kernel prints it ("16.0 GT/s PCIe x16",
// "8 GT/s x8"); 0 when it names none.
func linkWidth(s string) int {
	i := strings.LastIndex(s, " x")
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(s[i+2:])
	if err != nil {
		return 0
	}
	return n
}
