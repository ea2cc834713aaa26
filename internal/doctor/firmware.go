package doctor

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
)

// checkFirmware reports what the firmware set, as Linux sees it, item by item, with what
// a GPU server wants and why: the platform, NUMA nodes per socket, the IOMMU, 64-bit BAR
// placement (Above 4G decoding), Resizable BAR, SR-IOV, ACS above the GPUs, the PCIe
// settings of the GPUs' links (payload, read request, relaxed ordering, 10-bit tags,
// ASPM). It is information, but where an item works against the GPUs (a BAR1 the
// firmware left small, a 64-bit BAR below 4 GiB) that item is a warning of its own.
func checkFirmware(e *Env) []Finding {
	if e.Guest {
		return nil // a VM's firmware settings are its hypervisor's
	}
	var items, warnings []Finding
	item := func(title string, evidence ...string) {
		items = append(items, Finding{Title: title, Evidence: evidence})
	}

	// The platform.
	dmi := func(f string) string {
		v, _ := e.H.ReadString("/sys/class/dmi/id/" + f)
		return v
	}
	if v := dmi("sys_vendor"); v != "" {
		platform := strings.TrimSpace(v + " " + dmi("product_name"))
		if b := dmi("board_name"); b != "" && b != dmi("product_name") {
			platform += ", board " + b
		}
		item("platform: "+platform, fmt.Sprintf("firmware %s %s of %s", dmi("bios_vendor"), dmi("bios_version"), dmi("bios_date")))
	}

	// NUMA nodes per socket.
	if sockets, nodes := socketCount(e), cpuNodes(e); sockets > 0 && nodes > 0 {
		nps := "NPS1"
		switch {
		case nodes == 1 && sockets > 1:
			nps = "NPS0 (one node for all sockets)"
		case nodes > sockets:
			nps = fmt.Sprintf("NPS%d", nodes/sockets)
		}
		why := "one node per socket: a GPU and the memory of its socket are one node, as NCCL and a VM's numa option want"
		if nodes > sockets {
			why = "a socket split into nodes: GPUs under one socket can be on different nodes (NODE, not PHB, to each other), so " +
				"pin each workload and VM to its GPUs' node"
		}
		item(fmt.Sprintf("NUMA: %d nodes on %d sockets, %s", nodes, sockets, nps), why)
		if split := splitSockets(e); len(split) > 0 {
			warnings = append(warnings, Finding{
				Severity: Warning,
				Title:    fmt.Sprintf("%s puts GPUs of one socket on different NUMA nodes: they see each other as SYS, as across sockets", nps),
				Evidence: capped(split, 8),
				Remedy: "nvidia-smi, NCCL and a split by NUMA node take GPUs on different nodes as far apart, though they share a socket: " +
					"set NPS1 in the firmware (NUMA nodes per socket) unless workloads are pinned per quarter of a socket, then reboot.",
			})
		}
	}

	// The IOMMU: its units, or at least its groups.
	units, _ := e.H.ReadDir("/sys/class/iommu")
	groups, _ := e.H.ReadDir("/sys/kernel/iommu_groups")
	if len(units)+len(groups) > 0 {
		types := map[string]int{}
		for _, g := range e.Inv.GPUs {
			if g.IOMMUGroup < 0 {
				continue
			}
			if t, err := e.H.ReadString(fmt.Sprintf("/sys/kernel/iommu_groups/%d/type", g.IOMMUGroup)); err == nil {
				types[t]++
			}
		}
		var ts []string
		for _, t := range slices.Sorted(maps.Keys(types)) {
			ts = append(ts, fmt.Sprintf("%d in %s groups", types[t], t))
		}
		line := fmt.Sprintf("%d IOMMU groups", len(groups))
		if len(units) > 0 {
			line = strings.Join(units, ", ") + "; " + line
		}
		if len(ts) > 0 {
			line += "; the GPUs: " + strings.Join(ts, ", ")
		}
		item("IOMMU: on", line,
			"VMs need it (IOMMU groups, vfio-pci); identity (iommu=pt) groups leave the host's own GPU DMA and P2P untranslated")
	} else {
		item("IOMMU: off or not exposed by the firmware", "no IOMMU groups: no vfio-pci and no VM can get a GPU (iommu-off)")
	}

	// 64-bit BARs above 4 GiB, Resizable BAR, SR-IOV, the PCIe settings.
	var above, below, sriov []string
	rebarLines, settings := &alike{}, &alike{}
	unread := false
	for _, g := range e.Inv.GPUs {
		for _, b := range g.BARs {
			if !b.Is64Bit || b.IO || b.Unassigned || b.Size < 256<<20 {
				continue
			}
			if b.Start >= 1<<32 {
				above = append(above, fmt.Sprintf("%s %s at 0x%x", g.Address, b.Name(), b.Start))
			} else {
				below = append(below, fmt.Sprintf("%s %s (%s) at 0x%x, below 4 GiB", g.Address, b.Name(), barShape(b), b.Start))
			}
		}
		if n, err := e.H.ReadString(g.Path + "/sriov_totalvfs"); err == nil && n != "0" {
			sriov = append(sriov, fmt.Sprintf("%s: %s virtual functions", g.Address, n))
		}
		raw, err := e.H.ReadFile(g.Path + "/config")
		if err != nil {
			continue
		}
		cfg := pci.Config(raw)
		if !cfg.Full() {
			unread = true
			continue
		}
		for _, r := range cfg.ResizableBARs() {
			what := fmt.Sprintf("BAR%d: %s, the largest it offers %s", r.Index, sizeName(r.Current), sizeName(r.Largest))
			line := g.Address.String() + " " + what
			if r.Current < r.Largest && r.Current <= 256<<20 {
				warnings = append(warnings, Finding{
					Severity: Warning,
					Title:    fmt.Sprintf("Resizable BAR is off for %s: BAR%d is %s of the %s it offers", g.Address, r.Index, sizeName(r.Current), sizeName(r.Largest)),
					Evidence: []string{line},
					Remedy: "With a small BAR1 the CPU and peers reach the GPU's memory through a sliding window: GPUDirect RDMA and P2P " +
						"mappings are limited, and some drivers need the full aperture. Enable Resizable BAR (\"Re-Size BAR Support\") and " +
						"Above 4G decoding in the firmware, then reboot.",
				})
			}
			rebarLines.add(g.Address.String(), what)
		}
		if p, ok := cfg.PCIeSettings(); ok {
			settings.add(g.Address.String(), fmt.Sprintf("max payload %d of %d bytes, max read request %d, relaxed ordering %s, 10-bit tags %s, ASPM %s",
				p.MaxPayload, p.MaxPayloadSupported, p.MaxReadRequest, onOff(p.RelaxedOrdering), onOff(p.TenBitTagRequester), p.ASPM))
		}
	}
	switch {
	case len(below) > 0:
		warnings = append(warnings, Finding{
			Severity: Warning,
			Title:    "GPU BARs lie below 4 GiB: Above 4G decoding is off",
			Evidence: capped(below, 8),
			Remedy:   "Large 64-bit BARs below 4 GiB crowd the 32-bit MMIO window: enable \"Above 4G decoding\" in the firmware, then reboot.",
		})
	case len(above) > 0:
		item("Above 4G decoding: on", append(capped(above, 4), "the GPUs' large BARs are placed in 64-bit MMIO space above 4 GiB, as they need")...)
	}
	if len(rebarLines.order) > 0 {
		item("Resizable BAR", append(rebarLines.lines(), "a BAR1 as large as the GPU offers maps all its memory: what P2P, GPUDirect and the driver want")...)
	}
	if len(sriov) > 0 {
		item("SR-IOV: the GPUs offer virtual functions", capped(sriov, 8)...)
	} else if len(e.Inv.GPUs) > 0 {
		item("SR-IOV: the GPUs offer no virtual functions", "whole GPUs only; vGPU or MIG-backed VFs need the firmware's SR-IOV support and a GPU that has them")
	}
	item("ACS above the GPUs", acsAbove(e)...)
	if len(settings.order) > 0 {
		item("PCIe settings of the GPUs", append(settings.lines(),
			"a payload of 256 bytes with relaxed ordering is what GPU DMA runs best with; 10-bit tags must be supported along a P2P path; "+
				"ASPM off on GPU links avoids the latency of leaving low-power states")...)
	}
	if p, err := e.H.ReadString("/sys/module/pcie_aspm/parameters/policy"); err == nil {
		item("ASPM policy of the kernel: " + p)
	}
	if unread {
		e.partial("firmware", "Resizable BAR and the PCIe settings are past the first 64 bytes of config space, which only root can read")
	}
	if len(items) == 0 {
		return warnings
	}
	var evidence []string
	for _, it := range items {
		evidence = append(evidence, it.Title)
		for _, l := range it.Evidence {
			evidence = append(evidence, "  "+l)
		}
	}
	return append(warnings, Finding{
		Severity: Info,
		Title:    "what the firmware set, as Linux sees it",
		Evidence: evidence,
		Remedy: "For GPU servers: Above 4G decoding and Resizable BAR on, the IOMMU on (iommu=pt for the host's own GPUs), NPS1 unless " +
			"workloads are pinned per node, ACS off on switch ports between GPUs that do P2P on the host and on where GPUs go to VMs, " +
			"SR-IOV on only for vGPU. Each line above says what is set and why it matters.",
	})
}

// cpuNodes counts the NUMA nodes with CPUs: memory-only nodes (CXL) are no NPS split.
func cpuNodes(e *Env) int {
	names, err := e.H.ReadDir("/sys/devices/system/node")
	if err != nil {
		return 0
	}
	n := 0
	for _, name := range names {
		if !strings.HasPrefix(name, "node") || strings.Trim(name[4:], "0123456789") != "" || len(name) == 4 {
			continue
		}
		if l, err := e.H.ReadString("/sys/devices/system/node/" + name + "/cpulist"); err == nil && l != "" {
			n++
		}
	}
	return n
}

// splitSockets returns, for each socket whose GPUs lie on more than one NUMA node, a line
// naming them and their nodes.
func splitSockets(e *Env) []string {
	pkg := cpuPackages(e)
	nodes := map[string]map[int][]string{} // socket → node → GPUs
	var order []string
	for _, g := range e.Inv.GPUs {
		if g.NUMANode < 0 {
			continue
		}
		first, err := e.H.ReadString(fmt.Sprintf("/sys/devices/system/node/node%d/cpulist", g.NUMANode))
		if err != nil {
			continue
		}
		cpu, _, _ := strings.Cut(strings.SplitN(first, ",", 2)[0], "-")
		socket, ok := pkg[cpu]
		if !ok {
			continue
		}
		if nodes[socket] == nil {
			nodes[socket] = map[int][]string{}
			order = append(order, socket)
		}
		nodes[socket][g.NUMANode] = append(nodes[socket][g.NUMANode], g.Address.String())
	}
	var out []string
	for _, socket := range order {
		if len(nodes[socket]) < 2 {
			continue
		}
		var parts []string
		for _, n := range slices.Sorted(maps.Keys(nodes[socket])) {
			parts = append(parts, fmt.Sprintf("node %d: %s", n, strings.Join(nodes[socket][n], " ")))
		}
		out = append(out, fmt.Sprintf("socket %s: %s", socket, strings.Join(parts, "; ")))
	}
	return out
}

// cpuPackages maps each CPU of /proc/cpuinfo ("processor") to its package ("physical id").
func cpuPackages(e *Env) map[string]string {
	b, err := e.H.ReadFile("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	out := map[string]string{}
	cpu := ""
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "processor":
			cpu = strings.TrimSpace(v)
		case "physical id":
			out[cpu] = strings.TrimSpace(v)
		}
	}
	return out
}

// socketCount counts the CPU packages in /proc/cpuinfo ("physical id").
func socketCount(e *Env) int {
	b, err := e.H.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "physical id" {
			ids[strings.TrimSpace(v)] = true
		}
	}
	return len(ids)
}

// acsAbove says what ACS does between the GPUs and their root ports: only switch ports
// can redirect peer-to-peer traffic.
func acsAbove(e *Env) []string {
	var switched []*pci.Device
	for _, g := range e.Inv.GPUs {
		if len(g.Parents) > 1 {
			switched = append(switched, g.Device)
		}
	}
	if len(switched) == 0 {
		return []string{"no switch between the GPUs and their root ports: ACS has no say in their P2P, which crosses the root complex"}
	}
	if lines := acsRedirect(e, switched); len(lines) > 0 {
		return append(lines, "switch ports redirect P2P up to the root complex (p2p-topology)")
	}
	return []string{"the switch ports above the GPUs do not redirect P2P"}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// sizeName writes a power-of-two size: "256 MiB", "128 GiB".
func sizeName(n uint64) string {
	switch {
	case n >= 1<<40:
		return fmt.Sprintf("%d TiB", n>>40)
	case n >= 1<<30:
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// alike gathers the devices that share a line: eight GPUs set alike read as one line.
type alike struct {
	order []string
	who   map[string][]string
}

func (a *alike) add(device, line string) {
	if a.who == nil {
		a.who = map[string][]string{}
	}
	if a.who[line] == nil {
		a.order = append(a.order, line)
	}
	a.who[line] = append(a.who[line], device)
}

func (a *alike) lines() []string {
	var out []string
	for _, l := range a.order {
		who := a.who[l]
		name := who[0]
		if len(who) > 1 {
			name = fmt.Sprintf("%d GPUs (%s … %s)", len(who), who[0], who[len(who)-1])
		}
		out = append(out, name+": "+l)
	}
	return out
}
