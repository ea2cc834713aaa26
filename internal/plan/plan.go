// Package plan turns a desired split (which GPUs go to which driver) and a host's
// inventory into the ordered driver moves that reach it. It is pure: it reads nothing and
// changes nothing, so every rule is tested on fixtures.
//
// The rules: devices move by whole IOMMU groups (every endpoint of a group passed through
// goes to vfio-pci with it; bridges are never rebound); the companion functions of a GPU's
// slot follow the GPU; a plan that would split a group, or pass through a group holding a
// device nobody selected, is refused unless allowed; a side that straddles NUMA nodes is
// warned about; and when everything is in place the plan is empty.
package plan

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Driver names with a meaning of their own in a target.
const (
	VFIO = "vfio-pci"
	// None leaves a device without a driver: driver_override "none" matches no driver.
	None = "none"
	// Default lets the kernel choose: driver_override is cleared and the device probed.
	Default = ""
)

// Target is one group of the desired state: the GPUs its choices select, and the driver
// they must end up on.
type Target struct {
	Name string
	// Input is the command-line input the target comes from ("vfio"), for messages:
	// its errors are *InputErrors. "" for a group of the desired state file.
	Input string
	// Choices add up; each is a comma-separated selector list with the meaning it has in
	// --devices (numa:1,count:2 is two GPUs of node 1). One --vfio flag is one choice.
	Choices [][]pci.Selector
	// Driver is "vfio-pci", "nvidia", None, or any driver name; Default (empty) sends
	// each GPU to its vendor's driver (nvidia, amdgpu) or, for other vendors, to
	// whatever the kernel picks.
	Driver string
	// Proxmox names that later commands keep in step with the split.
	Mapping    string
	Containers []int
	VMs        []int
	// Pool makes Driver the GPUs' resting driver: each GPU that a running VM holds
	// (Desired.Holding) belongs on vfio-pci instead, with its functions and group.
	Pool bool
}

// fail is err of the target: an *InputError for a target of the command line, else
// err with its group of the file.
func (t *Target) fail(err error) error {
	if t.Input != "" {
		return &InputError{Input: t.Input, Err: err}
	}
	return fmt.Errorf("group %q: %w", t.Name, err)
}

// InputError is a command-line input that cannot be used: Input is "vfio" (a choice of
// GPUs) or "config" (the file on this machine, which cannot be read). The command line
// names its flag.
type InputError struct {
	Input string
	Err   error
}

func (e *InputError) Error() string { return e.Input + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Desired is the whole desired state.
type Desired struct {
	Targets []Target
	// KeepRest leaves GPUs that no target selects where they are; otherwise they go to
	// their vendor's driver (the --vfio rule: "the others go to, or stay on, nvidia").
	KeepRest bool
	// AllowSharedGroups lets a group passed through take along devices nobody selected
	// (a NIC sharing the GPU's IOMMU group).
	AllowSharedGroups bool
	// SyncProxmox asks apply to bring Proxmox's files in line once the GPUs moved.
	SyncProxmox bool
	// Persist asks apply to write the boot files that keep the split.
	Persist bool
	// Holding names, by device, the running VM that holds it (qemu-server's
	// reservations): a pool's GPU so held stays on vfio-pci. Empty at boot, which is what
	// persist plans for.
	Holding map[pci.Address]int
}

// Role says why a device is in a plan.
type Role string

// The roles.
const (
	RoleGPU      Role = "gpu"
	RoleFunction Role = "function"     // a companion function of a GPU's slot
	RoleMember   Role = "group member" // another endpoint of a GPU's IOMMU group
)

// Move is one device's way from its driver to its target.
type Move struct {
	Device     pci.Address
	Name       string
	Role       Role
	GPU        pci.Address // the GPU it moves with (itself for a GPU)
	Target     string      // the target's name
	IOMMUGroup int
	NUMANode   int
	From       string // the driver now, "" when unbound
	Override   string // driver_override now
	To         string // the driver to end on; Default: the kernel's choice
	// Holders are what uses the device (processes, mounts, interfaces, guests: see
	// package holders); a move of a held device is refused.
	Holders []holders.Holder
	// HeldBy is the running VM that holds a pool's GPU, for which it is on vfio-pci
	// rather than at rest; 0 otherwise.
	HeldBy int
}

// Done reports whether the device is already where the move would take it.
func (m Move) Done() bool {
	switch m.To {
	case Default:
		return m.Override == "" && m.From != VFIO
	case None:
		return m.From == ""
	}
	return m.From == m.To
}

// Plan is the moves that reach the desired state, in order, and the devices already there.
type Plan struct {
	Moves    []Move // to perform, grouped by IOMMU group, in address order
	InPlace  []Move // already where they belong
	Warnings []string
}

// Empty reports whether nothing has to move.
func (p *Plan) Empty() bool { return len(p.Moves) == 0 }

// Changed says how the host, planned again as now (p), departs from the plan that was
// shown (shown): a device now on another driver, a move the host no longer needs or now
// needs, a holder that appeared. Empty when the shown plan is still the one to carry
// out. A command that planned, asked and then took the lock plans again under it and
// refuses on any of these, since what was confirmed is not what would happen.
func Changed(shown, p *Plan) []string {
	var out []string
	now := map[pci.Address]Move{}
	for _, m := range p.Moves {
		now[m.Device] = m
	}
	was := map[pci.Address]bool{}
	for _, m := range shown.Moves {
		was[m.Device] = true
		n, ok := now[m.Device]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s no longer needs to move (it is on %s now)", m.Device, driverOf(p, m.Device)))
		case n.From != m.From || n.Override != m.Override:
			out = append(out, fmt.Sprintf("%s is on %s now, not on %s", m.Device, onText(n.From), onText(m.From)))
		case n.To != m.To:
			out = append(out, fmt.Sprintf("%s now goes to %s, not to %s", m.Device, DriverText(n.To), DriverText(m.To)))
		case len(n.Holders) > len(m.Holders):
			out = append(out, fmt.Sprintf("%s is held by %s now", m.Device, n.Holders[len(m.Holders)]))
		}
	}
	for _, m := range p.Moves {
		if !was[m.Device] {
			out = append(out, fmt.Sprintf("%s now needs to move too (%s → %s)", m.Device, onText(m.From), DriverText(m.To)))
		}
	}
	return out
}

// driverOf is the driver p found a device on.
func driverOf(p *Plan, a pci.Address) string {
	for _, m := range p.InPlace {
		if m.Device == a {
			return onText(m.From)
		}
	}
	return "a driver outside the plan"
}

// onText names the driver a device is on: "no driver" for none.
func onText(d string) string {
	if d == "" {
		return "no driver"
	}
	return d
}

// Groups returns the moves by IOMMU group, in order: the units that can move concurrently.
func (p *Plan) Groups() [][]Move {
	var out [][]Move
	index := map[string]int{}
	for _, m := range p.Moves {
		key := fmt.Sprint(m.IOMMUGroup)
		if m.IOMMUGroup < 0 {
			key = "gpu " + m.GPU.String() // without an IOMMU, a GPU and its functions
		}
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], m)
	}
	return out
}

// VendorDriver is the driver a GPU goes back to: nvidia for NVIDIA, amdgpu for AMD, and
// the kernel's own choice for other devices.
func VendorDriver(d *pci.Device) string {
	switch d.VendorID {
	case pci.VendorNVIDIA:
		return "nvidia"
	case pci.VendorAMD:
		return "amdgpu"
	}
	return Default
}

// Make computes the plan for inv to reach d.
func Make(inv *inventory.Inventory, d Desired) (*Plan, error) {
	gpus := make([]*pci.Device, 0, len(inv.GPUs))
	byAddr := map[pci.Address]*inventory.GPU{}
	for i := range inv.GPUs {
		gpus = append(gpus, inv.GPUs[i].Device)
		byAddr[inv.GPUs[i].Address] = &inv.GPUs[i]
	}
	if len(gpus) == 0 {
		return nil, &NoGPUsError{Root: inv.Root}
	}

	// Which target each GPU belongs to.
	owner := map[pci.Address]int{}
	for i, t := range d.Targets {
		if len(t.Choices) == 0 {
			return nil, fmt.Errorf("group %q selects no GPUs: give it selectors", t.Name)
		}
		var chosen []*pci.Device
		for _, c := range t.Choices {
			some, err := pci.Choose(gpus, gpus, c, "GPU", "GPU")
			if err != nil {
				return nil, t.fail(notAGPU(inv, err))
			}
			chosen = append(chosen, some...)
		}
		for _, g := range chosen {
			if j, ok := owner[g.Address]; ok && j != i {
				return nil, fmt.Errorf("GPU %s is chosen by both group %q and group %q: a GPU belongs to one group", g.Address, d.Targets[j].Name, t.Name)
			}
			owner[g.Address] = i
		}
	}

	p := &Plan{}
	var all []Move
	placed := map[pci.Address]Move{}
	add := func(m Move) error {
		if prev, ok := placed[m.Device]; ok {
			if prev.To != m.To {
				return fmt.Errorf("%s would go both to %s (with %s) and to %s (with %s)", m.Device, DriverText(prev.To), prev.GPU, DriverText(m.To), m.GPU)
			}
			return nil
		}
		placed[m.Device] = m
		all = append(all, m)
		return nil
	}
	for _, g := range gpus {
		ig := byAddr[g.Address]
		to, target, heldBy := VendorDriver(g), "rest", 0
		if i, ok := owner[g.Address]; ok {
			t := &d.Targets[i]
			target = t.Name
			if t.Driver != Default {
				to = t.Driver
			}
			if vm := d.Holding[g.Address]; t.Pool && vm != 0 {
				to, heldBy = VFIO, vm
			}
		} else if d.KeepRest {
			continue
		}
		gm := move(g, RoleGPU, g.Address, target, to, inv.HoldersOf(g.Address))
		gm.HeldBy = heldBy
		if err := add(gm); err != nil {
			return nil, err
		}
		// Functions follow the GPU: to vfio-pci or none with it, back to the kernel's
		// choice when it returns to the host.
		fto := to
		if to != VFIO && to != None {
			fto = Default
		}
		for _, f := range ig.Functions {
			fm := move(f, RoleFunction, g.Address, target, fto, inv.HoldersOf(f.Address))
			fm.HeldBy = heldBy
			if err := add(fm); err != nil {
				return nil, err
			}
		}
	}

	// Whole IOMMU groups go to vfio-pci: every endpoint of a passed-through group must be
	// on vfio-pci (or unbound) for the group to be usable.
	for _, m := range slices.Clone(all) {
		if m.To != VFIO || m.IOMMUGroup < 0 {
			continue
		}
		for _, member := range inv.Tree.Group(m.IOMMUGroup) {
			if member.IsBridge() {
				continue
			}
			prev, ok := placed[member.Address]
			switch {
			case ok && prev.To != VFIO && prev.To != None:
				return nil, fmt.Errorf("the plan would split IOMMU group %d: %s goes to %s but %s (%s) to %s; "+
					"devices of one group can only be passed through together (select them together, or move the card to another slot)",
					m.IOMMUGroup, m.Device, DriverText(VFIO), member.Address, member.Name(), DriverText(prev.To))
			case ok:
			case !d.AllowSharedGroups:
				return nil, &SharedGroupError{Group: m.IOMMUGroup, GPU: m.GPU, Member: member.Address,
					What: fmt.Sprintf("%s, on %s", member.Name(), DriverText(member.Driver))}
			default:
				mm := move(member, RoleMember, m.GPU, m.Target, VFIO, inv.HoldersOf(member.Address))
				mm.HeldBy = m.HeldBy
				if err := add(mm); err != nil {
					return nil, err
				}
			}
		}
	}

	slices.SortStableFunc(all, func(a, b Move) int {
		if c := a.GPU.Compare(b.GPU); c != 0 {
			return c
		}
		return a.Device.Compare(b.Device)
	})
	for _, m := range all {
		if m.Done() {
			p.InPlace = append(p.InPlace, m)
		} else {
			p.Moves = append(p.Moves, m)
		}
	}
	p.Warnings = numaWarnings(all)
	return p, nil
}

func move(dev *pci.Device, role Role, gpu pci.Address, target, to string, held []holders.Holder) Move {
	return Move{
		Device: dev.Address, Name: dev.Name(), Role: role, GPU: gpu, Target: target,
		IOMMUGroup: dev.IOMMUGroup, NUMANode: dev.NUMANode,
		From: dev.Driver, Override: dev.DriverOverride, To: to, Holders: held,
	}
}

// numaWarnings names the sides whose GPUs sit on more than one NUMA node: traffic between
// them crosses the interconnect, and a VM or container on that side cannot be local to
// all of them.
func numaWarnings(all []Move) []string {
	nodes := map[string]map[int]bool{}
	var sides []string
	for _, m := range all {
		if m.Role != RoleGPU {
			continue
		}
		side := DriverText(m.To)
		if nodes[side] == nil {
			nodes[side] = map[int]bool{}
			sides = append(sides, side)
		}
		nodes[side][m.NUMANode] = true
	}
	var out []string
	for _, side := range sides {
		if len(nodes[side]) < 2 {
			continue
		}
		var ns []string
		for _, n := range slices.Sorted(maps.Keys(nodes[side])) {
			if n < 0 {
				ns = append(ns, "unknown")
			} else {
				ns = append(ns, fmt.Sprint(n))
			}
		}
		out = append(out, fmt.Sprintf("the GPUs going to %s are on NUMA nodes %s: traffic between them crosses the interconnect between sockets", side, strings.Join(ns, ", ")))
	}
	return out
}

// DriverText names a target driver for people.
func DriverText(to string) string {
	switch to {
	case Default:
		return "its default driver"
	case None:
		return "no driver"
	}
	return to
}

// notAGPU is err, a selector that matched no GPU, with what its address names: no
// device, or one of the host that does not count as a GPU (a *NotAGPUError: the user
// meant it, and the choice of what counts is the way to include it).
func notAGPU(inv *inventory.Inventory, err error) error {
	var nm *pci.NoMatchError
	if !errors.As(err, &nm) {
		return err
	}
	a, ok := nm.Selector.Address()
	if !ok {
		return err
	}
	d := inv.Tree.Lookup(a)
	if d == nil {
		return fmt.Errorf("%w; there is no PCI device %s on this host", err, a)
	}
	return &NotAGPUError{Err: err, Device: a,
		What: fmt.Sprintf("%s is %s (class 0x%06x, driver %s), not a GPU", a, d.Name(), d.Class, orNone(d.Driver))}
}

// NotAGPUError is a selector that names a device of the host that does not count as a
// GPU (inventory's selectors choose which do).
type NotAGPUError struct {
	Err    error
	Device pci.Address
	What   string // the device, and that it is not a GPU
}

func (e *NotAGPUError) Error() string { return e.Err.Error() + "; " + e.What }
func (e *NotAGPUError) Unwrap() error { return e.Err }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// GPUDrivers returns the driver each GPU that the plan moves ends on, by address
// (Default for the kernel's choice): what topo's pictures colour a planned split by.
func (p *Plan) GPUDrivers() map[pci.Address]string {
	out := map[pci.Address]string{}
	for _, m := range p.Moves {
		if m.Role == RoleGPU {
			out[m.Device] = m.To
		}
	}
	return out
}

// SharedGroupError is a GPU whose IOMMU group holds a device that no group selects:
// passing the group through would take that device from the host. allow_shared_groups
// allows it.
type SharedGroupError struct {
	Group       int
	GPU, Member pci.Address
	What        string // the member: its name and driver
}

func (e *SharedGroupError) Error() string { return e.Message("") }

// Message is the refusal with the command line's way to allow it (" (--flag)") after the
// file's.
func (e *SharedGroupError) Message(flag string) string {
	return fmt.Sprintf("IOMMU group %d of %s also holds %s (%s), which no group selects; "+
		"passing the group through would take it from the host. Allow it with allow_shared_groups%s, "+
		"or move the GPU to a slot with a group of its own", e.Group, e.GPU, e.Member, e.What, flag)
}

// NoGPUsError is a split of a host where no device counts as a GPU: which devices do is
// the caller's to choose (inventory's selectors).
type NoGPUsError struct{ Root string }

func (e *NoGPUsError) Error() string { return "no GPUs on " + e.Root + ": nothing to split" }
