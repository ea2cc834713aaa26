package hook

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// vmStart moves the VM's GPUs to vfio-pci before qemu-server prepares them. It runs
// under the driver lock and reads everything it acts on under it.
func (r *run) vmStart(ctx context.Context, lock *bind.Lock) error {
	h := r.c.H
	inv, err := r.inventory()
	if err != nil {
		return err
	}
	m, err := vmlayout.Devices(h, inv.Tree, r.vmid, r.c.Now())
	if err != nil {
		return fmt.Errorf("VM %d start refused: %w", r.vmid, err)
	}
	// An entry with driver=keep asks that its device stay on the driver it is on, as
	// qemu-server leaves it: the hook moves it no more than qemu-server does. A device
	// that would move with another (its slot's GPU, its IOMMU group) is held by that
	// entry (holders.KindKeep), and the start refused.
	var hostDevices []pci.Address
	for _, d := range m.Devices {
		if d.Keep {
			r.logf("%s (%s) has driver=keep: it stays on its driver", d.HostAddress, d.Hostpci)
			continue
		}
		hostDevices = append(hostDevices, d.HostAddress)
	}
	gpus := vmGPUs(inv, hostDevices)
	if len(gpus) == 0 {
		r.logf("passes no GPU gpusplit knows (%d functions): nothing to prepare", len(m.Devices))
		return nil
	}
	// A GPU a stop found broken stays out of every guest until it is released: a VM
	// given it would fail in ways far from the cause.
	recs, err := health.List(h)
	if err != nil {
		return fmt.Errorf("VM %d start refused: the quarantine cannot be read: %w", r.vmid, err)
	}
	for _, rec := range recs {
		if slices.Contains(gpus, rec.GPU) || slices.Contains(gpus, rec.Device) {
			return fmt.Errorf("VM %d start refused: GPU %s is quarantined (%s); check it, then gpusplit hook release %s", r.vmid, rec.GPU, strings.Join(health.Lines(rec.Evidence), "; "), rec.GPU)
		}
	}
	d := plan.Desired{KeepRest: true, Targets: []plan.Target{{Name: fmt.Sprintf("VM %d", r.vmid), Driver: plan.VFIO, Choices: addressChoices(gpus)}}}
	p, err := plan.Make(inv, d)
	if err != nil {
		return fmt.Errorf("VM %d start refused: %w", r.vmid, err)
	}
	if p.Empty() {
		for _, mv := range p.InPlace {
			r.logf("%s already on vfio-pci", mv.Device)
		}
		return nil
	}
	// The kernel first: on a copy of a host (--root, --demo) nothing may happen, least
	// of all to this machine's own services.
	k, err := r.c.Kernel(h)
	if err != nil {
		return fmt.Errorf("VM %d start refused: nothing was changed: %w", r.vmid, err)
	}
	// What an earlier start of this boot moved, the VM killed without its stop: those
	// devices keep the drivers that start found them on.
	earlier, err := r.readJournal()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("VM %d start refused: nothing was changed: %w", r.vmid, err)
	}
	// nvidia-persistenced holds every GPU on nvidia: stopped while they leave, started
	// again on every way out so that the GPUs left on nvidia keep it.
	if fromNvidia(p) {
		active, err := r.c.Services.Active(ctx, Persistenced)
		if err != nil {
			return fmt.Errorf("VM %d start refused: nothing was changed: asking systemd about %s: %w", r.vmid, Persistenced, err)
		}
		if active {
			if err := r.c.Services.Stop(ctx, Persistenced); err != nil {
				r.startPersistenced(ctx) // a stop cut short may have stopped it all the same
				return fmt.Errorf("VM %d start refused: stopping %s: %w", r.vmid, Persistenced, err)
			}
			r.logf("stopped %s while GPUs leave nvidia", Persistenced)
			defer r.startPersistenced(ctx)
			if inv, err = r.inventory(); err != nil {
				return err
			}
			if p, err = plan.Make(inv, d); err != nil {
				return fmt.Errorf("VM %d start refused: %w", r.vmid, err)
			}
		}
	}
	if err := bind.Check(k, p); err != nil {
		return fmt.Errorf("VM %d start refused: %w", r.vmid, bind.ExplainHeld(err))
	}
	res, err := bind.Apply(ctx, lock, k, p, r.options())
	if err != nil {
		if len(res.Unrestored) == 0 {
			r.restoreJournal(earlier)
		}
		return fmt.Errorf("VM %d start refused: %w", r.vmid, bind.ExplainFailure(bind.ExplainHeld(err), res))
	}
	if earlier != nil {
		j := mergeJournals(earlier, res.Journal)
		if err := bind.WriteJournal(h, r.journalPath(), j); err != nil {
			return fmt.Errorf("the GPUs of VM %d are on vfio-pci, but what an earlier start found them on could not be kept for its stop: %w", r.vmid, err)
		}
	}
	return nil
}

// restoreJournal puts back the journal as it was before a start that failed and put
// every device back: an earlier start's, or none.
func (r *run) restoreJournal(earlier *bind.Journal) {
	if earlier == nil {
		r.removeJournal()
		return
	}
	bind.WriteJournal(r.c.H, r.journalPath(), earlier)
}

// mergeJournals keeps what the earlier journal says of each device it has, and adds the
// devices only the later one has.
func mergeJournals(earlier, later *bind.Journal) *bind.Journal {
	j := *later
	j.Devices = slices.Clone(earlier.Devices)
	for _, d := range later.Devices {
		if !slices.ContainsFunc(earlier.Devices, func(e bind.Prior) bool { return e.Device == d.Device }) {
			j.Devices = append(j.Devices, d)
		}
	}
	return &j
}

// vmStop gives the devices the VM's start moved back to the drivers they had. It runs
// under the driver lock and reads the VM's journal under it.
func (r *run) vmStop(ctx context.Context, lock *bind.Lock) error {
	h := r.c.H
	j, err := r.readJournal()
	if errors.Is(err, fs.ErrNotExist) {
		r.logf("its start moved no device: nothing to give back")
		return nil
	}
	if err != nil {
		return err
	}
	inv, err := r.inventory()
	if err != nil {
		return err
	}
	k, err := r.c.Kernel(h)
	if err != nil {
		return fmt.Errorf("nothing was given back: %w", err)
	}
	reserved, err := vmlayout.Reservations(h, r.c.Now())
	if err != nil {
		return err
	}
	// A pool's devices go to the pool's resting driver, the others back to the drivers
	// they had before the start.
	ss, err := r.split(reserved)
	if err != nil {
		return fmt.Errorf("the devices of VM %d stay on vfio-pci: %w", r.vmid, err)
	}
	var todo []bind.Prior
	toPool := &plan.Plan{}
	for _, d := range j.Devices {
		if vm, ok := reserved[d.Device]; ok && vm != r.vmid {
			r.logf("%s stays on vfio-pci: VM %d holds it now", d.Device, vm)
			continue
		}
		if mv, ok := ss.poolMove(d.Device); ok {
			if !mv.Done() {
				toPool.Moves = append(toPool.Moves, mv)
			}
			continue
		}
		if !d.Back(k) {
			todo = append(todo, d)
		}
	}
	// Each GPU about to go back is checked first: one that came back broken stays on
	// vfio-pci, quarantined, with its functions and group.
	todo, q, err := r.checkReturns(j, todo, toPool)
	if err != nil {
		return fmt.Errorf("the devices of VM %d stay on vfio-pci: %w", r.vmid, err)
	}
	if len(todo) == 0 && toPool.Empty() {
		if len(q.gpus) == 0 {
			r.logf("every device of its start is back on its driver")
		}
		if err := r.followMinors(ctx, ss, j, q, nil); err != nil {
			return err
		}
		return r.finish(j, q)
	}
	// Every check before the first write: the journal still true of the host, nothing
	// holding a device, the pool's moves allowed.
	scope := bind.Scope{Movable: bind.Movable(inv)}
	part := *j
	part.Devices = todo
	if len(todo) > 0 {
		if _, err := bind.CheckJournal(h, k, &part, scope); err != nil {
			return fmt.Errorf("the devices of VM %d stay on vfio-pci: %w", r.vmid, err)
		}
		if held := bind.HeldDevices(inv, todo); len(held) > 0 {
			return fmt.Errorf("the devices of VM %d stay on vfio-pci: %w", r.vmid, bind.ExplainHeld(&bind.HeldError{Held: held}))
		}
	}
	if err := bind.Check(k, toPool); err != nil {
		return fmt.Errorf("the devices of VM %d stay on vfio-pci: %w", r.vmid, bind.ExplainHeld(err))
	}
	opts := r.options()
	if len(todo) > 0 {
		res, err := bind.Rollback(ctx, lock, k, &part, scope, nil, opts)
		if err != nil {
			return fmt.Errorf("giving VM %d's devices back: %w", r.vmid, bind.ExplainFailure(err, res))
		}
	}
	if !toPool.Empty() {
		// The pool's moves are not journaled over the VM's own: its journal still says
		// where each device was before the start, should this fail.
		opts.Journal = r.journalPath() + ".pool"
		res, err := bind.Apply(ctx, lock, k, toPool, opts)
		if p, perr := h.OSPath(opts.Journal); perr == nil {
			os.Remove(p)
		}
		if err != nil {
			others := ""
			if len(todo) > 0 {
				others = " (the devices of no pool are back on their drivers)"
			}
			return fmt.Errorf("giving VM %d's devices back to their pool%s: %w", r.vmid, others, bind.ExplainFailure(bind.ExplainHeld(err), res))
		}
	}
	toNvidia := slices.ContainsFunc(todo, func(d bind.Prior) bool { return d.Driver == "nvidia" }) ||
		slices.ContainsFunc(toPool.Moves, func(m plan.Move) bool { return m.To == "nvidia" })
	if toNvidia && r.persistencedInstalled() {
		if active, err := r.c.Services.Active(ctx, Persistenced); err == nil && !active {
			r.startPersistenced(ctx)
		}
	}
	given := map[pci.Address]string{} // the GPUs given back, and to which driver
	for _, d := range todo {
		if d.GPU == d.Device {
			given[d.Device] = d.Driver
		}
	}
	for _, m := range toPool.Moves {
		if m.Role == plan.RoleGPU && m.To != plan.Default {
			given[m.Device] = m.To
		}
	}
	if err := r.followMinors(ctx, ss, j, q, given); err != nil {
		return err
	}
	return r.finish(j, q)
}

// finish ends a stop: the VM's journal goes, but for the devices it kept back with a
// quarantined GPU, which stay in it, so that its stop, run again once the GPU is
// released, gives them back.
func (r *run) finish(j *bind.Journal, q *quarantine) error {
	kept := *j
	kept.Devices = slices.DeleteFunc(slices.Clone(j.Devices), func(d bind.Prior) bool { return !q.keeps(d.Device, d.GPU, d.IOMMUGroup) })
	if len(kept.Devices) == 0 {
		if err := r.removeJournal(); err != nil {
			return err
		}
	} else if err := bind.WriteJournal(r.c.H, r.journalPath(), &kept); err != nil {
		return err
	}
	return q.err(r.vmid)
}

// splitState is split.toml planned on the host as it is, for a hook: nil where the host
// has none.
type splitState struct {
	desired plan.Desired
	pool    map[pci.Address]plan.Move // the pools' devices and where they belong
}

// split plans split.toml with the reservations of the running VMs, this guest's own
// left out: it is stopping, or starting and not yet holding anything.
func (r *run) split(reserved map[pci.Address]int) (*splitState, error) {
	if !r.c.H.Exists(plan.DefaultConfig) {
		return nil, nil
	}
	desired, inv, err := r.c.Split(r.c.H)
	if err != nil {
		return nil, err
	}
	desired.Holding = map[pci.Address]int{}
	for a, vm := range reserved {
		if vm != r.vmid {
			desired.Holding[a] = vm
		}
	}
	p, err := plan.Make(inv, desired)
	if err != nil {
		return nil, err
	}
	ss := &splitState{desired: desired, pool: map[pci.Address]plan.Move{}}
	isPool := map[string]bool{}
	for _, t := range desired.Targets {
		isPool[t.Name] = t.Pool
	}
	for _, m := range append(slices.Clone(p.Moves), p.InPlace...) {
		if isPool[m.Target] {
			ss.pool[m.Device] = m
		}
	}
	return ss, nil
}

// holding is the running VM that holds a device, as split plans it; false for none or
// without split.toml.
func (ss *splitState) holding(a pci.Address) (int, bool) {
	if ss == nil {
		return 0, false
	}
	vm, ok := ss.desired.Holding[a]
	return vm, ok
}

// poolMove is where a pool's device belongs; false for a device of no pool.
func (ss *splitState) poolMove(a pci.Address) (plan.Move, bool) {
	if ss == nil {
		return plan.Move{}, false
	}
	m, ok := ss.pool[a]
	return m, ok
}

// followMinors makes split.toml's containers ready for the GPUs of the journal that came
// back to nvidia: each has its /dev/nvidiaN node, and the containers of their groups and
// pools have devN entries that follow the minors the driver gave, which need not be the
// ones the GPUs had (the driver gives each GPU it binds the lowest free minor), written
// as pve sync writes them.
//
// Before any entry is written, each GPU given back (given) is checked on its driver:
// one the driver did not take, or whose node is missing, is quarantined, and the
// containers of its group or pool are left as they are.
func (r *run) followMinors(ctx context.Context, ss *splitState, j *bind.Journal, q *quarantine, given map[pci.Address]string) error {
	inv, err := r.inventory()
	if err != nil {
		return err
	}
	back := map[pci.Address]bool{}
	for _, d := range j.Devices {
		if m, ok := ss.poolMove(d.Device); ok && m.To == plan.VFIO {
			continue
		}
		if q.keeps(d.Device, d.GPU, d.IOMMUGroup) {
			continue
		}
		if _, held := ss.holding(d.Device); !held {
			back[d.Device] = true
		}
	}
	if err := MakeDeviceNodes(ctx, r.c.H, r.c.Services, inv, back, r.logf); err != nil {
		r.logf("%v", err) // the GPU without its node fails its check below
	}
	if err := r.checkBinds(q, given); err != nil {
		return err
	}
	if ss == nil {
		return nil
	}
	p, err := plan.Make(inv, ss.desired)
	if err != nil {
		return err
	}
	containers := map[string][]int{} // by target
	for _, t := range ss.desired.Targets {
		containers[t.Name] = t.Containers
	}
	target := map[pci.Address]string{}
	for _, m := range append(slices.Clone(p.Moves), p.InPlace...) {
		target[m.Device] = m.Target
	}
	cts := map[int]bool{}
	for _, gp := range inv.GPUs {
		if back[gp.Address] && gp.Driver == "nvidia" && gp.Minor >= 0 {
			for _, ct := range containers[target[gp.Address]] {
				cts[ct] = true
			}
		}
	}
	// A container of a quarantined GPU's group or pool keeps its entries: they would
	// give it a GPU that is broken, or leave it out while its devN entries name it.
	for a := range q.gpus {
		for _, ct := range containers[target[a]] {
			if cts[ct] {
				r.logf("container %d keeps its devN entries: its GPU %s is quarantined", ct, a)
			}
			delete(cts, ct)
		}
	}
	if len(cts) == 0 {
		return nil
	}
	changes, _, err := pve.Sync(r.c.H, inv, p, ss.desired, pve.SyncOptions{})
	if err != nil {
		return fmt.Errorf("the GPUs are back, but the containers' devN entries could not be worked out: %w; run gpusplit pve sync --yes", err)
	}
	var edits []pve.Edit
	for _, c := range changes {
		if c.Guest != nil && c.Guest.Kind == pve.LXC && cts[c.Guest.ID] && c.Old != c.New {
			edits = append(edits, pve.Edit{Path: c.Path, Old: c.Old, New: c.New})
		}
	}
	if len(edits) == 0 {
		r.logf("the containers of its GPUs already pass their device nodes")
		return nil
	}
	w := &pve.Writer{H: r.c.H, Command: fmt.Sprintf("hook %d post-stop", r.vmid)}
	res, err := w.Commit(edits)
	for _, fr := range res {
		r.logf("%s: %s", fr.Path, fr.Outcome)
	}
	if err != nil {
		return fmt.Errorf("the GPUs are back on nvidia, but the containers' devN entries were not changed: %w; run gpusplit pve sync --yes once it can", err)
	}
	return nil
}

// MakeDeviceNodes makes /dev/nvidiaN for each of the GPUs that is on nvidia and lacks
// it: the driver makes no nodes, and pve-container refuses a devN entry whose node is
// missing. A node that cannot be made does not stop the others: the error names each.
func MakeDeviceNodes(ctx context.Context, h *host.Host, svc Services, inv *inventory.Inventory, gpus map[pci.Address]bool, logf func(string, ...any)) error {
	var errs []error
	for _, gp := range inv.GPUs {
		if !gpus[gp.Address] || gp.Driver != "nvidia" {
			continue
		}
		if gp.Minor < 0 {
			logf("%s is on nvidia without a minor number the driver reports: no /dev/nvidiaN made for it", gp.Address)
			continue
		}
		node := minorText(gp.Minor)
		if h.Exists(node) {
			continue
		}
		if err := svc.DeviceNode(ctx, gp.Minor); err != nil {
			errs = append(errs, fmt.Errorf("%s is on nvidia as minor %d, but %s could not be made (%v): run nvidia-modprobe -c %d, or the containers that use it cannot start", gp.Address, gp.Minor, node, err, gp.Minor))
			continue
		}
		logf("%s: made %s", gp.Address, node)
	}
	return errors.Join(errs...)
}

// ctStart checks that a container's GPUs are on nvidia and that no running VM has them:
// pve-container checked its devN nodes already, before this hook runs. It only reads.
func (r *run) ctStart(ctx context.Context) error {
	g, err := pve.ReadGuest(r.c.H, pve.LXC, r.vmid)
	if err != nil {
		return err
	}
	inv, err := r.inventory()
	if err != nil {
		return err
	}
	reserved, err := vmlayout.Reservations(r.c.H, r.c.Now())
	if err != nil {
		return err
	}
	byMinor := map[int]*inventory.GPU{}
	for i := range inv.GPUs {
		if inv.GPUs[i].Minor >= 0 {
			byMinor[inv.GPUs[i].Minor] = &inv.GPUs[i]
		}
	}
	// A container of a pool waits for the VMs that hold the pool's GPUs: its devN
	// entries still name the minors those GPUs had.
	var problems []string
	ss, err := r.split(reserved)
	if err != nil {
		return fmt.Errorf("container %d start refused: %w", r.vmid, err)
	}
	if ss != nil {
		for _, t := range ss.desired.Targets {
			if !t.Pool || !slices.Contains(t.Containers, r.vmid) {
				continue
			}
			for _, a := range slices.SortedFunc(maps.Keys(ss.pool), pci.Address.Compare) {
				if m := ss.pool[a]; m.Target == t.Name && m.Role == plan.RoleGPU && m.HeldBy != 0 {
					problems = append(problems, fmt.Sprintf("pool %s: GPU %s is held by running VM %d; stop it first (qm stop %d)", t.Name, a, m.HeldBy, m.HeldBy))
				}
			}
		}
	}
	waiting := len(problems) > 0
	for _, k := range g.NumberedInOrder("dev") {
		path, _, _ := strings.Cut(k.Value, ",")
		n, ok := strings.CutPrefix(path, "/dev/nvidia")
		minor, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue
		}
		gp := byMinor[minor]
		if gp == nil {
			if !waiting { // else the held GPUs are why
				problems = append(problems, fmt.Sprintf("%s (%s): no GPU on nvidia has minor %d now", k.Name, path, minor))
			}
			continue
		}
		if vm, ok := reserved[gp.Address]; ok {
			problems = append(problems, fmt.Sprintf("%s (%s): GPU %s is held by running VM %d; stop it first (qm stop %d)", k.Name, path, gp.Address, vm, vm))
			continue
		}
		r.logf("%s (%s): GPU %s on nvidia", k.Name, path, gp.Address)
	}
	if len(problems) > 0 {
		return fmt.Errorf("container %d start refused:\n  %s", r.vmid, strings.Join(problems, "\n  "))
	}
	return nil
}

// startPersistenced starts the daemon again, with time of its own: it runs on the way
// out, the deadline perhaps past, and the GPUs left on nvidia need it.
func (r *run) startPersistenced(ctx context.Context) {
	if err := r.c.Services.Start(context.WithoutCancel(ctx), Persistenced); err != nil {
		r.logf("starting %s again failed: %v; run systemctl start %s", Persistenced, err, Persistenced)
		return
	}
	r.logf("started %s again", Persistenced)
}

// persistencedInstalled says whether the host has the daemon's unit at all.
func (r *run) persistencedInstalled() bool {
	for _, d := range []string{"/lib/systemd/system", "/usr/lib/systemd/system", "/etc/systemd/system"} {
		if r.c.H.Exists(d + "/" + Persistenced + ".service") {
			return true
		}
	}
	return false
}
