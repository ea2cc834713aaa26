package doctor

import (
	"fmt"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/plural"
)

// checkGroupShared finds GPUs whose IOMMU group holds devices other than the GPU's own
// functions: passing the GPU to a VM takes them too.
func checkGroupShared(e *Env) []Finding {
	var evidence []string
	for _, g := range e.Inv.GPUs {
		own := map[pci.Address]bool{g.Address: true}
		for _, f := range g.Functions {
			own[f.Address] = true
		}
		var others []string
		for _, m := range e.Inv.Tree.Group(g.IOMMUGroup) {
			if !own[m.Address] && !m.IsBridge() {
				others = append(others, fmt.Sprintf("%s %s (%s)", m.Address, m.Name(), orNone(m.Driver)))
			}
		}
		if len(others) > 0 {
			evidence = append(evidence, fmt.Sprintf("IOMMU group %d of GPU %s also holds %s", g.IOMMUGroup, g.Address, strings.Join(others, ", ")))
		}
	}
	if len(evidence) == 0 {
		return nil
	}
	return []Finding{{
		Severity: Warning,
		Title:    "GPUs share their IOMMU group with other devices",
		Evidence: capped(evidence, 8),
		Remedy: "A VM can only be given a whole IOMMU group: every device in it goes to vfio-pci together. Move the GPU to a slot " +
			"whose group is its own (often a slot wired to the CPU rather than the chipset), or accept passing the others through " +
			"too (gpusplit's allow_shared_groups). pcie_acs_override splits groups only on paper: the devices can still reach each other.",
	}}
}

// checkHeld finds what uses devices that the configured split would move (processes,
// mounts, interfaces, guests): apply refuses until they let go.
func checkHeld(e *Env) []Finding {
	if e.Plan == nil {
		return nil
	}
	var evidence []string
	for _, m := range e.Plan.Moves {
		for _, h := range m.Holders {
			evidence = append(evidence, fmt.Sprintf("%s (to %s) is held by %s", m.Device, plan.DriverText(m.To), h))
		}
	}
	if len(evidence) == 0 {
		return nil
	}
	return []Finding{{
		Severity: Warning,
		Title:    "something uses devices that the configured split would move",
		Evidence: capped(evidence, 10),
		Remedy: "gpusplit apply refuses to move a held GPU (the nvidia driver would wait for ever in the unbind). Release them first: " +
			"stop the containers (pct stop <id>) or the services in them, nvidia-persistenced (systemctl stop nvidia-persistenced), " +
			"VMs that hold vfio-pci GPUs (qm stop <id>), file systems mounted from a disk that would move (umount), interfaces that are up (ip link set <if> down); gpusplit plan lists each holder with its way out.",
	}}
}

// checkDrift finds a configured split that is not in effect.
func checkDrift(e *Env) []Finding {
	if e.Plan == nil || e.Plan.Empty() {
		return nil
	}
	var evidence []string
	for _, m := range e.Plan.Moves {
		evidence = append(evidence, fmt.Sprintf("%s: on %s, should be on %s", m.Device, orNone(m.From), plan.DriverText(m.To)))
	}
	return []Finding{{
		Severity: Warning,
		Title:    fmt.Sprintf("the configured split is not in effect: %s not where it wants them", plural.N(len(e.Plan.Moves), "device is", "devices are")),
		Evidence: capped(evidence, 10),
		Remedy:   "Run gpusplit apply (gpusplit plan shows the moves first). If this keeps coming back after reboots, install the boot-time pieces: gpusplit persist install.",
	}}
}

func orNone(s string) string {
	if s == "" {
		return "no driver"
	}
	return s
}
