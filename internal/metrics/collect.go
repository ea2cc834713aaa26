// Package metrics tells a host's monitoring what gpusplit knows and no exporter does:
// which GPU is on which driver, held by what, and where the desired split wants it;
// each GPU's link and AER counters; the drift of each part of the split; what the
// doctor found; each guest's last hand-off; the quarantine. It writes Prometheus's text
// exposition format itself (WriteText), for node_exporter's textfile collector
// (WriteTextfile) or for any scraper, with the standard library alone.
//
// Collection reads through host.Host, so every read is bounded and the metrics of a
// snapshot or of the sample host are those of the host it was taken from. It needs no
// root: what only root may read (other users' processes, the quarantine and hand-off
// records, the kernel log) is left out and counted (gpusplit_collect_left_out), and a
// part that fails is counted too (gpusplit_collect_errors), so that a collection always
// has something to say, if only that it could not see.
package metrics

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"strconv"
	"time"

	"github.com/gpusplit/gpusplit/internal/doctor"
	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/split"
)

// Options say what to collect and how.
type Options struct {
	// Selectors choose the devices that count as GPUs (--devices); nil for the default
	// rule, or split.toml's devices when the host has the file.
	Selectors []pci.Selector
	// Split loads the desired state and the inventory it was checked against, as
	// status loads them; it is called only where the host has split.toml. nil leaves
	// the split out.
	Split func(*host.Host) (plan.Desired, *inventory.Inventory, error)
	// Version is gpusplit's version, for gpusplit_build_info.
	Version string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// The parts of a collection, each with its count of errors and of what it left out.
const (
	partGPUs       = "gpus"       // the inventory: GPUs, drivers, links
	partHolders    = "holders"    // who holds each GPU
	partAER        = "aer"        // the AER counters
	partSplit      = "split"      // the desired state and the drift of its parts
	partQuarantine = "quarantine" // the quarantine records
	partHandOffs   = "handoffs"   // the hooks' hand-off records
	partDoctor     = "doctor"     // the doctor's checks
)

var parts = []string{partGPUs, partHolders, partAER, partSplit, partQuarantine, partHandOffs, partDoctor}

// collector is one collection under way.
type collector struct {
	h   *host.Host
	o   Options
	set *Set
	// errs and leftOut count, by part, what failed and what only root may read.
	errs, leftOut map[string]int

	gpuInfo, driver, inPlace, holder         *Family
	speed, maxSpeed, width, maxWidth, aer    *Family
	configured, inSync, drift                *Family
	quarantined, quarantineInfo, quarantineT *Family
	lastInfo, lastOK, lastSeconds, lastT     *Family
	handoffs                                 *Family
	findings                                 *Family
}

// Collect reads the host and returns its metrics. It does not fail: a part that cannot
// be read is counted (gpusplit_collect_errors, gpusplit_collect_left_out) and said in
// the set's warnings, and the others are collected all the same.
func Collect(h *host.Host, o Options) *Set {
	if o.Now == nil {
		o.Now = time.Now
	}
	start := o.Now()
	c := &collector{h: h, o: o, set: &Set{Warnings: []string{}}, errs: map[string]int{}, leftOut: map[string]int{}}
	c.families()
	quarantined := c.quarantine()
	inv, desired := c.inventory()
	if inv != nil {
		p := c.split(inv, desired, quarantined)
		c.gpus(inv, p)
		c.doctor(inv)
	}
	c.handOffs()
	c.finish(start)
	return c.set
}

// families declares every family, in the order they are written.
func (c *collector) families() {
	s := c.set
	c.gpuInfo = s.family("gpusplit_gpu_info", Gauge, "A GPU gpusplit sees: its PCI address, number (as inventory numbers it), ids, model, NUMA node (-1: none) and IOMMU group (-1: none). Always 1.",
		"address", "index", "vendor_id", "device_id", "model", "numa_node", "iommu_group")
	c.driver = s.family("gpusplit_gpu_driver_info", Gauge, "The driver a GPU is on now (none: unbound), the one the desired split gives it (desired; empty without a desired state, default: the kernel's choice) and the split's group (target). Always 1.",
		"address", "driver", "desired", "target")
	c.inPlace = s.family("gpusplit_gpu_in_place", Gauge, "1 when a GPU, its functions and its IOMMU group are on the drivers the desired split gives them, 0 when apply would move them. Only for the GPUs a desired state covers.",
		"address")
	c.holder = s.family("gpusplit_gpu_holders", Gauge, "What holds a GPU, one of its functions or a device of its IOMMU group (device), by kind (process, container, vm, mount, interface, ...), name (a process's program, a mount point, an interface) and Proxmox guest (qemu/ID, lxc/ID): how many such holders.",
		"address", "device", "kind", "name", "guest")
	c.speed = s.family("gpusplit_gpu_link_speed_transfers_per_second", Gauge, "A GPU's PCIe link speed now, per lane (current_link_speed); 0 while the link is down. NVIDIA GPUs lower it when idle.", "address")
	c.maxSpeed = s.family("gpusplit_gpu_link_max_speed_transfers_per_second", Gauge, "The fastest a GPU's PCIe link can go, per lane (max_link_speed).", "address")
	c.width = s.family("gpusplit_gpu_link_width_lanes", Gauge, "The lanes a GPU's PCIe link trained to (current_link_width); 0 while the link is down.", "address")
	c.maxWidth = s.family("gpusplit_gpu_link_max_width_lanes", Gauge, "The most lanes a GPU's PCIe link can use (max_link_width).", "address")
	c.aer = s.family("gpusplit_gpu_aer_errors_total", Counter, "PCIe errors counted by AER since the boot, by severity (correctable, nonfatal, fatal), as seen by the GPU or by the port above it (seen_by: gpu, port), from aer_dev_correctable, aer_dev_nonfatal and aer_dev_fatal.",
		"address", "severity", "seen_by")
	c.configured = s.family("gpusplit_split_configured", Gauge, "1 when the host has a desired state ("+plan.DefaultConfig+"), 0 when it has none.")
	c.inSync = s.family("gpusplit_split_in_sync", Gauge, "1 when the host is as the desired state asks in every part and no GPU is quarantined (gpusplit status exits 0), else 0. Only with a desired state.")
	c.drift = s.family("gpusplit_split_drift", Gauge, "What is not as the desired state asks, by part: devices on another driver (drivers), Proxmox files (proxmox), VMs without the hookscript (hooks), boot files (boot). 0 for a part in sync; only the parts the desired state includes.",
		"part")
	c.quarantined = s.family("gpusplit_quarantined_devices", Gauge, "Devices kept from every driver and container since a VM's stop found them broken (gpusplit hook release ends it).")
	c.quarantineInfo = s.family("gpusplit_quarantine_info", Gauge, "A quarantined device, the GPU it belongs to, and the guest and phase whose check found it broken (empty for a damaged record). Always 1.",
		"address", "gpu", "guest", "phase")
	c.quarantineT = s.family("gpusplit_quarantine_timestamp_seconds", Gauge, "When a device was quarantined, in seconds since the epoch.", "address")
	c.lastInfo = s.family("gpusplit_handoff_last_info", Gauge, "A guest's last hand-off: the hookscript phase that had work to do (a VM's pre-start and post-stop, a container's pre-start) and its result (ok, failed, deadline). Always 1.",
		"guest", "phase", "result")
	c.lastOK = s.family("gpusplit_handoff_last_success", Gauge, "1 when a guest's last hand-off ended well, 0 when it failed or ran past its deadline.", "guest", "phase")
	c.lastSeconds = s.family("gpusplit_handoff_last_duration_seconds", Gauge, "How long a guest's last hand-off took, from the hook's call to its end.", "guest", "phase")
	c.lastT = s.family("gpusplit_handoff_last_timestamp_seconds", Gauge, "When a guest's last hand-off began, in seconds since the epoch.", "guest", "phase")
	c.handoffs = s.family("gpusplit_handoffs_total", Counter, "A guest's hand-offs since the boot, by phase and result.", "guest", "phase", "result")
	c.findings = s.family("gpusplit_doctor_findings", Gauge, "What gpusplit doctor finds now, by check and severity (info, warning, error): how many findings; 0 for a check that ran and found nothing of that severity.",
		"check", "severity")
}

// inventory reads the GPUs, and the desired state where the host has one: its
// inventory is then the one the split was checked against (split.toml may name the
// devices). It returns a nil inventory when the GPUs cannot be read.
func (c *collector) inventory() (*inventory.Inventory, *plan.Desired) {
	var inv *inventory.Inventory
	var desired *plan.Desired
	has := c.o.Split != nil && c.h.Exists(plan.DefaultConfig)
	c.configured.set(bool01(has))
	if has {
		d, i, err := c.o.Split(c.h)
		if err != nil {
			c.fail(partSplit, fmt.Errorf("the desired state: %w", err))
		} else {
			inv, desired = i, &d
		}
	}
	if inv == nil {
		var err error
		if inv, err = inventory.Build(c.h, c.o.Selectors); err != nil {
			c.fail(partGPUs, err)
			return nil, nil
		}
		// Split's loader says its inventory's warnings itself.
		c.set.Warnings = append(c.set.Warnings, inv.Warnings...)
	}
	c.leftOut[partHolders] += inv.Unreadable
	return inv, desired
}

// split plans the desired state and reports its drift part by part, as status does; it
// returns the plan, nil without a desired state.
func (c *collector) split(inv *inventory.Inventory, d *plan.Desired, quarantined int) *plan.Plan {
	if d == nil {
		return nil
	}
	p, err := plan.Make(inv, *d)
	if err != nil {
		c.fail(partSplit, err)
		return nil
	}
	o := split.Options{Command: "apply"}
	if len(d.Holding) > 0 && d.Persist {
		// The boot files pin the pools' resting drivers, whatever VM holds them now.
		atRest := *d
		atRest.Holding = nil
		if o.AtRest, err = plan.Make(inv, atRest); err != nil {
			c.fail(partSplit, err)
			return p
		}
	}
	ch, err := split.Make(c.h, inv, p, *d, o)
	if err != nil {
		c.fail(partSplit, err)
		return p
	}
	// A part whose files only root may read cannot say whether it drifted.
	unread := map[string]bool{}
	for _, s := range ch.Stops {
		var st *split.Stop
		if errors.As(s, &st) && errors.Is(st.Err, fs.ErrPermission) {
			unread[st.Part] = true
		}
	}
	counts := map[string]int{}
	for _, pd := range ch.Drift() {
		counts[pd.Part] = len(pd.Items)
	}
	names := []string{"drivers"}
	if d.SyncProxmox {
		names = append(names, "proxmox", "hooks")
	}
	if d.Persist {
		names = append(names, "boot")
	}
	inSync := true
	for _, part := range names {
		if unread[part] {
			c.leftOut[partSplit]++
			c.set.Warnings = append(c.set.Warnings, fmt.Sprintf("the split's %s part cannot be read without root: its drift is left out", part))
			inSync = false
			continue
		}
		c.drift.set(float64(counts[part]), part)
		inSync = inSync && counts[part] == 0
	}
	// A quarantined GPU is status's drift too.
	c.inSync.set(bool01(inSync && quarantined == 0))
	return p
}

// gpus writes what each GPU is: its facts, drivers, holders, link and AER counters.
func (c *collector) gpus(inv *inventory.Inventory, p *plan.Plan) {
	// What the plan says of each GPU: where it goes, and whether all that moves with it
	// is there.
	desired, target, placed := map[pci.Address]string{}, map[pci.Address]string{}, map[pci.Address]bool{}
	if p != nil {
		for _, m := range p.InPlace {
			if m.Role == plan.RoleGPU {
				desired[m.Device], target[m.Device] = m.To, m.Target
			}
			if _, ok := placed[m.GPU]; !ok {
				placed[m.GPU] = true
			}
		}
		for _, m := range p.Moves {
			if m.Role == plan.RoleGPU {
				desired[m.Device], target[m.Device] = m.To, m.Target
			}
			placed[m.GPU] = false
		}
	}
	for i, g := range inv.GPUs {
		a := g.Address.String()
		c.gpuInfo.set(1, a, strconv.Itoa(i), fmt.Sprintf("%04x", g.VendorID), fmt.Sprintf("%04x", g.DeviceID), g.Name(), strconv.Itoa(g.NUMANode), strconv.Itoa(g.IOMMUGroup))
		want, ok := desired[g.Address]
		wantText := ""
		if ok {
			wantText = want
			if want == plan.Default {
				wantText = "default"
			}
		}
		c.driver.set(1, a, orNone(g.Driver), wantText, target[g.Address])
		if in, ok := placed[g.Address]; ok {
			c.inPlace.set(bool01(in), a)
		}
		c.holders(inv, g)
		c.link(g)
		c.aerOf(inv, g)
	}
}

// holders counts what holds the GPU and each device that moves with it.
func (c *collector) holders(inv *inventory.Inventory, g inventory.GPU) {
	devs := []*pci.Device{g.Device}
	devs = append(devs, g.Functions...)
	devs = append(devs, inv.Strangers(g)...)
	seen := map[pci.Address]bool{}
	for _, d := range devs {
		if seen[d.Address] {
			continue
		}
		seen[d.Address] = true
		for _, hd := range inv.Holders[d.Address] {
			c.holder.add(1, g.Address.String(), d.Address.String(), string(hd.Kind), holderName(hd), guestOf(hd))
		}
	}
}

// link writes the GPU's PCIe link, now and at most. A conventional PCI device has none.
func (c *collector) link(g inventory.GPU) {
	l, a := g.Link, g.Address.String()
	if l.MaxSpeed == "" && l.MaxWidth == 0 {
		return
	}
	gts := func(s string) float64 {
		v, _, err := pci.ParseLinkSpeed(s)
		if err != nil {
			return 0 // "Unknown": the link is down
		}
		return v * 1e9
	}
	c.speed.set(gts(l.Speed), a)
	c.maxSpeed.set(gts(l.MaxSpeed), a)
	c.width.set(float64(l.Width), a)
	c.maxWidth.set(float64(l.MaxWidth), a)
}

// aerOf writes the GPU's AER counters, and those of the port above it, which often
// counts what the GPU causes.
func (c *collector) aerOf(inv *inventory.Inventory, g inventory.GPU) {
	write := func(d *pci.Device, seenBy string) {
		a, ok, err := pci.ReadAER(c.h, d.Path)
		if err != nil {
			c.fail(partAER, fmt.Errorf("%s: %w", d.Address, err))
			return
		}
		if !ok {
			return
		}
		addr := g.Address.String()
		c.aer.set(float64(a.Correctable), addr, "correctable", seenBy)
		c.aer.set(float64(a.NonFatal), addr, "nonfatal", seenBy)
		c.aer.set(float64(a.Fatal), addr, "fatal", seenBy)
	}
	write(g.Device, "gpu")
	if n := len(g.Parents); n > 0 {
		if port := inv.Tree.Lookup(g.Parents[n-1]); port != nil {
			write(port, "port")
		}
	}
}

// doctor runs every check, reading the kernel log where it can be read.
func (c *collector) doctor(inv *inventory.Inventory) {
	var log io.Reader
	r, logErr := c.h.OpenKernelLog()
	if logErr == nil {
		defer r.Close()
		log = r
	}
	env, err := doctor.NewEnv(c.h, inv, log, logErr)
	if err != nil {
		c.fail(partDoctor, err)
		return
	}
	rep, err := doctor.Run(env, nil)
	if err != nil {
		c.fail(partDoctor, err)
		return
	}
	counts := map[string][3]int{}
	for _, f := range rep.Findings {
		n := counts[f.ID]
		n[f.Severity]++
		counts[f.ID] = n
	}
	for _, id := range rep.Ran {
		for s := doctor.Info; s <= doctor.Error; s++ {
			c.findings.set(float64(counts[id][s]), id, s.String())
		}
	}
	// A check that saw only part of what it needs is left out as far as it did not see.
	c.leftOut[partDoctor] += len(rep.Partial)
}

// quarantine writes the quarantined devices, and returns how many there are; without
// root they are left out (and counted as one, since the split cannot be in sync
// without knowing them).
func (c *collector) quarantine() int {
	recs, err := health.List(c.h)
	if c.unreadable(partQuarantine, err) {
		return 1
	}
	c.quarantined.set(float64(len(recs)))
	for _, r := range recs {
		guest, phase := "", r.Phase
		if r.Damaged == "" {
			guest = "qemu/" + strconv.Itoa(r.Guest)
			c.quarantineT.set(float64(r.Time.Unix()), r.Device.String())
		} else {
			c.fail(partQuarantine, fmt.Errorf("the quarantine record of %s is damaged: %s", r.Device, r.Damaged))
		}
		c.quarantineInfo.set(1, r.Device.String(), r.GPU.String(), guest, phase)
	}
	return len(recs)
}

// handOffs writes each guest's last hand-off and its counts since the boot.
func (c *collector) handOffs() {
	recs, damaged, err := hook.HandOffs(c.h)
	if c.unreadable(partHandOffs, err) {
		return
	}
	if damaged > 0 {
		c.errs[partHandOffs] += damaged
		c.set.Warnings = append(c.set.Warnings, fmt.Sprintf("%d hand-off records in %s could not be read", damaged, hook.HandOffDir))
	}
	for _, r := range recs {
		guest := guestID(r.Kind, r.Guest)
		c.lastInfo.set(1, guest, r.Phase, r.Result)
		c.lastOK.set(bool01(r.Result == hook.ResultOK), guest, r.Phase)
		c.lastSeconds.set(r.Seconds, guest, r.Phase)
		c.lastT.set(float64(r.Start.UnixNano())/1e9, guest, r.Phase)
		for _, phase := range hook.Phases {
			byResult, ok := r.Counts[phase]
			if !ok {
				continue
			}
			for _, result := range hook.Results {
				c.handoffs.set(float64(byResult[result]), guest, phase, result)
			}
		}
	}
}

// unreadable counts err against part: left out when only root may read what it names,
// an error otherwise. It reports whether there was one.
func (c *collector) unreadable(part string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, fs.ErrPermission):
		c.leftOut[part]++
		c.set.Warnings = append(c.set.Warnings, fmt.Sprintf("%v: only root may read it, and the metrics leave it out", err))
	default:
		c.fail(part, err)
	}
	return true
}

// fail counts an error of a part and says it.
func (c *collector) fail(part string, err error) {
	c.errs[part]++
	c.set.Warnings = append(c.set.Warnings, err.Error())
}

// finish writes how the collection went: its errors and what it left out by part, how
// long it took, and which gpusplit made it.
func (c *collector) finish(start time.Time) {
	s := c.set
	errs := s.family("gpusplit_collect_errors", Gauge, "What could not be collected, by part (gpus, holders, aer, split, quarantine, handoffs, doctor): how many reads failed. The warnings of gpusplit metrics say what.", "part")
	left := s.family("gpusplit_collect_left_out", Gauge, "What only root may read and was left out, by part: other users' processes (holders), the records (quarantine, handoffs), Proxmox's files (split), the checks that saw only part of what they need (doctor).", "part")
	for _, p := range parts {
		errs.set(float64(c.errs[p]), p)
		left.set(float64(c.leftOut[p]), p)
	}
	s.family("gpusplit_build_info", Gauge, "The gpusplit that collected the metrics: its version and the Go it was built with. Always 1.", "version", "goversion").set(1, c.o.Version, runtime.Version())
	end := c.o.Now()
	s.family("gpusplit_collect_duration_seconds", Gauge, "How long the collection took.").set(end.Sub(start).Seconds())
	s.family("gpusplit_collect_timestamp_seconds", Gauge, "When the collection ended, in seconds since the epoch: how old a textfile is.").set(float64(end.UnixNano()) / 1e9)
}

// holderName is what names a holder in a label: a process's program, a mount point, a
// volume group, an interface; "" for a guest, which the guest label names.
func holderName(h holders.Holder) string {
	switch h.Kind {
	case holders.KindProcess:
		return h.Program()
	case holders.KindVM, holders.KindContainer:
		return ""
	case holders.KindSwap:
		return h.Block
	}
	return h.Name
}

// guestOf is the Proxmox guest a holder is or belongs to, as Proxmox's exporter names
// guests (qemu/ID, lxc/ID); "" for none.
func guestOf(h holders.Holder) string {
	switch {
	case h.Container > 0:
		return "lxc/" + strconv.Itoa(h.Container)
	case h.VM > 0:
		return "qemu/" + strconv.Itoa(h.VM)
	}
	return ""
}

// guestID names a guest of a hand-off record.
func guestID(kind string, id int) string {
	if kind == "container" {
		return "lxc/" + strconv.Itoa(id)
	}
	return "qemu/" + strconv.Itoa(id)
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
