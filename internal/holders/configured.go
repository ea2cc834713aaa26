package holders

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/proc"
)

// The holders that need no process: what the VMs of this node are configured with,
// running or not (their entries count before the VM starts, since a device rebound from
// under them keeps the VM from starting), and what the device itself has made.
const (
	// KindKeep is a VM entry that passes the device with driver=keep: qemu-server then
	// neither resets it nor binds it to vfio-pci (PVE::QemuServer::PCI,
	// prepare_pci_device), trusting the driver it is on, so gpusplit leaves it there too.
	KindKeep Kind = "driver-keep"
	// KindVirtFns is a physical function whose SR-IOV virtual functions are enabled
	// (sriov_numvfs > 0): taking it from its driver destroys them, with whatever a guest
	// was given of them.
	KindVirtFns Kind = "virtual-functions"
)

// vmEntry is a hostpciN of a VM of this node that names a device.
type vmEntry struct {
	vm      int
	key     string // hostpci0
	mapping string // the mapping it names the device through; "" for host=
	keep    bool   // driver=keep
	running bool
}

func (e vmEntry) String() string {
	s := fmt.Sprintf("VM %d (%s", e.vm, e.key)
	if e.mapping != "" {
		s += ", mapping " + e.mapping
	}
	if e.running {
		s += ", running"
	}
	return s + ")"
}

// configured reads the config of every VM of this node once, and returns their hostpciN
// entries. A config that cannot be read is a warning, as for a running guest.
func (g *guestScan) configured() []configuredVM {
	if g.allVMs != nil {
		return g.allVMs
	}
	g.allVMs = []configuredVM{}
	names, err := g.h.ReadDir(vmConfigDir)
	if err != nil {
		return g.allVMs
	}
	running := map[int]bool{}
	for _, vm := range g.vms {
		running[vm.id] = true
	}
	for _, n := range names {
		id, err := strconv.Atoi(strings.TrimSuffix(n, ".conf"))
		if err != nil || id <= 0 || !strings.HasSuffix(n, ".conf") {
			continue
		}
		keys, ok := g.config("VM", id, vmConfigDir)
		if !ok {
			continue
		}
		vm := configuredVM{id: id, running: running[id]}
		for _, k := range keys {
			if n, isPCI := strings.CutPrefix(k.name, "hostpci"); isPCI && n != "" && strings.Trim(n, "0123456789") == "" {
				vm.hostpci = append(vm.hostpci, k)
			}
		}
		g.allVMs = append(g.allVMs, vm)
	}
	slices.SortFunc(g.allVMs, func(a, b configuredVM) int { return a.id - b.id })
	return g.allVMs
}

// configuredVM is a VM of this node and its hostpciN entries.
type configuredVM struct {
	id      int
	running bool
	hostpci []configKey
}

// entriesNaming are the hostpciN entries of this node's VMs that name a: by host=, or
// through a mapping whose entries of this node hold it (each one a device qemu-server
// may choose at the VM's start).
func (g *guestScan) entriesNaming(a pci.Address) []vmEntry {
	var out []vmEntry
	for _, vm := range g.configured() {
		for _, k := range vm.hostpci {
			opts := propertyString(k.value, "host")
			e := vmEntry{vm: vm.id, key: k.name, keep: opts["driver"] == "keep", running: vm.running}
			named := false
			if host := opts["host"]; host != "" {
				for _, p := range strings.Split(host, ";") {
					named = named || pathHolds(p, a)
				}
			}
			if m := opts["mapping"]; m != "" {
				for _, p := range g.mapping(m) {
					if pathHolds(p, a) {
						named, e.mapping = true, m
					}
				}
			}
			if named {
				out = append(out, e)
			}
		}
	}
	return out
}

// keepHolders are the entries that pass d with driver=keep.
func (g *guestScan) keepHolders(d Device) []Holder {
	var out []Holder
	for _, e := range g.entriesNaming(d.Address) {
		if !e.keep {
			continue
		}
		detail := "driver=keep"
		if e.mapping != "" {
			detail = "mapping " + e.mapping + ", driver=keep"
		}
		out = append(out, Holder{Kind: KindKeep, Process: procVM(e.vm), Name: e.key, Detail: detail,
			Release: fmt.Sprintf("keep %s out of what moves, or drop driver=keep from %s of VM %d (qm set %d --%s …)", d.Address, e.key, e.vm, e.vm, e.key)})
	}
	return out
}

// virtFnHolder is the holder of a physical function with virtual functions enabled,
// naming the VMs given any of them; nil for a device without.
func (g *guestScan) virtFnHolder(d Device) []Holder {
	if len(d.VirtFns) == 0 {
		return nil
	}
	// Each entry once, with the VFs it may get: a mapping's entry names several.
	var entries []vmEntry
	vfsOf := map[vmEntry][]string{}
	for _, vf := range d.VirtFns {
		for _, e := range g.entriesNaming(vf) {
			if _, ok := vfsOf[e]; !ok {
				entries = append(entries, e)
			}
			vfsOf[e] = append(vfsOf[e], vf.String())
		}
	}
	var given []string
	for _, e := range entries {
		given = append(given, fmt.Sprintf("%s with %s", e, strings.Join(vfsOf[e], " or ")))
	}
	h := Holder{Kind: KindVirtFns, Name: fmt.Sprintf("%d SR-IOV virtual functions", len(d.VirtFns)), Detail: strings.Join(given, "; ")}
	h.Release = fmt.Sprintf("disable them (echo 0 > /sys/bus/pci/devices/%s/sriov_numvfs)", d.Address)
	if len(given) > 0 {
		h.Release = "stop the VMs given them and take them out of their configs, then " + h.Release
	}
	return []Holder{h}
}

// procVM is the Process of a holder that is a VM.
func procVM(id int) proc.Process { return proc.Process{VM: id} }
