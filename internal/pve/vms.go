package pve

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/pveprop"
)

// vms computes the new configs of the VMs that use the GPUs' mappings (or that the
// desired state names): the hostpci entries point at the mapping of the vfio-pci side,
// with pcie=1 on a q35 machine and x-vga off for compute GPUs, and guest NUMA nodes are
// bound to the host nodes of the GPUs.
func (s *syncer) vms(d plan.Desired) ([]Change, error) {
	vms, err := s.guests(QEMU)
	if err != nil {
		return nil, err
	}
	explicit := map[int]string{} // VM → the mapping of its group
	for _, t := range d.Targets {
		for _, vm := range t.VMs {
			explicit[vm] = t.Mapping
		}
	}
	var out []Change
	for _, g := range vms {
		c := Change{Path: g.Name, Guest: g, Old: g.String()}
		if !s.syncVM(g, explicit, &c) {
			continue
		}
		c.New = g.String()
		c.Notes = append(c.Notes, guestState(s, g)...)
		out = append(out, c)
	}
	return out, nil
}

// syncVM edits one VM config; it reports whether the VM uses the GPUs at all.
func (s *syncer) syncVM(g *Guest, explicit map[int]string, c *Change) bool {
	wantMapping, isExplicit := explicit[g.ID]
	hostpcis := g.Numbered("hostpci")
	var used []string                 // the mappings the VM ends up using
	moved := map[[2]string][]string{} // (from, to) → the hostpci entries moved
	var pcie, vga []string
	var gpus []pci.Address
	var passed []passedGPU // what each hostpci entry passes, for the address-space plan
	relevant := isExplicit
	q35 := strings.Contains(firstOf(g.Get("machine")), "q35")
	for _, n := range slices.Sorted(maps.Keys(hostpcis)) {
		k := hostpcis[n]
		props := pveprop.Parse(k.Value, "host")
		name := props["mapping"]
		_, known := s.mappingGPUs[name]
		if name == "" {
			// A raw host address of one of the GPUs.
			if a, ok := s.gpuOfPath(withDomain(props["host"])); ok {
				relevant = true
				gpus = append(gpus, a)
				passed = append(passed, passedGPU{entry: k.Name, candidates: []pci.Address{a}})
				if !onVFIO(s.side[a].Driver) {
					c.Notes = append(c.Notes, fmt.Sprintf("VM %d: %s passes %s through by address, but it stays on %s: the VM would take it from the host at its start", g.ID, k.Name, a, s.side[a].Driver))
				}
			}
			continue
		}
		if !known && !(isExplicit && wantMapping != "") {
			continue
		}
		relevant = true
		to := name
		if vm, ok := s.vmMapping[name]; ok {
			to = vm // the host side of a split mapping: the VM moves to its vfio-pci side
		}
		if isExplicit && wantMapping != "" {
			to = wantMapping
		}
		value := k.Value
		if to != name {
			value = pveprop.Set(value, "mapping", to)
			moved[[2]string{name, to}] = append(moved[[2]string{name, to}], k.Name)
		}
		if props["pcie"] != "1" {
			value = pveprop.Set(value, "pcie", "1")
			pcie = append(pcie, k.Name)
		}
		mgpus := s.mappingGPUs[to]
		if props["x-vga"] == "1" && s.compute(mgpus) {
			value = pveprop.Drop(value, "x-vga")
			vga = append(vga, k.Name)
		}
		if value != k.Value {
			g.Set(k.Name, value)
		}
		used = append(used, to)
		gpus = append(gpus, mgpus...)
		passed = append(passed, passedGPU{entry: k.Name, mapping: to, candidates: mgpus})
	}
	if !relevant {
		return false
	}
	for _, ft := range slices.SortedFunc(maps.Keys(moved), func(a, b [2]string) int { return strings.Compare(a[0]+a[1], b[0]+b[1]) }) {
		c.Notes = append(c.Notes, fmt.Sprintf("VM %d: %s now use mapping %s: the GPUs left in %s stay on the host", g.ID, strings.Join(moved[ft], ", "), ft[1], ft[0]))
	}
	if len(pcie) > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("VM %d: %s get pcie=1, so each GPU sits on a PCIe root port as its driver expects", g.ID, strings.Join(pcie, ", ")))
	}
	if len(vga) > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("VM %d: %s lose x-vga=1: compute GPUs are not the VM's display", g.ID, strings.Join(vga, ", ")))
	}
	// No more hostpci entries on a mapping than it has GPUs on this node.
	for _, m := range slices.Compact(slices.Sorted(slices.Values(used))) {
		n := 0
		for _, u := range used {
			if u == m {
				n++
			}
		}
		if have := len(s.mappingGPUs[m]); n > have {
			c.Refusals = append(c.Refusals, fmt.Sprintf("VM %d: %d hostpci entries would use mapping %s, which holds %s on %s: the VM could not start; put the missing GPUs in the mapping, or remove hostpci entries", g.ID, n, m, plural.S(have, "GPU"), s.node))
		}
	}
	if len(used) > 0 && !q35 {
		g.Set("machine", "q35")
		c.Notes = append(c.Notes, fmt.Sprintf("VM %d: machine becomes q35, which pcie=1 needs; the guest sees new hardware at its next start", g.ID))
	}
	s.syncNUMA(g, dedupe(gpus), c)
	s.syncAddressSpace(g, passed, c)
	return true
}

// syncNUMA binds the VM's guest NUMA nodes to the host nodes of its GPUs.
func (s *syncer) syncNUMA(g *Guest, gpus []pci.Address, c *Change) {
	var nodes []int
	for _, a := range gpus {
		if n := s.side[a].GPU.NUMANode; n >= 0 && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	c.Notes = append(c.Notes, BindNUMA(g, nodes)...)
}

// BindNUMA gives a VM numa: 1 and, unless it has numaN entries already, one guest NUMA
// node per host node (ascending), bound to it with the vCPUs and memory shared out
// evenly. It returns what it did, or why it could not.
func BindNUMA(g *Guest, nodes []int) []string {
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	if len(nodes) == 0 {
		return nil
	}
	var notes []string
	if v, _ := g.Get("numa"); v != "1" {
		g.Set("numa", "1")
		notes = append(notes, fmt.Sprintf("VM %d: numa: 1, so the guest's memory and vCPUs can be placed on the GPUs' NUMA nodes", g.ID))
	}
	existing := g.Numbered("numa")
	if len(existing) > 0 {
		var bound []int
		for _, k := range existing {
			for _, h := range strings.Split(pveprop.Parse(k.Value, "")["hostnodes"], ";") {
				if n, err := strconv.Atoi(h); err == nil && !slices.Contains(bound, n) {
					bound = append(bound, n)
				}
			}
		}
		slices.Sort(bound)
		if !slices.Equal(bound, nodes) {
			notes = append(notes, fmt.Sprintf("VM %d: its numaN entries bind host nodes %v, its GPUs are on %v: change hostnodes by hand", g.ID, bound, nodes))
		}
		return notes
	}
	cores, sockets := intOr(g, "cores", 1), intOr(g, "sockets", 1)
	memory, hasMemory := g.Get("memory")
	mem, err := strconv.Atoi(memory)
	if !hasMemory || err != nil {
		return append(notes, fmt.Sprintf("VM %d: no fixed memory size, so no numaN entries were added; bind its guest NUMA nodes to host nodes %v", g.ID, nodes))
	}
	vcpus := cores * sockets
	if vcpus < len(nodes) {
		return append(notes, fmt.Sprintf("VM %d: %s cannot cover the %s of its GPUs", g.ID, plural.S(vcpus, "vCPU"), plural.S(len(nodes), "NUMA node")))
	}
	// One guest node per host node of the GPUs, vCPUs and memory shared out evenly.
	cpu := 0
	for i, n := range nodes {
		nc := vcpus / len(nodes)
		if i < vcpus%len(nodes) {
			nc++
		}
		nm := mem / len(nodes)
		if i == len(nodes)-1 {
			nm = mem - nm*(len(nodes)-1)
		}
		cpus := strconv.Itoa(cpu)
		if nc > 1 {
			cpus = fmt.Sprintf("%d-%d", cpu, cpu+nc-1)
		}
		g.Set(fmt.Sprintf("numa%d", i), fmt.Sprintf("cpus=%s,hostnodes=%d,memory=%d,policy=bind", cpus, n, nm))
		cpu += nc
	}
	return append(notes, fmt.Sprintf("VM %d: guest NUMA nodes bound to host nodes %v, where its GPUs are", g.ID, nodes))
}

// compute reports whether GPUs are compute GPUs (3D controllers, not VGA).
func (s *syncer) compute(gpus []pci.Address) bool {
	for _, a := range gpus {
		if s.side[a].GPU.Class>>8 != 0x0302 {
			return false
		}
	}
	return len(gpus) > 0
}

// guestState notes what limits writing a guest's config: a lock, or the guest running.
func guestState(s *syncer, g *Guest) []string {
	var out []string
	kind := map[string]string{QEMU: "VM", LXC: "container"}[g.Kind]
	if l, ok := g.Locked(); ok {
		out = append(out, fmt.Sprintf("%s %d is locked (lock: %s): sync will not write its config until the lock is gone", kind, g.ID, l))
	}
	if s.running(g) {
		out = append(out, fmt.Sprintf("%s %d is running: it sees the change at its next start", kind, g.ID))
	}
	return out
}

// running tells whether a guest runs.
func (s *syncer) running(g *Guest) bool { return Running(s.h, g.Kind, g.ID) }

// Running tells whether a guest of this node runs, from the files Proxmox keeps for
// running guests: a VM's pid file, a container's cgroup.
func Running(h *host.Host, kind string, id int) bool {
	switch kind {
	case QEMU:
		return h.Exists(fmt.Sprintf("/run/qemu-server/%d.pid", id))
	case LXC:
		return h.Exists(fmt.Sprintf("/sys/fs/cgroup/lxc/%d", id))
	}
	return false
}

func firstOf(v string, _ bool) string { return v }

func intOr(g *Guest, key string, def int) int {
	v, ok := g.Get(key)
	if n, err := strconv.Atoi(v); ok && err == nil {
		return n
	}
	return def
}

func withDomain(p string) string {
	if strings.Count(p, ":") == 1 {
		return "0000:" + p
	}
	return p
}
