package doctor

import (
	"fmt"

	"github.com/gpusplit/gpusplit/internal/health"
)

// checkQuarantined reports each GPU that a VM's stop found broken and that the hook
// kept from its driver and its containers (internal/health): it stays out of use until
// it is released.
func checkQuarantined(e *Env) []Finding {
	recs, err := health.List(e.H)
	if err != nil {
		e.partial("gpu-quarantined", err.Error())
		return nil
	}
	var out []Finding
	for _, r := range recs {
		a := r.Device.String()
		var title string
		evidence := []string{"record: " + health.RecordPath(r.Device)}
		if r.Damaged != "" {
			title = fmt.Sprintf("GPU %s is quarantined; its record is damaged", a)
			evidence = append(evidence, "damaged: "+r.Damaged)
		} else {
			what := a
			if r.GPU != r.Device {
				what = fmt.Sprintf("%s (of GPU %s)", a, r.GPU)
			}
			title = fmt.Sprintf("GPU %s is quarantined: the %s of VM %d found it broken", what, r.Phase, r.Guest)
			evidence = append(evidence, fmt.Sprintf("found at %s, on its way back to %s", r.Time.Format("2006-01-02 15:04:05 MST"), orNone(r.Driver)))
			evidence = append(evidence, capped(health.Lines(r.Evidence), 10)...)
			evidence = append(evidence, "its link at the VM's start: "+r.Baseline.String())
		}
		out = append(out, Finding{
			Severity: Error,
			Title:    title,
			Evidence: evidence,
			Remedy: "The GPU did not come back from the VM in working order, most often a reset that failed, so gpusplit gave it to no driver " +
				"and no container. Look at the kernel log from the VM's stop (dmesg, or journalctl -k) for AER errors, \"not ready after FLR\", " +
				"\"Unable to change power state\" and NVRM Xid lines on " + a + ". Try a reset: echo 1 > /sys/bus/pci/devices/" + a + "/reset " +
				"(with no VM using it); if it still reads ffff or its link stays down, reboot the host, powering it off if a warm reboot does " +
				"not bring it back. Then release it: gpusplit hook release " + a + " (it checks the GPU again and refuses while it is still " +
				"broken), and run gpusplit apply, or start and stop a VM that uses it, to give it back to its driver and containers. " +
				"A reboot clears the quarantine, since the records live under /run.",
		})
	}
	return out
}
