package doctor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/kmsg"
	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/plural"
)

// xidClass is what an Xid says about the GPU, from NVIDIA's Xid catalog: only the
// Xids of the hardware, its memory, its link and its firmware; those of applications
// (13, 31, 43, 45) are not the host's to fix.
type xidClass struct {
	what  string
	sev   Severity
	class string // "lost", "memory", "nvlink", "firmware"
}

var xidClasses = []struct {
	xid int
	xidClass
}{
	{48, xidClass{"a double-bit ECC error: memory the GPU could not correct", Error, "memory"}},
	{62, xidClass{"an internal micro-controller halted", Warning, "firmware"}},
	{64, xidClass{"memory row remapping or page retirement failed", Warning, "memory"}},
	{74, xidClass{"an NVLink error", Warning, "nvlink"}},
	{79, xidClass{"the GPU fell off the bus", Error, "lost"}},
	{92, xidClass{"a high rate of single-bit ECC errors", Warning, "memory"}},
	{94, xidClass{"a contained memory error: only the application using that memory is affected", Warning, "memory"}},
	{95, xidClass{"an uncontained memory error: every application on the GPU is affected", Error, "memory"}},
	{119, xidClass{"the GPU's firmware processor (GSP) did not answer in time", Warning, "firmware"}},
	{120, xidClass{"an error in the GPU's firmware processor (GSP)", Warning, "firmware"}},
	{140, xidClass{"an uncorrectable ECC error that escaped containment", Error, "memory"}},
}

// classOfXid returns what Xid x says, if it is one of xidClasses.
func classOfXid(x int) (xidClass, bool) {
	for _, c := range xidClasses {
		if c.xid == x {
			return c.xidClass, true
		}
	}
	return xidClass{}, false
}

// Xid 154 (kernel_rc.c / gpu.c): "GPU recovery action changed from 0x%x (%s) to 0x%x (%s)".
var recoveryRe = lazyre.New(`GPU recovery action changed from 0x[0-9a-fA-F]+ \([^)]*\) to 0x[0-9a-fA-F]+ \(([^)]*)\)`)

// gpuFailure is what the log says went wrong with one GPU.
type gpuFailure struct {
	lines   tally
	worst   Severity
	classes map[string]bool
	xids    []int
	action  string // NVIDIA's recovery action, from Xid 154
}

func (g *gpuFailure) add(line string, sev Severity, class string) {
	// A record of several lines (the probe's "fallen off the bus") reads as one.
	g.lines.add("kernel: " + strings.ReplaceAll(line, "\n", " "))
	g.worst = max(g.worst, sev)
	g.classes[class] = true
}

// gpuKey is the GPU a line is about: its function 0, for a line of its audio function.
func gpuKey(device string) string {
	if i := strings.LastIndexByte(device, '.'); i > 0 {
		return device[:i] + ".0"
	}
	return device
}

// gpusBelow returns the host's GPUs below the bridge at device, when the log is the
// host's own (only then do its addresses mean the host's bridges).
func (e *Env) gpusBelow(device string) []string {
	if e.Log != nil && !e.logHost {
		return nil
	}
	var out []string
	for _, g := range e.Inv.GPUs {
		for _, p := range g.Parents {
			if p.String() == device {
				out = append(out, g.Address.String())
			}
		}
	}
	return out
}

// aerSeverity is the severity in gpu-lost of an AER line, given the severity of the
// error whose line it is; corrected errors are aer-errors' (-1).
func aerSeverity(a kmsg.AER, errSev string) Severity {
	switch {
	case a.NoRecovery, kmsg.IsFatalBit(a.Bit), errSev == "fatal":
		return Error
	case errSev == "non-fatal":
		return Warning
	}
	return -1
}

// checkGPULost finds GPUs that failed while the host ran: Xids of the hardware, its
// memory, link and firmware, "fallen off the bus", and the AER errors of the GPU or of
// the port above it, each GPU's in the order they happened.
func checkGPULost(e *Env) []Finding {
	if e.Log == nil || len(e.Log.Failures) == 0 {
		return nil
	}
	byGPU := map[string]*gpuFailure{}
	var order []string
	gpu := func(d string) *gpuFailure {
		k := gpuKey(d)
		if byGPU[k] == nil {
			byGPU[k] = &gpuFailure{classes: map[string]bool{}, worst: Info}
			order = append(order, k)
		}
		return byGPU[k]
	}
	errSev := map[string]string{} // the severity of each device's last AER error
	// AER lines of a port the host's topology does not place, until a GPU's own AER
	// line (its driver cannot recover) claims them: the AER driver reports the port's
	// error, then walks the devices below it.
	var pending []kmsg.AER
	var pendingLines []string
	for _, f := range e.Log.Failures {
		switch {
		case f.Xid != 0:
			c, ok := classOfXid(f.Xid)
			if f.Xid == 154 {
				m := recoveryRe.FindStringSubmatch(f.Line)
				if m == nil || m[1] == "None" {
					continue
				}
				g := gpu(f.Device)
				g.action = m[1]
				g.add(f.Line, Error, "recovery")
				continue
			}
			if !ok {
				continue
			}
			g := gpu(f.Device)
			g.add(f.Line, c.sev, c.class)
			if !slices.Contains(g.xids, f.Xid) {
				g.xids = append(g.xids, f.Xid)
			}
		case f.Fallen:
			gpu(f.Device).add(f.Line, Error, "lost")
		default:
			a := f.AER
			if a.Severity != "" {
				errSev[a.Device] = a.Severity
			}
			sev := aerSeverity(a, errSev[a.Device])
			if !e.logGPU(a.Device, a.Driver, false) {
				below := e.gpusBelow(a.Device)
				for _, g := range below {
					if sev >= 0 {
						gpu(g).add(f.Line, sev, "link")
					}
				}
				if len(below) == 0 && sev >= 0 {
					pending = append(pending, a)
					pendingLines = append(pendingLines, f.Line)
				}
				continue
			}
			g := gpu(a.Device)
			if a.NoRecovery {
				for i, p := range pending {
					g.add(pendingLines[i], aerSeverity(p, errSev[p.Device]), "link")
				}
				pending, pendingLines = nil, nil
			}
			if sev >= 0 {
				g.add(f.Line, sev, "link")
			}
		}
	}
	var out []Finding
	for _, k := range order {
		g := byGPU[k]
		evidence := g.lines.lines()
		if len(evidence) == 0 {
			continue
		}
		out = append(out, Finding{
			Severity: g.worst,
			Title:    fmt.Sprintf("GPU %s failed while the host ran: %s", k, g.summary()),
			Evidence: capped(evidence, 12),
			Remedy:   g.remedy(),
		})
	}
	return out
}

func (g *gpuFailure) summary() string {
	var parts []string
	if g.classes["lost"] || g.classes["link"] {
		parts = append(parts, "it stopped answering on its PCIe link")
	}
	for _, x := range g.xids {
		c, _ := classOfXid(x)
		parts = append(parts, fmt.Sprintf("Xid %d, %s", x, c.what))
	}
	if g.action != "" {
		parts = append(parts, "NVIDIA's driver says: "+g.action)
	}
	return strings.Join(parts, "; ")
}

// remedy says what to do for the worst of what happened, and why.
func (g *gpuFailure) remedy() string {
	var r []string
	if g.classes["lost"] || g.classes["link"] {
		r = append(r, "A GPU that fell off the bus stays gone until the host restarts, often until it is powered off (a warm reboot may not bring it back): "+
			"its PCIe link went down. The usual causes are power and the link: check the GPU's power cables and the supply's headroom for load spikes, "+
			"reseat the card and any riser, and if the link is Gen5 or Gen4 through a riser, set the slot one generation lower in the firmware. "+
			"If it recurs in the same slot with another GPU, it is the slot or riser; if it follows the GPU, the GPU.")
	}
	if g.classes["memory"] {
		r = append(r, "Uncorrectable or frequent memory errors: reset the GPU (nvidia-smi -r -i <index>, with no process on it) or reboot, which also "+
			"applies pending row remapping; nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT shows what is left. A GPU whose remapping fails or recurs is a "+
			"candidate for replacement.")
	}
	if g.classes["firmware"] {
		r = append(r, "The GPU's firmware stopped: reset the GPU or reboot. If it recurs under the same load, try a newer driver and report it to NVIDIA "+
			"with nvidia-bug-report.sh.")
	}
	if g.classes["nvlink"] {
		r = append(r, "An NVLink error: reset the GPU or reboot; the error can be at the far end of the link, so look at its peer GPU's log too.")
	}
	if g.action != "" {
		r = append(r, "NVIDIA's driver has decided what recovery the GPU needs ("+g.action+"): until that is done, the GPU is not to be trusted with work.")
	}
	return strings.Join(r, " ")
}

// checkAER counts the PCIe AER errors of each device: a few corrected errors are the
// link retrying, a stream of them a marginal link, an uncorrected one lost data.
func checkAER(e *Env) []Finding {
	if e.Log == nil {
		return nil
	}
	type counts struct {
		n           map[string]int
		first, last time.Duration
	}
	per := map[string]*counts{}
	var order []string
	for _, f := range e.Log.Failures {
		if f.AER.Severity == "" {
			continue
		}
		c := per[f.Device]
		if c == nil {
			c = &counts{n: map[string]int{}, first: f.Time}
			per[f.Device] = c
			order = append(order, f.Device)
		}
		c.n[f.AER.Severity]++
		c.last = f.Time
	}
	if len(order) == 0 {
		return nil
	}
	sev := Info
	var evidence []string
	for _, d := range order {
		c := per[d]
		var parts []string
		for _, s := range []string{"fatal", "non-fatal", "corrected"} {
			if n := c.n[s]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, s))
			}
		}
		line := d + ": " + strings.Join(parts, ", ")
		if span := c.last - c.first; c.first >= 0 && span >= time.Second {
			line += fmt.Sprintf(" in %s", span.Round(time.Second))
		}
		if e.logGPU(d, "", false) {
			line += " (a GPU)"
		} else if below := e.gpusBelow(d); len(below) > 0 {
			line += " (the port above GPU " + strings.Join(below, ", ") + ")"
		}
		evidence = append(evidence, line)
		if c.n["fatal"]+c.n["non-fatal"] > 0 || c.n["corrected"] >= 100 {
			sev = Warning
		}
	}
	return []Finding{{
		Severity: sev,
		Title:    fmt.Sprintf("PCIe errors reported by AER on %s", plural.N(len(order), "device", "devices")),
		Evidence: capped(evidence, 12),
		Remedy: "A corrected error is a packet the link sent again: a few are harmless, a steady stream means a marginal link (a riser, a cable, " +
			"a slot, Gen5 signal integrity), which can go on to drop it; reseat, or set the slot one PCIe generation lower in the firmware. An " +
			"uncorrected error lost data or the link (gpu-lost says which GPUs it took). The kernel's counts since boot are in " +
			"/sys/bus/pci/devices/<device>/aer_dev_correctable, aer_dev_nonfatal and aer_dev_fatal.",
	}}
}
