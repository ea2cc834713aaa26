package doctor

import (
	"fmt"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/topo"
)

// checkP2PTopology explains what the PCIe tree allows for peer-to-peer transfers: GPUs
// with no switch in common send them through the root complex, where ACS has no say; GPUs
// behind one switch can be held back by ACS redirection on its ports.
func checkP2PTopology(e *Env) []Finding {
	gpus := e.Inv.Devices()
	if len(gpus) < 2 {
		return nil
	}
	m := topo.Build(gpus, nil, topo.NUMANodes(e.H))
	var apart, shared []string
	count := map[topo.Relation]int{}
	for i := range m.GPUs {
		for j := i + 1; j < len(m.GPUs); j++ {
			r := m.Cells[i][j]
			pair := fmt.Sprintf("%s / %s: %s", m.GPUs[i].Address, m.GPUs[j].Address, r)
			if r == topo.PIX || r == topo.PXB {
				shared = append(shared, pair)
			} else {
				apart = append(apart, pair)
				count[r]++
			}
		}
	}
	if len(apart) > 8 {
		// Many pairs: say how they split, and where each GPU hangs.
		var parts []string
		for _, r := range []topo.Relation{topo.PHB, topo.NODE, topo.SYS} {
			if count[r] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", count[r], r))
			}
		}
		apart = []string{fmt.Sprintf("%d GPU pairs share no switch: %s", len(apart), strings.Join(parts, ", "))}
		for _, g := range m.GPUs {
			port := "the root bus"
			if rp, ok := g.RootPort(); ok {
				port = "root port " + rp.String()
			}
			apart = append(apart, fmt.Sprintf("%s: %s of %s, NUMA node %d", g.Address, port, g.HostBridge, g.NUMANode))
		}
	}
	var out []Finding
	if len(apart) > 0 {
		f := Finding{Evidence: capped(apart, 12)}
		if e.Guest {
			f.Severity = Warning
			f.Title = "in this VM the GPUs share no PCIe switch: whether peer-to-peer is safe is the host's to say"
			f.Remedy = "Each GPU sits on its own (virtual) root port, so a peer-to-peer transfer crosses the host's root complex and its IOMMU; " +
				"from here nothing tells whether that works, and the NVIDIA driver gives the GPUs peer access only when the host puts them " +
				"in a gpudirect clique. Use the host's verdict: gpusplit nccl-topo --vm ID on the host writes it into the VM's manifest, " +
				"nccl-topo --manifest here repeats it, and gpusplit pve p2p-clique sets the clique where the host's evidence allows. " +
				"Without a manifest, NCCL_P2P_DISABLE=1 is the safe choice. gpusplit p2p shows what actually works."
		} else {
			f.Severity = Info
			f.Title = "GPU pairs with no shared PCIe switch: their peer-to-peer traffic crosses the root complex"
			f.Remedy = "Between root ports the CPU's root complex forwards peer-to-peer traffic, if it does at all (AMD Zen and recent Xeons do); " +
				"ACS, which only acts inside switches, has no say. With the IOMMU translating (see iommu-translated) that traffic also " +
				"goes through the IOMMU. Nothing to change unless gpusplit p2p finds a pair slow or corrupt."
		}
		out = append(out, f)
	}
	if len(shared) > 0 && !e.Guest {
		if redirect := acsRedirect(e, gpus); len(redirect) > 0 {
			out = append(out, Finding{
				Severity: Warning,
				Title:    "ACS on the switch ports redirects the GPUs' peer-to-peer traffic up to the root complex",
				Evidence: append(shared, redirect...),
				Remedy: "The switch could route GPU-to-GPU traffic directly, but ACS P2P Request/Completion Redirect on its downstream ports " +
					"sends it up to the root complex (and its IOMMU). For GPUs that stay on the host, clear the redirect bits " +
					"(setpci -s <port> ECAP_ACS+0x6.w=0000, at every boot) or disable ACS in the firmware; mind that this merges " +
					"IOMMU groups, so devices behind the switch can then only be passed through together.",
			})
		}
	}
	return out
}

// acsRedirect reads the ACS control register of the ports between GPUs that share a
// switch, from config space (which needs root past its first 64 bytes).
func acsRedirect(e *Env, gpus []*pci.Device) []string {
	seen := map[pci.Address]bool{}
	var out []string
	for _, g := range gpus {
		for _, p := range g.Parents[1:] { // the root port itself is not in a switch
			if seen[p] {
				continue
			}
			seen[p] = true
			cfg, err := e.H.ReadFile("/sys/bus/pci/devices/" + p.String() + "/config")
			if err != nil {
				continue
			}
			if len(cfg) <= 0x100 {
				e.partial("p2p-topology", "the ACS registers of switch ports are past the first 64 bytes of config space, which only root can read")
				continue
			}
			ctl, ok := pci.Config(cfg).ACSControl()
			if ok && ctl&0x000c != 0 {
				out = append(out, fmt.Sprintf("%s: ACS control 0x%04x (ReqRedir%s CmpltRedir%s)", p, ctl, flag(ctl&0x4), flag(ctl&0x8)))
			}
		}
	}
	return out
}

func flag(v uint16) string {
	if v != 0 {
		return "+"
	}
	return "-"
}

// checkVMFlat finds a VM whose GPUs show the guest nothing of the host's topology: no NUMA
// node, or all on one host bridge, so NCCL and nvidia-smi see PHB everywhere.
func checkVMFlat(e *Env) []Finding {
	if !e.Guest || len(e.Inv.GPUs) < 2 {
		return nil
	}
	bridges := map[pci.HostBridge]bool{}
	noNUMA := true
	var evidence []string
	for _, g := range e.Inv.GPUs {
		bridges[g.HostBridge] = true
		noNUMA = noNUMA && g.NUMANode < 0
		evidence = append(evidence, fmt.Sprintf("%s: host bridge %s, numa_node %d", g.Address, g.HostBridge, g.NUMANode))
	}
	if !noNUMA && len(bridges) > 1 {
		return nil
	}
	return []Finding{{
		Severity: Warning,
		Title:    "the VM's GPUs show no NUMA or host bridge structure: NCCL and nvidia-smi see PHB everywhere",
		Evidence: capped(evidence, 8),
		Remedy: "The guest cannot tell which GPUs share a host NUMA node, so NCCL cannot keep traffic within one. Either give NCCL a " +
			"topology file that describes the host (on the Proxmox host `gpusplit nccl-topo --vm ID --file ID.json`, then in the VM " +
			"`gpusplit nccl-topo --manifest ID.json --file /etc/nccl-topo.xml` and NCCL_TOPO_FILE=/etc/nccl-topo.xml), or give the VM " +
			"a PCIe layout that carries NUMA: pxb-pcie expander bridges with numa_node, the GPUs behind them, and guest NUMA nodes " +
			"bound to the host's (`gpusplit pve vm-layout --vm ID` on the host). docs/vm-topology.md compares the two.",
	}}
}

// checkVMMachine finds an i440fx VM with PCIe GPUs: no PCIe root ports, and a 32-bit era
// memory layout that large BARs do not fit.
func checkVMMachine(e *Env) []Finding {
	if !e.Guest || len(e.Inv.GPUs) == 0 {
		return nil
	}
	var chipset string
	for _, d := range e.Inv.Tree.Devices {
		if d.VendorID == 0x8086 && (d.DeviceID == 0x1237 || d.DeviceID == 0x7000) {
			chipset = fmt.Sprintf("%s %s (i440FX/PIIX)", d.Address, d.ID())
		}
	}
	if chipset == "" {
		return nil
	}
	evidence := []string{"chipset: " + chipset}
	for _, g := range e.Inv.GPUs {
		evidence = append(evidence, fmt.Sprintf("%s %s on the root bus %s, no PCIe root port above it", g.Address, g.Name(), g.HostBridge))
	}
	return []Finding{{
		Severity: Warning,
		Title:    "this VM is an i440fx (pc) machine: its GPUs sit on conventional PCI",
		Evidence: capped(evidence, 9),
		Remedy: "Use the q35 machine type with the GPUs on PCIe root ports: on Proxmox `machine: q35` and `pcie=1` on each hostpciN " +
			"(gpusplit pve sync sets both). The GPU driver expects a PCIe link above the GPU, and q35 gives large BARs a 64-bit window.",
	}}
}

// checkNUMAUnknown finds GPUs without a NUMA node on a bare-metal NUMA machine: the
// firmware does not tell the kernel which socket each root complex hangs off.
func checkNUMAUnknown(e *Env) []Finding {
	if e.Guest || topo.NUMANodes(e.H) < 2 {
		return nil
	}
	var evidence []string
	for _, g := range e.Inv.GPUs {
		if g.NUMANode < 0 {
			evidence = append(evidence, fmt.Sprintf("%s/numa_node: -1", g.Path))
		}
	}
	if len(evidence) == 0 {
		return nil
	}
	return []Finding{{
		Severity: Warning,
		Title:    fmt.Sprintf("%s no NUMA node on a machine with %d", plural.N(len(evidence), "GPU has", "GPUs have"), topo.NUMANodes(e.H)),
		Evidence: capped(evidence, 8),
		Remedy: "The firmware's ACPI tables give the PCI root complexes no proximity domain, so the kernel, NCCL and gpusplit cannot " +
			"place these GPUs: a NUMA-aware split treats them as unknown. Look in the firmware for the NUMA settings (AMD: NPS and " +
			"\"ACPI SRAT L3 Cache as NUMA Domain\"; Intel: Sub-NUMA Clustering) and update it; reboot and check numa_node.",
	}}
}
