package doctor

import (
	"fmt"
	"slices"
	"strings"
)

// codeName names a code of NVIDIA's driver.
type codeName struct {
	code uint64
	name string
}

// lookupCode returns the name table gives code.
func lookupCode(table []codeName, code uint64) (string, bool) {
	for _, c := range table {
		if c.code == code {
			return c.name, true
		}
	}
	return "", false
}

// rmStages are NVIDIA's RM init stages (osinit.c) that a GPU's owner can act on.
var rmStages = []codeName{
	{0x10, "register setup"}, {0x11, "system environment"}, {0x20, "GPU allocation"}, {0x21, "device creation"}, {0x22, "GPU attach"},
	{0x23, "pre-init"}, {0x24, "state init"}, {0x25, "GPU load"}, {0x26, "DMA configuration"}, {0x30, "VBIOS"}, {0x31, "VBIOS POST"},
	{0x42, "BAR1 mapping"}, {0x60, "firmware policy (GSP)"}, {0x61, "firmware fetch (GSP)"}, {0x62, "firmware init (GSP)"},
}

// nvStatuses are the NV_STATUS codes (nvstatuscodes.h) an init failure most often ends with.
var nvStatuses = []codeName{
	{0x0f, "GPU lost from the bus"}, {0x11, "GPU not in full power"}, {0x40, "invalid state"}, {0x51, "out of memory"},
	{0x56, "not supported"}, {0x62, "reset required"}, {0x65, "timeout"},
}

// checkGPUInit finds GPUs that did not come up: NVIDIA's RmInitAdapter failures (with
// the stage and status decoded), devices stuck in a power state, and the driver's own
// summary ("probe routine failed for N device(s)", "None of the NVIDIA devices were
// initialized").
func checkGPUInit(e *Env) []Finding {
	if e.Log == nil || len(e.Log.InitFailures) == 0 {
		return nil
	}
	var evidence tally
	var devices []string
	stuck, firmware := false, false
	for _, x := range e.Log.InitFailures {
		if x.Device != "" && x.RM == nil && !e.logGPU(x.Device, "", true) {
			continue // a power state of a device that is not a GPU's
		}
		line := "kernel: " + strings.ReplaceAll(x.Line, "\n", " ")
		switch {
		case x.RM != nil:
			stage, ok := lookupCode(rmStages, x.RM.Stage)
			if !ok {
				stage = fmt.Sprintf("stage 0x%x", x.RM.Stage)
			}
			status, ok := lookupCode(nvStatuses, x.RM.Status)
			if !ok {
				status = fmt.Sprintf("status 0x%x", x.RM.Status)
			}
			line += fmt.Sprintf(" [%s, %s]", stage, status)
			firmware = firmware || x.RM.Stage >= 0x60
		case x.Power != "":
			stuck = true
		}
		evidence.add(line)
		if x.Device != "" && !slices.Contains(devices, gpuKey(x.Device)) {
			devices = append(devices, gpuKey(x.Device))
		}
	}
	if len(evidence.order) == 0 {
		return nil
	}
	if len(devices) == 0 && (len(e.Log.BARFailures) > 0 || len(e.Log.NVRMBars) > 0) {
		// Only the driver's summary, after BARs it was not given: bar-unassigned
		// says why.
		return nil
	}
	title := "NVIDIA's driver could not bring up GPUs"
	if len(devices) > 0 {
		title = "GPUs that did not come up: " + strings.Join(devices, ", ")
	}
	var r []string
	if stuck {
		r = append(r, "A device that cannot leave D3cold, or does not answer after resume, lost its power or its link while idle: keep the GPU out of runtime D3 "+
			"(vfio-pci's disable_idle_d3=1 for GPUs given to VMs; NVreg_DynamicPowerManagement=0x00 for the nvidia driver), "+
			"and power the host off and on to bring it back.")
	}
	r = append(r, "Look at the lines before these in the log: a BAR the kernel could not place (bar-unassigned) or a GPU that fell off "+
		"the bus (gpu-lost) makes the driver fail this way. Otherwise check that the driver supports this GPU (GPUs since Blackwell "+
		"need NVIDIA's open kernel modules), and power the host off and on: a GPU left in a bad state by a crash, a VM or another "+
		"driver often needs it.")
	if firmware {
		r = append(r, "The failure is in the GSP firmware stages: the firmware files must match the driver version (a partial upgrade leaves "+
			"old ones in /lib/firmware/nvidia).")
	}
	return []Finding{{
		Severity: Error,
		Title:    title,
		Evidence: capped(evidence.lines(), 12),
		Remedy:   strings.Join(r, " "),
	}}
}
