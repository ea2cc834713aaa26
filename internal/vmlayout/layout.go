package vmlayout

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/pveprop"
)

// IDPrefix starts the id of every QEMU device gpusplit adds to a VM's args, so that a
// later run finds and replaces them.
const IDPrefix = "gpusplit-"

// ownDevice matches one of gpusplit's -device options in an args line.
var ownDevice = lazyre.New(`\s*-device\s+[^\s]*\bid=` + IDPrefix + `[^\s]*`)

// HasLayout says whether a VM's args hold gpusplit's devices.
func HasLayout(g *pve.Guest) bool {
	args, _ := g.Get("args")
	return ownDevice.MatchString(args)
}

// Layout is the NUMA-true PCIe layout given to a VM.
type Layout struct {
	Bridges []Bridge `json:"bridges"`
	// Args is gpusplit's part of the VM's args line.
	Args string `json:"args"`
	// Removed are the hostpciN entries whose devices moved into Args.
	Removed []string `json:"removed"`
	Notes   []string `json:"notes"`
}

// Bridge is a pxb-pcie expander bridge standing for one host bridge of the host.
type Bridge struct {
	ID         string         `json:"id"`
	HostBridge pci.HostBridge `json:"host_bridge"`
	HostNUMA   int            `json:"host_numa"`
	GuestNUMA  int            `json:"guest_numa"`
	BusNr      int            `json:"bus_nr"`
	Slot       int            `json:"slot"` // on pcie.0
	Hostpci    []string       `json:"hostpci"`
}

// pxbSlots are slots of pcie.0 that qemu-server leaves free on a q35 machine (it puts its
// own devices on the PCI bridges behind 1e.0): not 01 (the display), 10 and 11 (its extra
// root ports), 14 (ivshmem), 1a–1f (the ICH9 functions and its first root ports).
var pxbSlots = []int{0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x12, 0x13, 0x15, 0x16, 0x17, 0x18, 0x19}

// freeSlots are the pxbSlots this VM leaves free. With machine: q35,viommu=virtio
// qemu-server adds -device virtio-iommu-pci without an address, before the args, so QEMU
// gives it the lowest free slot of pcie.0: 02 behind the display at 01, or 01 itself
// when the VM has no display (vga: none or a serial terminal).
func freeSlots(g *pve.Guest) []int {
	machine, _ := g.Get("machine")
	if pveprop.Parse(machine, "type")["viommu"] != "virtio" {
		return pxbSlots
	}
	vga, _ := g.Get("vga")
	if t := pveprop.Parse(vga, "type")["type"]; t == "none" || strings.HasPrefix(t, "serial") {
		return pxbSlots // it takes 01, which no expander bridge uses
	}
	return slices.DeleteFunc(slices.Clone(pxbSlots), func(s int) bool { return s == 0x02 })
}

// firstBus is the lowest bus number of the expander bridges; the buses of pcie.0's own
// hierarchy (its root ports and PCI bridges) stay below it.
const firstBus = 0x80

// passOpts are hostpci options carried over to the vfio-pci device, with QEMU's names,
// in the order of the hostpci names, which is the order they are written in.
var passOpts = []struct{ hostpci, qemu string }{
	{"device-id", "x-pci-device-id"},
	{"rombar", "rombar"},
	{"sub-device-id", "x-pci-sub-device-id"},
	{"sub-vendor-id", "x-pci-sub-vendor-id"},
	{"vendor-id", "x-pci-vendor-id"},
}

// Apply moves a VM's GPUs from its hostpciN entries into an args line that recreates the
// host's layout in the guest: a pxb-pcie expander bridge per host bridge holding GPUs,
// with the guest NUMA node bound to that host bridge's NUMA node, a PCIe root port per
// GPU behind it, and the GPU's functions on vfio-pci there. A VM that has the layout
// already is refused. The VM gets numa: 1 and one
// guest node per host node (pve.BindNUMA) unless its numaN entries already bind them.
// m is the VM's manifest (Predict), t the host's PCI tree. Other hostpci entries stay.
// On an error g is left as it was.
func Apply(g *pve.Guest, t *pci.Tree, m *Manifest) (*Layout, error) {
	work, err := pve.ParseGuest(g.Name, g.Kind, g.ID, g.String())
	if err != nil {
		return nil, err
	}
	l, err := apply(work, t, m)
	if err != nil {
		return nil, err
	}
	*g = *work
	return l, nil
}

func apply(g *pve.Guest, t *pci.Tree, m *Manifest) (*Layout, error) {
	if HasLayout(g) {
		// Laying out the new entries alone would drop the GPUs already in args.
		return nil, fmt.Errorf("VM %d has gpusplit's layout in its args and GPUs in hostpci entries too: undo the layout first (the backup in %s, or remove the %s devices from args and give the GPUs hostpci entries), then lay out all of them", g.ID, pve.BackupDir, IDPrefix)
	}
	if m.Machine != "q35" {
		return nil, fmt.Errorf("VM %d is an i440fx machine: expander bridges (pxb-pcie) need machine: q35", g.ID)
	}
	if ostype, _ := g.Get("ostype"); ostype == "win7" {
		return nil, fmt.Errorf("VM %d has ostype win7, whose devices qemu-server puts on slots of pcie.0 the layout needs", g.ID)
	}
	// The entries holding a GPU, in hostpci order, with their functions.
	type entry struct {
		key   string
		funcs []Device
	}
	var entries []*entry
	for _, d := range m.Devices {
		if len(entries) == 0 || entries[len(entries)-1].key != d.Hostpci {
			entries = append(entries, &entry{key: d.Hostpci})
		}
		e := entries[len(entries)-1]
		e.funcs = append(e.funcs, d)
	}
	entries = slices.DeleteFunc(entries, func(e *entry) bool {
		return !slices.ContainsFunc(e.funcs, Device.IsGPU)
	})
	if len(entries) == 0 {
		return nil, fmt.Errorf("VM %d passes through no GPU by hostpci: nothing to lay out", g.ID)
	}
	l := &Layout{Bridges: []Bridge{}, Removed: []string{}, Notes: []string{}}
	byBridge := map[pci.HostBridge][]*entry{}
	var nodes []int
	var mapped, elsewhere []string
	for _, e := range entries {
		v, _ := g.Get(e.key)
		opts := pveprop.Parse(v, "host")
		if opts["x-vga"] == "1" {
			return nil, fmt.Errorf("%s has x-vga=1: a GPU that is the VM's display stays where qemu-server puts it; remove x-vga or leave this VM's layout alone", e.key)
		}
		gpu := e.funcs[slices.IndexFunc(e.funcs, Device.IsGPU)]
		if gpu.VGPU != "" {
			return nil, fmt.Errorf("%s is an NVIDIA vGPU (mdev=%s): qemu-server sets the VF's vGPU type when the VM starts, which a device in args would skip; leave this VM's layout alone, or use nccl-topo's topology file", e.key, gpu.VGPU)
		}
		if gpu.HostNUMA < 0 {
			return nil, fmt.Errorf("%s: the host does not say which NUMA node %s is on (numa_node -1, see gpusplit doctor's numa-unknown): there is no node to place it on", e.key, gpu.HostAddress)
		}
		d := t.Lookup(gpu.HostAddress)
		if d == nil {
			return nil, fmt.Errorf("%s: no PCI device %s on this host", e.key, gpu.HostAddress)
		}
		for _, f := range e.funcs {
			if fd := t.Lookup(f.HostAddress); fd != nil && fd.Driver != "vfio-pci" {
				elsewhere = append(elsewhere, fmt.Sprintf("%s (%s)", f.HostAddress, cmp.Or(fd.Driver, "no driver")))
			}
		}
		byBridge[d.HostBridge] = append(byBridge[d.HostBridge], e)
		if !slices.Contains(nodes, gpu.HostNUMA) {
			nodes = append(nodes, gpu.HostNUMA)
		}
		if opts["mapping"] != "" {
			mapped = append(mapped, e.key)
		}
	}
	l.Notes = append(l.Notes, pve.BindNUMA(g, nodes)...)
	guestNode := map[int]int{}
	for n, k := range g.Numbered("numa") {
		if h, err := strconv.Atoi(pveprop.Parse(k.Value, "")["hostnodes"]); err == nil {
			guestNode[h] = n
		}
	}
	for _, n := range nodes {
		if _, ok := guestNode[n]; !ok {
			return nil, fmt.Errorf("VM %d has no guest NUMA node bound to host node %d alone, which its expander bridge needs (%s)", g.ID, n, strings.Join(l.Notes, "; "))
		}
	}

	bridges := slices.Collect(maps.Keys(byBridge))
	slices.SortFunc(bridges, func(a, b pci.HostBridge) int {
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.Bus, b.Bus))
	})
	slots := freeSlots(g)
	if len(bridges) > len(slots) {
		return nil, fmt.Errorf("the GPUs sit under %d host bridges; this q35 machine has %d free slots for expander bridges", len(bridges), len(slots))
	}
	step := (0x100 - firstBus) / len(bridges)
	var devs []string
	for k, hb := range bridges {
		es := byBridge[hb]
		if len(es)+1 > step {
			return nil, fmt.Errorf("%d GPUs under host bridge %s need %d bus numbers; only %d are free for it", len(es), hb, len(es)+1, step)
		}
		numa := es[0].funcs[0].HostNUMA
		for _, f := range es[0].funcs {
			if f.IsGPU() {
				numa = f.HostNUMA
			}
		}
		b := Bridge{
			ID:         fmt.Sprintf("%spxb%d", IDPrefix, k),
			HostBridge: hb,
			HostNUMA:   numa,
			GuestNUMA:  guestNode[numa],
			BusNr:      firstBus + k*step,
			Slot:       slots[k],
		}
		devs = append(devs, fmt.Sprintf("-device pxb-pcie,id=%s,bus_nr=%d,numa_node=%d,bus=pcie.0,addr=0x%x", b.ID, b.BusNr, b.GuestNUMA, b.Slot))
		for j, e := range es {
			n := strings.TrimPrefix(e.key, "hostpci")
			port := fmt.Sprintf("%srp%s", IDPrefix, n)
			// chassis numbers above qemu-server's (1–16 for its root ports, 1–4 for its
			// PCI bridges), so that no chassis/slot pair repeats.
			idx, _ := strconv.Atoi(n)
			// Each port its own port number too, as qemu-server numbers its own (port=N):
			// the guest's PCIe link capabilities then tell the ports apart.
			devs = append(devs, fmt.Sprintf("-device pcie-root-port,id=%s,bus=%s,addr=0x%x,port=%d,chassis=%d,slot=0", port, b.ID, j, 0x80+idx, 0x80+idx))
			v, _ := g.Get(e.key)
			opts := pveprop.Parse(v, "host")
			for fi, f := range e.funcs {
				dev := fmt.Sprintf("-device vfio-pci,host=%s,id=%shostpci%s", f.HostAddress, IDPrefix, n)
				if len(e.funcs) > 1 {
					dev += fmt.Sprintf(".%d,bus=%s,addr=0x0.%d", fi, port, fi)
				} else {
					dev += fmt.Sprintf(",bus=%s,addr=0x0", port)
				}
				if fi == 0 {
					if len(e.funcs) > 1 {
						dev += ",multifunction=on"
					}
					for _, o := range passOpts {
						if v := opts[o.hostpci]; v != "" {
							dev += "," + o.qemu + "=" + v
						}
					}
					if rf := opts["romfile"]; rf != "" {
						dev += ",romfile=/usr/share/kvm/" + rf
					}
				}
				devs = append(devs, dev)
			}
			b.Hostpci = append(b.Hostpci, e.key)
			l.Removed = append(l.Removed, e.key)
		}
		l.Bridges = append(l.Bridges, b)
	}
	l.Args = strings.Join(devs, " ")
	args, _ := g.Get("args")
	args = strings.TrimSpace(ownDevice.ReplaceAllString(args, ""))
	if args != "" {
		args += " "
	}
	g.Set("args", args+l.Args)
	for _, k := range l.Removed {
		g.Delete(k)
	}
	slices.Sort(l.Removed)
	l.Notes = append(l.Notes, fmt.Sprintf("VM %d: %s leave qemu-server's layout for %d expander bridges on host NUMA nodes %v", g.ID, strings.Join(l.Removed, ", "), len(l.Bridges), sorted(nodes)))
	if len(mapped) > 0 {
		l.Notes = append(l.Notes, fmt.Sprintf("VM %d: %s used a mapping; the args name the devices it gives now by address, and Proxmox no longer reserves them or binds them to vfio-pci at start", g.ID, strings.Join(mapped, ", ")))
	}
	if len(elsewhere) > 0 {
		l.Notes = append(l.Notes, fmt.Sprintf("%s not on vfio-pci: the VM cannot start until they are, since Proxmox does not bind devices given in args (gpusplit apply, then persist)", strings.Join(elsewhere, ", ")))
	}
	return l, nil
}

func sorted(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
