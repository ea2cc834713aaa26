package doctor

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plural"
)

// The firmware checks are a group (`--only firmware`): each reports one item of what the
// firmware set, as Linux sees it, with what a GPU server wants and why. Each is a note,
// unless the item works against the GPUs (a BAR1 left small, 64-bit BARs below 4 GiB, GPUs
// of one socket on different nodes): then it is a warning. A VM's firmware settings are
// its hypervisor's, so none runs in a guest.

func checkFirmwarePlatform(e *Env) []Finding {
	if e.Guest {
		return nil
	}
	dmi := func(f string) string {
		v, _ := e.H.ReadString("/sys/class/dmi/id/" + f)
		return v
	}
	v := dmi("sys_vendor")
	if v == "" {
		return nil
	}
	platform := strings.TrimSpace(v + " " + dmi("product_name"))
	if b := dmi("board_name"); b != "" && b != dmi("product_name") {
		platform += ", board " + b
	}
	return []Finding{{
		Severity: Info,
		Title:    "platform: " + platform,
		Evidence: []string{fmt.Sprintf("firmware %s %s of %s", dmi("bios_vendor"), dmi("bios_version"), dmi("bios_date"))},
		Remedy:   "The firmware whose settings the other firmware items report. Its vendor's release notes say which version fixes what (PCIe, IOMMU and BAR placement bugs are common).",
	}}
}

func checkFirmwareNUMA(e *Env) []Finding {
	if e.Guest {
		return nil
	}
	sockets, nodes := socketCount(e), len(cpuNodeList(e))
	if sockets == 0 || nodes == 0 {
		return nil
	}
	nps := "NPS1"
	switch {
	case nodes == 1 && sockets > 1:
		nps = "NPS0 (one node for all sockets)"
	case nodes > sockets:
		nps = fmt.Sprintf("NPS%d", nodes/sockets)
	}
	title := fmt.Sprintf("NUMA: %d nodes on %d sockets, %s", nodes, sockets, nps)
	if split := splitSockets(e); len(split) > 0 {
		return []Finding{{
			Severity: Warning,
			Title:    fmt.Sprintf("%s puts GPUs of one socket on different NUMA nodes: they see each other as SYS, as across sockets", nps),
			Evidence: append([]string{title}, capped(split, 8)...),
			Remedy: "nvidia-smi, NCCL and a split by NUMA node take GPUs on different nodes as far apart, though they share a socket: " +
				"set NPS1 in the firmware (NUMA nodes per socket) unless workloads are pinned per quarter of a socket, then reboot.",
		}}
	}
	var evidence []string
	for _, n := range cpuNodeList(e) {
		evidence = append(evidence, fmt.Sprintf("%s: CPUs %s", n[0], n[1]))
	}
	why := "One node per socket: a GPU and the memory of its socket are one node, as NCCL and a VM's numa option want."
	switch {
	case nodes > sockets:
		why = "The sockets are split into nodes, and each socket's GPUs lie on one of them: pin each workload and VM to its GPUs' node."
	case nodes < sockets:
		why = "All sockets are one node: the kernel, NCCL and a split cannot tell which GPUs are near which memory. Set NPS1 in the firmware."
	}
	return []Finding{{Severity: Info, Title: title, Evidence: evidence, Remedy: why}}
}

func checkFirmwareIOMMU(e *Env) []Finding {
	if e.Guest {
		return nil
	}
	units, _ := e.H.ReadDir("/sys/class/iommu")
	groups, _ := e.H.ReadDir("/sys/kernel/iommu_groups")
	if len(units)+len(groups) == 0 {
		return []Finding{{
			Severity: Info,
			Title:    "IOMMU: off or not exposed by the firmware",
			Evidence: []string{"/sys/class/iommu and /sys/kernel/iommu_groups are empty"},
			Remedy:   "Without an IOMMU no GPU can go to a VM through vfio-pci (iommu-off says how to turn it on).",
		}}
	}
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
	return []Finding{{
		Severity: Info,
		Title:    "IOMMU: on",
		Evidence: []string{line},
		Remedy: "VMs need it (IOMMU groups, vfio-pci); identity groups (iommu=pt) leave the host's own GPU DMA and P2P untranslated, " +
			"DMA groups translate it (iommu-translated).",
	}}
}

func checkFirmwareAbove4G(e *Env) []Finding {
	if e.Guest {
		return nil
	}
	var above, below []string
	for _, g := range e.Inv.GPUs {
		for _, b := range g.BARs {
			if !b.Is64Bit || b.IO || b.Unassigned || b.Size < 256<<20 {
				continue
			}
			if b.Start >= 1<<32 {
				above = append(above, fmt.Sprintf("%s %s (%s) at 0x%x", g.Address, b.Name(), barShape(b), b.Start))
			} else {
				below = append(below, fmt.Sprintf("%s %s (%s) at 0x%x, below 4 GiB", g.Address, b.Name(), barShape(b), b.Start))
			}
		}
	}
	switch {
	case len(below) > 0:
		return []Finding{{
			Severity: Warning,
			Title:    "GPU BARs lie below 4 GiB: Above 4G decoding is off",
			Evidence: capped(below, 8),
			Remedy:   "Large 64-bit BARs below 4 GiB crowd the 32-bit MMIO window: enable \"Above 4G decoding\" in the firmware, then reboot.",
		}}
	case len(above) > 0:
		if w := largestWindow(e); w != "" {
			above = append(capped(above, 4), w)
		}
		return []Finding{{
			Severity: Info,
			Title:    "Above 4G decoding: on",
			Evidence: above,
			Remedy:   "The GPUs' large BARs are placed in 64-bit MMIO space above 4 GiB, as they need.",
		}}
	}
	return nil
}

// largestWindow names the largest 64-bit prefetchable window of the bridges above the
// GPUs: what the firmware set aside for their BARs, and so the largest BAR1 it can hold.
func largestWindow(e *Env) string {
	var best pci.BAR
	var at pci.Address
	seen := map[pci.Address]bool{}
	for _, g := range e.Inv.GPUs {
		for _, p := range g.Parents {
			if seen[p] {
				continue
			}
			seen[p] = true
			text, err := e.H.ReadString("/sys/bus/pci/devices/" + p.String() + "/resource")
			if err != nil {
				continue
			}
			for _, w := range pci.ParseWindows(text) {
				if w.Is64Bit && w.Prefetchable && w.Size > best.Size {
					best, at = w, p
				}
			}
		}
	}
	if best.Size == 0 {
		return ""
	}
	return fmt.Sprintf("the largest 64-bit window above the GPUs: %s at 0x%x, of bridge %s", sizeName(best.Size), best.Start, at)
}

// gpuConfigs reads the GPUs' config space, noting for the check id when only the first
// 64 bytes (all that a reader without root gets) could be read.
func gpuConfigs(e *Env, id, what string) map[pci.Address]pci.Config {
	out := map[pci.Address]pci.Config{}
	for _, g := range e.Inv.GPUs {
		raw, err := e.H.ReadFile(g.Path + "/config")
		if err != nil {
			continue
		}
		if cfg := pci.Config(raw); cfg.Full() {
			out[g.Address] = cfg
		} else {
			e.partial(id, what+" past the first 64 bytes of config space, which only root can read")
		}
	}
	return out
}

func checkFirmwareReBAR(e *Env) []Finding {
	if e.Guest {
		return nil
	}
	cfgs := gpuConfigs(e, "firmware-rebar", "the Resizable BAR capability is")
	lines := &alike{}
	var small []string
	for _, g := range e.Inv.GPUs {
		cfg, ok := cfgs[g.Address]
		if !ok {
			continue
		}
		for _, r := range cfg.ResizableBARs() {
			what := fmt.Sprintf("BAR%d: %s, the largest it offers %s", r.Index, sizeName(r.Current), sizeName(r.Largest))
			if r.Current < r.Largest && r.Current <= 256<<20 {
				small = append(small, g.Address.String()+" "+what)
			}
			lines.add(g.Address.String(), what)
		}
	}
	if len(lines.order) == 0 {
		return nil
	}
	if len(small) > 0 {
		return []Finding{{
			Severity: Warning,
			Title:    fmt.Sprintf("Resizable BAR is off for %s: a BAR of 256 MiB or less where the GPU offers more", plural.S(len(small), "GPU")),
			Evidence: lines.lines(),
			Remedy: "With a small BAR1 the CPU and peers reach the GPU's memory through a sliding window: GPUDirect RDMA and P2P " +
				"mappings are limited, and some drivers need the full aperture. Enable Resizable BAR (\"Re-Size BAR Support\") and " +
				"Above 4G decoding in the firmware, then reboot.",
		}}
	}
	return []Finding{{
		Severity: Info,
		Title:    "Resizable BAR: on",
		Evidence: lines.lines(),
		Remedy:   "A BAR1 as large as the GPU offers maps all its memory: what P2P, GPUDirect and the driver want.",
	}}
}

func checkFirmwareSRIOV(e *Env) []Finding {
	if e.Guest || len(e.Inv.GPUs) == 0 {
		return nil
	}
	var sriov []string
	for _, g := range e.Inv.GPUs {
		if n, err := e.H.ReadString(g.Path + "/sriov_totalvfs"); err == nil && n != "0" {
			sriov = append(sriov, fmt.Sprintf("%s: %s virtual functions", g.Address, n))
		}
	}
	if len(sriov) > 0 {
		return []Finding{{
			Severity: Info,
			Title:    "SR-IOV: the GPUs offer virtual functions",
			Evidence: capped(sriov, 8),
			Remedy:   "Virtual functions are for vGPU; for whole-GPU passthrough and containers they are not needed.",
		}}
	}
	return []Finding{{
		Severity: Info,
		Title:    "SR-IOV: the GPUs offer no virtual functions",
		Evidence: []string{fmt.Sprintf("no sriov_totalvfs, or 0, on %s", plural.S(len(e.Inv.GPUs), "GPU"))},
		Remedy:   "Whole GPUs only; vGPU or MIG-backed virtual functions need the firmware's SR-IOV support and a GPU that has them.",
	}}
}

func checkFirmwareACS(e *Env) []Finding {
	if e.Guest || len(e.Inv.GPUs) == 0 {
		return nil
	}
	var switched []*pci.Device
	for _, g := range e.Inv.GPUs {
		if len(g.Parents) > 1 {
			switched = append(switched, g.Device)
		}
	}
	if len(switched) == 0 {
		var ports []string
		for _, g := range e.Inv.GPUs {
			if rp, ok := g.RootPort(); ok {
				ports = append(ports, fmt.Sprintf("%s: below root port %s", g.Address, rp))
			}
		}
		return []Finding{{
			Severity: Info,
			Title:    "ACS above the GPUs: no switch between the GPUs and their root ports",
			Evidence: capped(ports, 8),
			Remedy:   "ACS acts only inside switches: it has no say in these GPUs' P2P, which crosses the root complex.",
		}}
	}
	if lines := acsRedirect(e, switched); len(lines) > 0 {
		return []Finding{{
			Severity: Info,
			Title:    "ACS above the GPUs: the switch ports redirect P2P up to the root complex",
			Evidence: lines,
			Remedy: "Redirect keeps devices behind a switch in separate IOMMU groups, as VMs need, and sends the host's own GPU-to-GPU " +
				"traffic through the root complex: p2p-topology says what it costs and how to clear it for GPUs that stay on the host.",
		}}
	}
	return []Finding{{
		Severity: Info,
		Title:    "ACS above the GPUs: the switch ports do not redirect P2P",
		Remedy:   "GPUs behind one switch reach each other directly, as P2P on the host wants; the switch's devices then share IOMMU groups.",
	}}
}

func checkFirmwarePCIe(e *Env) []Finding {
	if e.Guest {
		return nil
	}
	cfgs := gpuConfigs(e, "firmware-pcie", "the PCI Express capability's settings are")
	settings := &alike{}
	for _, g := range e.Inv.GPUs {
		cfg, ok := cfgs[g.Address]
		if !ok {
			continue
		}
		if p, ok := cfg.PCIeSettings(); ok {
			settings.add(g.Address.String(), fmt.Sprintf("max payload %d of %d bytes, max read request %d, relaxed ordering %s, 10-bit tags %s, ASPM %s",
				p.MaxPayload, p.MaxPayloadSupported, p.MaxReadRequest, onOff(p.RelaxedOrdering), onOff(p.TenBitTagRequester), p.ASPM))
		}
	}
	evidence := settings.lines()
	if p, err := e.H.ReadString("/sys/module/pcie_aspm/parameters/policy"); err == nil {
		evidence = append(evidence, "the kernel's ASPM policy: "+p)
	}
	if len(evidence) == 0 {
		return nil
	}
	return []Finding{{
		Severity: Info,
		Title:    "PCIe settings of the GPUs' links",
		Evidence: evidence,
		Remedy: "A payload of 256 bytes with relaxed ordering is what GPU DMA runs best with; 10-bit tags must be supported along a " +
			"P2P path; ASPM off on GPU links avoids the latency of leaving low-power states.",
	}}
}

// cpuNodeList returns the NUMA nodes with CPUs, each with its CPU list, in the order
// sysfs lists them: memory-only nodes (CXL) are no NPS split.
func cpuNodeList(e *Env) [][2]string {
	names, err := e.H.ReadDir("/sys/devices/system/node")
	if err != nil {
		return nil
	}
	var out [][2]string
	for _, name := range names {
		if !strings.HasPrefix(name, "node") || strings.Trim(name[4:], "0123456789") != "" || len(name) == 4 {
			continue
		}
		if l, err := e.H.ReadString("/sys/devices/system/node/" + name + "/cpulist"); err == nil && l != "" {
			out = append(out, [2]string{name, l})
		}
	}
	return out
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

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// sizeName writes a size in the largest binary unit that divides it, with what is left
// in MiB: "256 MiB", "128 GiB", "128 GiB + 32 MiB".
func sizeName(n uint64) string {
	switch {
	case n >= 1<<40 && n%(1<<40) == 0:
		return fmt.Sprintf("%d TiB", n>>40)
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%d GiB + %d MiB", n>>30, n%(1<<30)>>20)
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
