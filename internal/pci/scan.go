package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/cpuset"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pciids"
	"github.com/gpusplit/gpusplit/internal/plural"
)

// DevicesDir is where the kernel lists every PCI function.
const DevicesDir = "/sys/bus/pci/devices"

// GroupsDir is where the kernel lists the IOMMU groups.
const GroupsDir = "/sys/kernel/iommu_groups"

// Tree is every PCI function of a host, in address order.
type Tree struct {
	Devices []*Device
	// Warnings name what could not be read and what was assumed instead.
	Warnings []string
	index    map[Address]*Device
	dropped  int // warnings past maxWarnings, counted only
}

// NewTree makes a tree of devices, as a scan does: in address order, indexed.
func NewTree(devs []*Device, warnings []string) *Tree {
	t := &Tree{Devices: slices.Clone(devs), Warnings: warnings, index: map[Address]*Device{}}
	slices.SortFunc(t.Devices, func(x, y *Device) int { return x.Address.Compare(y.Address) })
	for _, d := range t.Devices {
		t.index[d.Address] = d
	}
	return t
}

// Lookup returns the device at a, or nil.
func (t *Tree) Lookup(a Address) *Device { return t.index[a] }

// Group returns the devices of IOMMU group g, in address order.
func (t *Tree) Group(g int) []*Device {
	if g < 0 {
		return nil
	}
	var out []*Device
	for _, d := range t.Devices {
		if d.IOMMUGroup == g {
			out = append(out, d)
		}
	}
	return out
}

// Slot returns the functions of the slot of a (same domain, bus and device), in order.
func (t *Tree) Slot(a Address) []*Device {
	var out []*Device
	for f := range uint8(8) {
		b := a
		b.Function = f
		if d := t.index[b]; d != nil {
			out = append(out, d)
		}
	}
	return out
}

// Scan reads every PCI function under /sys/bus/pci/devices of h. Names are looked up in
// names (which may be empty). Attributes that are missing or unreadable fall back to
// "unknown" (NUMA node -1, no link, no BARs) with a warning when the file exists but holds
// garbage; a device whose vendor, device or class cannot be read is left out with a warning.
func Scan(h *host.Host, names pciids.Names) (*Tree, error) {
	return ScanFor(h, names, nil)
}

// ScanFor is Scan for a command that needs only some devices in full. Every device is
// read briefly first: its identity (vendor, device, class), where it sits, its driver,
// IOMMU group, NUMA node and physical function. detail then picks from that tree (whose
// devices have no names yet) the devices the command needs in full, and only those are
// read again with the rest (subsystem ids, revision, driver_override, CPU list, link,
// BARs): on a host of 75 functions with 8 GPUs, a fifth of them. A nil detail reads
// every device in full. The names of every device are then looked up at once. The
// warnings are those of what was read, in address order, as Scan gives them.
func ScanFor(h *host.Host, names pciids.Names, detail func(*Tree) []*Device) (*Tree, error) {
	list, err := h.List(DevicesDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no PCI devices: %s is missing under root %s (is it a Linux machine's root or a gpusplit snapshot?)", DevicesDir, h.Root())
		}
		return nil, fmt.Errorf("listing PCI devices: %w", err)
	}
	defer list.Close()
	// Every device's iommu_group link leads into this directory: one listing of it
	// spares a look at each group on the way.
	if groups, err := h.List(GroupsDir); err == nil {
		groups.KnowDirs()
		groups.Close()
	}
	t := &Tree{}
	var junk []string
	// Each device's entry, what its read gave (nil when it was skipped) and warned of:
	// the warnings themselves, or how many there were once they fall past the first
	// maxWarnings in address order, which are all a scan keeps.
	type read struct {
		name    string
		a       Address
		dev     *Device
		warns   []string
		dropped int
	}
	var reads []read
	readAt := func(r *read, full bool) {
		d, warns, err := readDevice(h, list, r.name, r.a, full)
		if err != nil {
			warns = append(warns, fmt.Sprintf("%s: %v; device skipped", r.a, err))
		}
		r.dev, r.warns, r.dropped = d, warns, 0
	}
	for _, e := range list.Entries() {
		a, ok := isSysfsAddress(e.Name)
		if !ok {
			junk = append(junk, e.Name)
			continue
		}
		reads = append(reads, read{name: e.Name, a: a})
	}
	// The warnings of a device are dropped, and counted, once those before it have
	// reached maxWarnings, so that a root of 65,536 devices with garbage everywhere
	// holds a few hundred warnings, not a million. (A device read again in full below
	// only comes to warn of more, which moves that point no later.)
	seen := 0
	for i := range reads {
		r := &reads[i]
		readAt(r, detail == nil)
		if seen >= maxWarnings {
			r.dropped, r.warns = len(r.warns), nil
		}
		seen += len(r.warns) + r.dropped
	}
	var devs []*Device
	for _, r := range reads {
		if r.dev != nil {
			devs = append(devs, r.dev)
		}
	}
	if detail != nil {
		want := map[Address]bool{}
		for _, d := range detail(NewTree(devs, nil)) {
			want[d.Address] = true
		}
		devs = devs[:0]
		for i := range reads {
			r := &reads[i]
			if r.dev != nil && want[r.a] {
				readAt(r, true)
			}
			if r.dev != nil {
				devs = append(devs, r.dev)
			}
		}
	}
	for _, r := range reads {
		for _, w := range r.warns {
			t.warnf("%s", w)
		}
		t.dropped += r.dropped
	}
	if len(junk) > 0 {
		// One warning, however many: a crafted root can hold tens of thousands.
		shown := junk[:min(len(junk), 3)]
		more := ""
		if len(junk) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(junk)-len(shown))
		}
		t.Warnings = append([]string{fmt.Sprintf("%s: %s (%s%s); skipped", DevicesDir,
			plural.N(len(junk), "entry is not a PCI address", "entries are not PCI addresses"), strings.Join(shown, ", "), more)}, t.Warnings...)
	}
	if t.dropped > 0 {
		t.Warnings = append(t.Warnings, fmt.Sprintf("… and %s", plural.S(t.dropped, "more warning")))
	}
	name(devs, names)
	if top := h.ArchiveTop(); top != "" {
		// Said first: it is about every path of the root, and reading another
		// folder as the root than the one meant would explain whatever follows.
		t.Warnings = append([]string{fmt.Sprintf("%s: every member is under %s/, so %s/ is read as the root", h.Root(), top, top)}, t.Warnings...)
	}
	return NewTree(devs, t.Warnings), nil
}

// name gives each device its names, loaded for all of them at once: one pass over a
// host's pci.ids, not one per device.
func name(devs []*Device, names pciids.Names) {
	ids := make([]pciids.DeviceID, len(devs))
	classes := make([]uint32, len(devs))
	for i, d := range devs {
		ids[i], classes[i] = pciids.DeviceID{Vendor: d.VendorID, Device: d.DeviceID}, d.Class
	}
	names.Load(ids, classes)
	for _, d := range devs {
		d.VendorName = names.Vendor(d.VendorID)
		d.DeviceName = names.Device(d.VendorID, d.DeviceID)
		d.ClassName = names.Subclass(d.Class)
	}
}

// maxWarnings bounds the warnings of a scan: past it they are counted, not kept, so
// that a root of 65,536 devices with garbage in every attribute costs a line, not a
// million.
const maxWarnings = 100

func (t *Tree) warnf(format string, args ...any) {
	if len(t.Warnings) >= maxWarnings {
		t.dropped++
		return
	}
	t.Warnings = append(t.Warnings, fmt.Sprintf(format, args...))
}

// readDevice reads the device listed as name in devices, the listing of DevicesDir.
// Its directory is listed once, so that the attributes it lacks cost nothing and each
// one it has costs an open, a read and a close (host.Listing).
// It returns what it warned of; a brief read (full false) reads what ScanFor says.
func readDevice(h *host.Host, devices *host.Listing, name string, a Address, full bool) (*Device, []string, error) {
	dir, err := devices.ListTarget(name)
	if err != nil {
		return nil, nil, err
	}
	defer dir.Close()
	real := dir.Path()
	d := &Device{Address: a, Path: real, IOMMUGroup: -1, NUMANode: -1}
	var warns []string

	warn := func(err error, assumed string) {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			warns = append(warns, fmt.Sprintf("%s: %v; %s", a, err, assumed))
		}
	}
	// Identity: without it the device means nothing.
	id, err := readIdentity(dir, a, warn, full)
	if err != nil {
		return nil, warns, err
	}
	d.VendorID, d.DeviceID, d.Class = id.vendor, id.device, id.class
	d.SubVendorID, d.SubDeviceID, d.Revision = id.subVendor, id.subDevice, id.rev

	if d.Driver, err = dir.LinkBase("driver"); err != nil {
		warn(err, "driver taken as none")
	}
	if g, err := dir.LinkBase("iommu_group"); err != nil {
		warn(err, "no IOMMU group assumed")
	} else if g != "" {
		n, err := strconv.Atoi(g)
		if err != nil || n < 0 {
			warn(fmt.Errorf("iommu_group link points to %q, not a group number", g), "no IOMMU group assumed")
		} else {
			d.IOMMUGroup = n
		}
	}
	if s, err := dir.ReadString("numa_node"); err == nil {
		n, perr := strconv.Atoi(s)
		if perr != nil || n < -1 {
			warn(fmt.Errorf("numa_node holds %q, not a node number", s), "NUMA node taken as unknown")
		} else {
			d.NUMANode = n
		}
	} else {
		warn(err, "NUMA node taken as unknown")
	}
	if full {
		if s, err := dir.ReadString("driver_override"); err == nil && s != "(null)" {
			d.DriverOverride = s
		}
		d.LocalCPUs = readLocalCPUs(dir, warn)
		d.Link = readLink(dir, func(err error) { warn(err, "link taken as unknown") })
		if s, err := dir.ReadString("resource"); err == nil {
			bars, perr := ParseResource(s)
			d.BARs = bars
			if perr != nil {
				warn(perr, "BARs after that line unknown")
			}
		} else {
			warn(err, "BARs unknown")
		}
	}
	if pf, err := dir.LinkBase("physfn"); err == nil && pf != "" {
		if pa, ok := isSysfsAddress(pf); ok {
			d.PhysFn = &pa
		}
	}
	readSRIOV(dir, d, warn)

	hb, parents, err := parsePath(real, a)
	if err != nil {
		warns = append(warns, fmt.Sprintf("%s: %v; placed directly under host bridge %s", a, err, hb))
	}
	d.HostBridge, d.Parents = hb, parents
	return d, warns, nil
}

// readLocalCPUs reads the CPUs near a device from local_cpulist, or where that file is
// missing from local_cpus, the same set as a mask: hwloc reads only the mask, and the
// captures made with its hwloc-gather-topology keep only that file.
func readLocalCPUs(dir *host.Listing, warn func(error, string)) cpuset.Set {
	const assumed = "CPU affinity taken as unknown"
	s, err := dir.ReadString("local_cpulist")
	if err == nil {
		set, perr := cpuset.Parse(s)
		if perr != nil {
			warn(fmt.Errorf("local_cpulist: %w", perr), assumed)
		}
		return set
	}
	if !errors.Is(err, fs.ErrNotExist) {
		warn(err, assumed)
		return cpuset.Set{}
	}
	s, err = dir.ReadString("local_cpus")
	if err != nil {
		warn(err, assumed)
		return cpuset.Set{}
	}
	set, perr := cpuset.ParseMask(s)
	if perr != nil {
		warn(fmt.Errorf("local_cpus: %w", perr), assumed)
	}
	return set
}

// readHex reads a sysfs attribute of the form "0x10de" that must fit in bits bits.
func readHex(dir *host.Listing, name string, bits int) (uint64, error) {
	s, err := dir.ReadString(name)
	if err != nil {
		return 0, err
	}
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok || digits == "" || len(digits) > bits/4 {
		return 0, fmt.Errorf("%s holds %q, not a %d-bit 0x-prefixed hex value", name, s, bits)
	}
	v, err := strconv.ParseUint(digits, 16, bits)
	if err != nil {
		return 0, fmt.Errorf("%s holds %q, not a %d-bit 0x-prefixed hex value", name, s, bits)
	}
	return v, nil
}

// readLink reads the four link attributes. Conventional PCI devices have none, and a
// link that is down reads "Unknown": both are "unknown" without a warning.
func readLink(dir *host.Listing, warn func(error)) Link {
	var l Link
	speed := func(name string) (string, int) {
		s, err := dir.ReadString(name)
		if err != nil {
			warn(err)
			return "", 0
		}
		if strings.HasPrefix(s, "Unknown") || s == "" {
			return "", 0
		}
		_, gen, err := ParseLinkSpeed(s)
		if err != nil {
			warn(fmt.Errorf("%s: %w", name, err))
			return "", 0
		}
		return s, gen
	}
	width := func(name string) int {
		s, err := dir.ReadString(name)
		if err != nil {
			warn(err)
			return 0
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 32 {
			warn(fmt.Errorf("%s holds %q, not a lane count", name, s))
			return 0
		}
		return n
	}
	l.Speed, l.Gen = speed("current_link_speed")
	l.MaxSpeed, l.MaxGen = speed("max_link_speed")
	l.Width = width("current_link_width")
	l.MaxWidth = width("max_link_width")
	return l
}

// parsePath finds the host bridge and the parent bridges in a device's sysfs path:
// /sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0 → pci0000:00, [0000:00:01.1].
// The last "pciDDDD:BB" component counts, so devices behind an Intel VMD controller
// or a Hyper-V VMBus hang off their own root.
func parsePath(real string, a Address) (HostBridge, []Address, error) {
	comps := strings.Split(strings.TrimPrefix(real, "/"), "/")
	fallback := HostBridge{Domain: a.Domain, Bus: a.Bus}
	if len(comps) == 0 || comps[len(comps)-1] != a.String() {
		return fallback, nil, fmt.Errorf("sysfs path %s does not end in the device's address", real)
	}
	hbAt := -1
	var hb HostBridge
	for i, c := range comps {
		if b, ok := parseHostBridge(c); ok {
			hbAt, hb = i, b
		}
	}
	if hbAt < 0 {
		return fallback, nil, fmt.Errorf("sysfs path %s has no host bridge (pciDDDD:BB) component", real)
	}
	var parents []Address
	for _, c := range comps[hbAt+1 : len(comps)-1] {
		p, ok := isSysfsAddress(c)
		if !ok {
			return hb, nil, fmt.Errorf("sysfs path %s has %q between the host bridge and the device", host.ShowPath(real), c)
		}
		parents = append(parents, p)
	}
	return hb, parents, nil
}

// maxVFs bounds the virtual functions read of a device: the SR-IOV capability counts
// them in 16 bits.
const maxVFs = 1 << 16

// readSRIOV reads what a physical function says of its SR-IOV virtual functions: how
// many it can have and has (sriov_totalvfs, sriov_numvfs), and which they are (the
// virtfnN links, N from 0). Brief and full reads both do, since taking a GPU from its
// driver destroys them.
func readSRIOV(dir *host.Listing, d *Device, warn func(error, string)) {
	count := func(name string) int {
		s, err := dir.ReadString(name)
		if err != nil {
			warn(err, "SR-IOV taken as absent")
			return 0
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n >= maxVFs {
			warn(fmt.Errorf("%s holds %q, not a count of virtual functions", name, s), "SR-IOV taken as absent")
			return 0
		}
		return n
	}
	d.TotalVFs, d.NumVFs = count("sriov_totalvfs"), count("sriov_numvfs")
	type vf struct {
		n int
		a Address
	}
	var vfs []vf
	for _, e := range dir.Entries() {
		num, ok := strings.CutPrefix(e.Name, "virtfn")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 0 || n >= maxVFs || strconv.Itoa(n) != num {
			continue
		}
		target, err := dir.LinkBase(e.Name)
		if err != nil {
			warn(err, "virtual function left out")
			continue
		}
		if a, ok := isSysfsAddress(target); ok {
			vfs = append(vfs, vf{n, a})
		}
	}
	slices.SortFunc(vfs, func(x, y vf) int { return x.n - y.n })
	for _, v := range vfs {
		d.VirtFns = append(d.VirtFns, v.a)
	}
}
