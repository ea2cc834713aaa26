package vmlayout

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/cpuset"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/nccl"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Pair is a manifest device and the guest function found at its place.
type Pair struct {
	Want  Device
	Guest *pci.Device
}

// GuestPath returns where a guest function sits, in the manifest's form ("1c.0/00.0"):
// the device.function of each hop from the root bus 0000:00. Functions under another
// host bridge (an expander bridge, another domain) have none: qemu-server puts nothing
// there.
func GuestPath(d *pci.Device) (string, bool) {
	comps := strings.Split(strings.Trim(d.Path, "/"), "/")
	at := slices.Index(comps, "pci0000:00")
	if at < 0 {
		return "", false
	}
	var hops []string
	for _, c := range comps[at+1:] {
		a, err := pci.ParseAddress(c)
		if err != nil {
			return "", false
		}
		hops = append(hops, fmt.Sprintf("%02x.%x", a.Device, a.Function))
	}
	return strings.Join(hops, "/"), len(hops) > 0
}

// Match finds each device of the manifest in the guest, by its path from the root bus
// and its vendor and device ids, and checks that every GPU of the guest is in the
// manifest. A mismatch is an error listing every difference: the manifest is then for
// another VM, or the VM's configuration changed since it was written.
func Match(m *Manifest, t *pci.Tree, gpus []*pci.Device) ([]Pair, error) {
	byPath := map[string]*pci.Device{}
	for _, d := range t.Devices {
		if p, ok := GuestPath(d); ok {
			byPath[p] = d
		}
	}
	var pairs []Pair
	var problems []string
	listed := map[pci.Address]bool{}
	for _, want := range m.Devices {
		id := want.Vendor + ":" + want.Device
		got := byPath[want.GuestPath]
		switch {
		case got == nil:
			problems = append(problems, fmt.Sprintf("%s (%s, host %s) should be at %s, where this guest has no device", want.Hostpci, id, want.HostAddress, want.GuestPath))
		case got.ID() != id:
			problems = append(problems, fmt.Sprintf("%s (%s, host %s) should be at %s, where this guest has %s (%s)", want.Hostpci, id, want.HostAddress, want.GuestPath, got.ID(), got.Address))
		default:
			pairs = append(pairs, Pair{want, got})
			listed[got.Address] = true
		}
	}
	for _, g := range gpus {
		if !listed[g.Address] {
			where, _ := GuestPath(g)
			problems = append(problems, fmt.Sprintf("this guest's GPU %s (%s) at %s is not in the manifest", g.Address, g.ID(), where))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("the manifest of VM %d (node %s) does not match this guest:\n  - %s\nIf this is VM %d, its devices changed since the manifest was written: write it again on the host with gpusplit nccl-topo --vm %d",
			m.VMID, m.Node, strings.Join(problems, "\n  - "), m.VMID, m.VMID)
	}
	return pairs, nil
}

// GuestTopology writes the NCCL topology of a guest from the matched manifest: a <cpu>
// per host NUMA node of the GPUs and NICs, numbered as the guest node bound to that
// host node (numaN: hostnodes=) and with that guest node's CPUs, the guest's bus ids
// under it, and each device's host link. The notes say where the guest's NUMA nodes do
// not follow the host's.
func GuestTopology(h *host.Host, m *Manifest, pairs []Pair) (*nccl.Node, []string) {
	cpu := nccl.ReadCPU(h)
	sys := nccl.Elem("system", "version", nccl.Version)
	var notes []string
	byNode := map[int][]Pair{}
	var hostNodes []int
	for _, p := range pairs {
		if !p.Want.IsGPU() && !p.Want.IsNIC() {
			continue // HDMI audio and the like: NCCL has no use for them
		}
		if _, ok := byNode[p.Want.HostNUMA]; !ok {
			hostNodes = append(hostNodes, p.Want.HostNUMA)
		}
		byNode[p.Want.HostNUMA] = append(byNode[p.Want.HostNUMA], p)
	}
	slices.Sort(hostNodes)
	// Guest node numbers first, for the host nodes bound to one; the others keep the
	// host's number where it is free.
	ids := map[int]int{}
	taken := map[int]bool{}
	for _, hn := range hostNodes {
		if gn, ok := m.GuestNode(hn); ok && h.Exists(fmt.Sprintf("/sys/devices/system/node/node%d", gn.Guest)) {
			ids[hn] = gn.Guest
			taken[gn.Guest] = true
		}
	}
	all := onlineMask(h)
	for _, hn := range hostNodes {
		if _, ok := ids[hn]; ok || hn < 0 {
			continue
		}
		id := hn
		for taken[id] {
			id++
		}
		ids[hn], taken[id] = id, true
		if len(hostNodes) > 1 {
			notes = append(notes, fmt.Sprintf("host NUMA node %d has no guest node bound to it (numaN: hostnodes=%d): its GPUs are grouped as node %d with all of the guest's CPUs", hn, hn, id))
		}
	}
	var cpus []*nccl.Node
	for _, hn := range hostNodes {
		id, aff := -1, ""
		if hn >= 0 {
			id = ids[hn]
			aff = all
			if gn, ok := m.GuestNode(hn); ok && gn.Guest == id {
				if s, err := h.ReadString(fmt.Sprintf("/sys/devices/system/node/node%d/cpumap", id)); err == nil {
					aff = s
				}
			}
		}
		c := cpu.Node(id, aff)
		for _, p := range byNode[hn] {
			nccl.Insert(c, nccl.PCI(nccl.BusID(p.Guest.Address), p.Guest, p.Want.LinkSpeed, p.Want.LinkWidth))
		}
		cpus = append(cpus, c)
	}
	slices.SortFunc(cpus, func(a, b *nccl.Node) int {
		x, _ := a.Get("numaid")
		y, _ := b.Get("numaid")
		i, _ := strconv.Atoi(x)
		j, _ := strconv.Atoi(y)
		return i - j
	})
	sys.Children = cpus
	return sys, notes
}

// onlineMask is the cpumap of every online CPU of the guest, "" when unknown.
func onlineMask(h *host.Host) string {
	online, err1 := h.ReadString("/sys/devices/system/cpu/online")
	possible, err2 := h.ReadString("/sys/devices/system/cpu/possible")
	if err1 != nil || err2 != nil {
		return ""
	}
	on, err1 := cpuset.Parse(online)
	pos, err2 := cpuset.Parse(possible)
	if err1 != nil || err2 != nil || pos.Len() == 0 {
		return ""
	}
	cs := pos.CPUs()
	return on.Mask(cs[len(cs)-1] + 1)
}
