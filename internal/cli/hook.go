package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// hookDir keeps, per VM, the journal of what its pre-start moved, for its post-stop: a
// binding lasts until the next boot, and so does /run.
const hookDir = "/run/gpusplit/hooks"

// hookLockPath serialises hooks: two guests starting at once take turns, where apply's
// own lock would refuse the second.
const hookLockPath = "/run/gpusplit/hook.lock"

// hookLockWait is how long a hook waits for another: Proxmox gives a hook no time limit,
// but a start that waits minutes is better refused with the reason.
const hookLockWait = 2 * time.Minute

// persistenced is the NVIDIA daemon that holds every GPU it knew at its start and never
// learns of GPUs bound later.
const persistenced = "nvidia-persistenced"

// services starts and stops a systemd unit; tests replace it.
var services = struct {
	running func(h *host.Host, unit string) bool
	stop    func(unit string) error
	start   func(unit string) error
	// deviceNode makes /dev/nvidiaN for a GPU the driver gave minor N: the driver makes
	// no nodes itself, and pve-container refuses a devN entry whose node is missing.
	deviceNode func(minor int) error
}{
	running: func(h *host.Host, unit string) bool { return processRunning(h, unit) },
	stop:    func(unit string) error { return exec.Command("systemctl", "stop", unit).Run() },
	start:   func(unit string) error { return exec.Command("systemctl", "start", unit).Run() },
	deviceNode: func(minor int) error {
		return exec.Command("nvidia-modprobe", "-c", strconv.Itoa(minor)).Run()
	},
}

func newHook(g *globals) *cobra.Command {
	var c changeFlags
	cmd := &cobra.Command{
		Use:   "hook VMID PHASE",
		Short: "The Proxmox hookscript entry point: GPUs follow a VM at its start and stop",
		Long: `Called by Proxmox as a guest's hookscript (hookscript: <storage>:snippets/<file>) with the
guest's id and the phase: pre-start, post-start, pre-stop or post-stop.

For a VM, at pre-start it works out which host devices qemu-server will give the VM (the
mapping's choice, with the other VMs' reservations, as nccl-topo --vm predicts it), checks
every holder as apply does, stops nvidia-persistenced while GPUs leave nvidia, and moves
the GPUs and their IOMMU groups to vfio-pci under apply's lock and journal. A held GPU
refuses the start: the exit status is not 0 and the message, which Proxmox shows in the
task log, names the holder and how to release it. At post-stop it gives the devices back,
unless another running VM now holds them: a pool's (a [[pool]] of split.toml) to the
pool's resting driver, the others to the drivers they had before the start. Then each
GPU back on nvidia gets its /dev/nvidiaN (nvidia-modprobe -c N), and the containers of
its group or pool get devN entries for the minors the driver gave, which can differ
from the ones they had, written under Proxmox's locks as pve sync writes them.

For a container, at pre-start it checks that the GPUs of its devN entries (/dev/nvidiaN)
are on nvidia, that no running VM holds them, and that no running VM holds a GPU of
its pools; it refuses the start otherwise, naming the VM. The other phases do nothing.

Each device gets one line on standard output (the task log) and in the journal. Two
hooks at once take turns. docs/handoff.md explains the phases and their failure modes.`,
		Example: `  gpusplit hook 131 pre-start
  gpusplit hook 131 post-stop`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			vmid, err := strconv.Atoi(args[0])
			if err != nil || vmid < 100 {
				return fmt.Errorf("%q is not a Proxmox guest id (100 and up)", args[0])
			}
			phase := args[1]
			if !slices.Contains([]string{"pre-start", "post-start", "pre-stop", "post-stop"}, phase) {
				return fmt.Errorf("phase %q: Proxmox calls a hookscript with pre-start, post-start, pre-stop or post-stop", phase)
			}
			if phase == "pre-start" || phase == "post-stop" {
				if err := needRoot(g, "hook", "it rebinds PCI devices through /sys"); err != nil {
					return err
				}
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			kind := ""
			switch {
			case h.Exists(pve.GuestPath(pve.QEMU, vmid)):
				kind = pve.QEMU
			case h.Exists(pve.GuestPath(pve.LXC, vmid)):
				kind = pve.LXC
			default:
				return fmt.Errorf("no guest %d on this node: neither %s nor %s exists", vmid, pve.GuestPath(pve.QEMU, vmid), pve.GuestPath(pve.LXC, vmid))
			}
			hk := &hooker{g: g, h: h, vmid: vmid, c: c, doc: hookDoc{Guest: vmid, Kind: map[string]string{pve.QEMU: "vm", pve.LXC: "container"}[kind], Phase: phase, Lines: []string{}}}
			switch {
			case kind == pve.QEMU && phase == "pre-start":
				err = hk.locked(hk.vmStart)
			case kind == pve.QEMU && phase == "post-stop":
				err = hk.locked(hk.vmStop)
			case kind == pve.LXC && phase == "pre-start":
				err = hk.ctStart()
			default:
				hk.say("nothing to do at %s", phase)
			}
			if err == nil && g.json() {
				return g.writeJSON(hk.doc)
			}
			return err
		},
	}
	c.unbindTimeout = 15 * time.Second
	c.parallel = 4
	return cmd
}

// hooker runs one phase of one guest.
type hooker struct {
	g    *globals
	h    *host.Host
	vmid int
	c    changeFlags
	doc  hookDoc
}

// hookDoc is hook -o json (docs/json.md): the guest, its kind, the phase, and the lines
// the hook wrote, one per device.
type hookDoc struct {
	Guest int      `json:"guest"`
	Kind  string   `json:"kind"` // "vm" or "container"
	Phase string   `json:"phase"`
	Lines []string `json:"lines"`
}

// say writes one line to standard output, which Proxmox puts in the task log, and to the
// journal, where the phases run from qmeventd (post-stop after a shutdown from inside the
// guest) are seen.
func (hk *hooker) say(format string, a ...any) {
	line := fmt.Sprintf("gpusplit hook %d: ", hk.vmid) + fmt.Sprintf(format, a...)
	hk.doc.Lines = append(hk.doc.Lines, line)
	if !hk.g.json() {
		fmt.Fprintln(hk.g.stdout, line)
	}
	toJournal(hk.h, line)
}

// locked runs f holding the hook lock.
func (hk *hooker) locked(f func() error) error {
	p, err := hk.h.OSPath(hookLockPath)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	lf, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("hook lock %s: %w", hookLockPath, err)
	}
	defer lf.Close()
	deadline := time.Now().Add(hookLockWait)
	for syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("another guest's hook has held %s for %s; nothing was changed", hookLockPath, hookLockWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	return f()
}

// vmStart moves the VM's GPUs to vfio-pci before qemu-server prepares them.
func (hk *hooker) vmStart() error {
	h := hk.h
	inv, err := hk.inventory()
	if err != nil {
		return err
	}
	m, err := vmlayout.Devices(h, inv.Tree, hk.vmid, time.Now())
	if err != nil {
		return fmt.Errorf("VM %d start refused: %w", hk.vmid, err)
	}
	gpus := vmGPUs(inv, m)
	if len(gpus) == 0 {
		hk.say("passes no GPU gpusplit knows (%d functions): nothing to prepare", len(m.Devices))
		return nil
	}
	d := plan.Desired{KeepRest: true, Targets: []plan.Target{{Name: fmt.Sprintf("VM %d", hk.vmid), Driver: plan.VFIO, Choices: addressChoices(gpus)}}}
	p, err := plan.Make(inv, d)
	if err != nil {
		return fmt.Errorf("VM %d start refused: %w", hk.vmid, err)
	}
	if p.Empty() {
		for _, mv := range p.InPlace {
			hk.say("%s already on vfio-pci", mv.Device)
		}
		return nil
	}
	// The kernel first: on a copy of a host (--root, --demo) nothing may happen, least
	// of all to this machine's own services.
	k, err := openKernel(h)
	if err != nil {
		return fmt.Errorf("VM %d start refused: nothing was changed: %w", hk.vmid, err)
	}
	// nvidia-persistenced holds every GPU on nvidia: stopped while they leave, started
	// again on every way out so that the GPUs left on nvidia keep it.
	if fromNvidia(p) && services.running(h, persistenced) {
		if err := services.stop(persistenced); err != nil {
			return fmt.Errorf("VM %d start refused: stopping %s: %w", hk.vmid, persistenced, err)
		}
		hk.say("stopped %s while GPUs leave nvidia", persistenced)
		defer hk.startPersistenced()
		if inv, err = hk.inventory(); err != nil {
			return err
		}
		if p, err = plan.Make(inv, d); err != nil {
			return fmt.Errorf("VM %d start refused: %w", hk.vmid, err)
		}
	}
	if err := bind.Check(k, p); err != nil {
		return fmt.Errorf("VM %d start refused: %w", hk.vmid, explainHeld(err))
	}
	opts := hk.c.options(hk.g)
	opts.Progress = hk.progress
	res, err := bind.Apply(context.Background(), h, k, p, opts)
	if err != nil {
		return fmt.Errorf("VM %d start refused: %w", hk.vmid, explainFailure(explainHeld(err), res))
	}
	j, err := bind.ReadJournal(h)
	if err != nil {
		return err
	}
	if err := hk.saveJournal(j); err != nil {
		return fmt.Errorf("the GPUs of VM %d are on vfio-pci, but what they were on before could not be kept for its stop: %w", hk.vmid, err)
	}
	return nil
}

// vmStop gives the devices the VM's start moved back to the drivers they had.
func (hk *hooker) vmStop() error {
	h := hk.h
	j, err := hk.readJournal()
	if errors.Is(err, fs.ErrNotExist) {
		hk.say("its start moved no device: nothing to give back")
		return nil
	}
	if err != nil {
		return err
	}
	inv, err := hk.inventory()
	if err != nil {
		return err
	}
	k, err := openKernel(h)
	if err != nil {
		return fmt.Errorf("nothing was given back: %w", err)
	}
	reserved, err := vmlayout.Reservations(h, time.Now())
	if err != nil {
		return err
	}
	// A pool's devices go to the pool's resting driver, the others back to the drivers
	// they had before the start.
	ss, err := hk.split(reserved)
	if err != nil {
		return fmt.Errorf("the devices of VM %d stay on vfio-pci: %w", hk.vmid, err)
	}
	var todo []bind.Prior
	toPool := &plan.Plan{}
	for _, d := range j.Devices {
		if vm, ok := reserved[d.Device]; ok && vm != hk.vmid {
			hk.say("%s stays on vfio-pci: VM %d holds it now", d.Device, vm)
			continue
		}
		if mv, ok := ss.poolMove(d.Device); ok {
			if !mv.Done() {
				toPool.Moves = append(toPool.Moves, mv)
			}
			continue
		}
		drv, _ := k.Driver(d.Device)
		ov, _ := k.Override(d.Device)
		if drv != d.Driver || ov != d.Override {
			todo = append(todo, d)
		}
	}
	if len(todo) == 0 && toPool.Empty() {
		hk.say("every device of its start is back on its driver")
		if err := hk.followMinors(ss, j); err != nil {
			return err
		}
		return hk.removeJournal()
	}
	// Every check before the first write: the journal still true of the host, nothing
	// holding a device, the pool's moves allowed.
	scope := bind.Scope{Movable: movable(inv)}
	if len(todo) > 0 {
		if _, err := bind.CheckJournal(h, k, j, scope); err != nil {
			return fmt.Errorf("the devices of VM %d stay on vfio-pci: %w", hk.vmid, err)
		}
		if held := heldDevices(inv, todo); len(held) > 0 {
			return fmt.Errorf("the devices of VM %d stay on vfio-pci: %w", hk.vmid, explainHeld(&bind.HeldError{Held: held}))
		}
	}
	if err := bind.Check(k, toPool); err != nil {
		return fmt.Errorf("the devices of VM %d stay on vfio-pci: %w", hk.vmid, explainHeld(err))
	}
	opts := hk.c.options(hk.g)
	opts.Progress = hk.progress
	if len(todo) > 0 {
		part := *j
		part.Devices = todo
		res, err := bind.Rollback(context.Background(), h, k, &part, scope, nil, opts)
		if err != nil {
			return fmt.Errorf("giving VM %d's devices back: %w", hk.vmid, explainFailure(err, res))
		}
	}
	if !toPool.Empty() {
		res, err := bind.Apply(context.Background(), h, k, toPool, opts)
		if err != nil {
			others := ""
			if len(todo) > 0 {
				others = " (the devices of no pool are back on their drivers)"
			}
			return fmt.Errorf("giving VM %d's devices back to their pool%s: %w", hk.vmid, others, explainFailure(explainHeld(err), res))
		}
	}
	toNvidia := slices.ContainsFunc(todo, func(d bind.Prior) bool { return d.Driver == "nvidia" }) ||
		slices.ContainsFunc(toPool.Moves, func(m plan.Move) bool { return m.To == "nvidia" })
	if toNvidia && !services.running(h, persistenced) && hk.persistencedInstalled() {
		hk.startPersistenced()
	}
	if err := hk.followMinors(ss, j); err != nil {
		return err
	}
	return hk.removeJournal()
}

// splitState is split.toml planned on the host as it is, for a hook: nil where the host
// has none.
type splitState struct {
	desired plan.Desired
	pool    map[pci.Address]plan.Move // the pools' devices and where they belong
}

// split plans split.toml with the reservations of the running VMs, this guest's own
// left out: it is stopping, or starting and not yet holding anything.
func (hk *hooker) split(reserved map[pci.Address]int) (*splitState, error) {
	if !hk.h.Exists(plan.DefaultConfig) {
		return nil, nil
	}
	var d desiredFlags
	desired, inv, err := d.load(hk.g, hk.h)
	if err != nil {
		return nil, err
	}
	desired.Holding = map[pci.Address]int{}
	for a, vm := range reserved {
		if vm != hk.vmid {
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
func (hk *hooker) followMinors(ss *splitState, j *bind.Journal) error {
	if ss == nil {
		return nil
	}
	inv, err := hk.inventory()
	if err != nil {
		return err
	}
	back := map[pci.Address]bool{}
	for _, d := range j.Devices {
		if m, ok := ss.poolMove(d.Device); ok && m.To == plan.VFIO {
			continue
		}
		if _, ok := ss.desired.Holding[d.Device]; !ok {
			back[d.Device] = true
		}
	}
	p, err := plan.Make(inv, ss.desired)
	if err != nil {
		return err
	}
	if err := makeDeviceNodes(hk.h, inv, back, hk.say); err != nil {
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
	if len(cts) == 0 {
		return nil
	}
	changes, _, err := pve.Sync(hk.h, inv, p, ss.desired, pve.SyncOptions{})
	if err != nil {
		return fmt.Errorf("the GPUs are back, but the containers' devN entries could not be worked out: %w; run gpusplit pve sync --apply", err)
	}
	var edits []pve.Edit
	for _, c := range changes {
		if c.Guest != nil && c.Guest.Kind == pve.LXC && cts[c.Guest.ID] && c.Old != c.New {
			edits = append(edits, pve.Edit{Path: c.Path, Old: c.Old, New: c.New})
		}
	}
	if len(edits) == 0 {
		hk.say("the containers of its GPUs already pass their device nodes")
		return nil
	}
	w := &pve.Writer{H: hk.h, Command: fmt.Sprintf("hook %d post-stop", hk.vmid)}
	res, err := w.Commit(edits)
	for _, r := range res {
		hk.say("%s: %s", r.Path, r.Outcome)
	}
	if err != nil {
		return fmt.Errorf("the GPUs are back on nvidia, but the containers' devN entries were not changed: %w; run gpusplit pve sync --apply once it can", err)
	}
	return nil
}

// makeDeviceNodes makes /dev/nvidiaN for each of the GPUs that is on nvidia and lacks
// it: the driver makes no nodes, and pve-container refuses a devN entry whose node is
// missing.
func makeDeviceNodes(h *host.Host, inv *inventory.Inventory, gpus map[pci.Address]bool, say func(string, ...any)) error {
	for _, gp := range inv.GPUs {
		if !gpus[gp.Address] || gp.Driver != "nvidia" {
			continue
		}
		if gp.Minor < 0 {
			say("%s is on nvidia without a minor number the driver reports: no /dev/nvidiaN made for it", gp.Address)
			continue
		}
		node := fmt.Sprintf("/dev/nvidia%d", gp.Minor)
		if h.Exists(node) {
			continue
		}
		if err := services.deviceNode(gp.Minor); err != nil {
			return fmt.Errorf("%s is on nvidia as minor %d, but %s could not be made (%v): run nvidia-modprobe -c %d, or the containers that use it cannot start", gp.Address, gp.Minor, node, err, gp.Minor)
		}
		say("%s: made %s", gp.Address, node)
	}
	return nil
}

// ctStart checks that a container's GPUs are on nvidia and that no running VM has them:
// pve-container checked its devN nodes already, before this hook runs.
func (hk *hooker) ctStart() error {
	g, err := pve.ReadGuest(hk.h, pve.LXC, hk.vmid)
	if err != nil {
		return err
	}
	inv, err := hk.inventory()
	if err != nil {
		return err
	}
	reserved, err := vmlayout.Reservations(hk.h, time.Now())
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
	ss, err := hk.split(reserved)
	if err != nil {
		return fmt.Errorf("container %d start refused: %w", hk.vmid, err)
	}
	if ss != nil {
		for _, t := range ss.desired.Targets {
			if !t.Pool || !slices.Contains(t.Containers, hk.vmid) {
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
		hk.say("%s (%s): GPU %s on nvidia", k.Name, path, gp.Address)
	}
	if len(problems) > 0 {
		return fmt.Errorf("container %d start refused:\n  %s", hk.vmid, strings.Join(problems, "\n  "))
	}
	return nil
}

func (hk *hooker) inventory() (*inventory.Inventory, error) {
	sels, err := hk.g.selectors()
	if err != nil {
		return nil, err
	}
	return inventory.Build(hk.h, sels)
}

func (hk *hooker) progress(e bind.Event) {
	switch e.Step {
	case bind.StepDone:
		hk.say("%s  %s → %s  ok (%.2f s)", e.Device, orNone(e.From), toText(e.To), e.Elapsed.Seconds())
	case bind.StepFailed:
		hk.say("%s  %s → %s  FAILED: %v", e.Device, orNone(e.From), toText(e.To), e.Err)
	case bind.StepRestored:
		hk.say("%s  restored to %s", e.Device, orNone(e.To))
	}
}

func (hk *hooker) startPersistenced() {
	if err := services.start(persistenced); err != nil {
		hk.say("starting %s again failed: %v; run systemctl start %s", persistenced, err, persistenced)
		return
	}
	hk.say("started %s again", persistenced)
}

// persistencedInstalled says whether the host has the daemon's unit at all.
func (hk *hooker) persistencedInstalled() bool {
	for _, d := range []string{"/lib/systemd/system", "/usr/lib/systemd/system", "/etc/systemd/system"} {
		if hk.h.Exists(d + "/" + persistenced + ".service") {
			return true
		}
	}
	return false
}

func (hk *hooker) journalPath() (string, error) {
	return hk.h.OSPath(fmt.Sprintf("%s/vm-%d.json", hookDir, hk.vmid))
}

func (hk *hooker) saveJournal(j *bind.Journal) error {
	p, err := hk.journalPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(p, append(b, '\n'), 0o600)
}

func (hk *hooker) readJournal() (*bind.Journal, error) {
	b, err := hk.h.ReadFile(fmt.Sprintf("%s/vm-%d.json", hookDir, hk.vmid))
	if err != nil {
		return nil, err
	}
	var j bind.Journal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("%s/vm-%d.json is damaged (%v): give the devices back with gpusplit apply", hookDir, hk.vmid, err)
	}
	return &j, nil
}

func (hk *hooker) removeJournal() error {
	p, err := hk.journalPath()
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// vmGPUs are the VM's host devices that are GPUs of the inventory (function 0 of their
// slot): the plan moves their functions and IOMMU groups with them.
func vmGPUs(inv *inventory.Inventory, m *vmlayout.Manifest) []pci.Address {
	var out []pci.Address
	for _, d := range m.Devices {
		for _, gp := range inv.GPUs {
			if gp.Address == d.HostAddress && !slices.Contains(out, d.HostAddress) {
				out = append(out, d.HostAddress)
			}
		}
	}
	return out
}

// addressChoices selects each address as a choice of its own.
func addressChoices(addrs []pci.Address) [][]pci.Selector {
	var out [][]pci.Selector
	for _, a := range addrs {
		sels, err := pci.ParseSelectors(a.String())
		if err == nil {
			out = append(out, sels)
		}
	}
	return out
}

func fromNvidia(p *plan.Plan) bool {
	return slices.ContainsFunc(p.Moves, func(m plan.Move) bool { return m.From == "nvidia" })
}

// processRunning says whether a process of that name runs (its comm, which the kernel
// cuts at 15 characters).
func processRunning(h *host.Host, name string) bool {
	pids, err := h.ReadDir("/proc")
	if err != nil {
		return false
	}
	comm := name[:min(len(name), 15)]
	for _, pid := range pids {
		if strings.Trim(pid, "0123456789") != "" {
			continue
		}
		if c, err := h.ReadString("/proc/" + pid + "/comm"); err == nil && c == comm {
			return true
		}
	}
	return false
}

// toJournal sends a line to the systemd journal through its native socket, when the host
// has one; a hook must not fail for want of a journal.
func toJournal(h *host.Host, line string) {
	if h.Root() != "/" {
		return
	}
	c, err := net.Dial("unixgram", "/run/systemd/journal/socket")
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "SYSLOG_IDENTIFIER=gpusplit\nPRIORITY=6\nMESSAGE=%s\n", strings.ReplaceAll(line, "\n", " "))
}
