package vmtest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// Machine returns what the guest's kernel shows for t, as a fakehost description: the
// machine QEMU 7.2 builds from the description, as SeaBIOS sets it up and Debian's 6.1
// kernel sees it with the test initramfs's modules loaded. It adds what QEMU adds by
// itself (the chipset's functions; for a pxb-pcie, its function on bus 0 beside the
// root bus it opens), numbers the buses as the firmware does, gives every function the
// ids, links, power management, reset methods, BARs and driver of its device model,
// sizes the bridge windows as the firmware and the kernel do, forms and numbers the
// IOMMU groups as the kernel's Intel IOMMU driver does, and writes the NUMA nodes,
// registered drivers, loaded modules and boot files of such a guest.
//
// What the description does not determine is left out or filled with stand-ins: where
// the firmware put each BAR and window (Start is 0; sizes and flags are real), the IRQs,
// config space past its identity bytes, and the contents of /proc/version,
// /proc/cpuinfo, /proc/modules, /proc/devices and the kernel log; see
// testdata/vm/README.md. It panics on a description QEMU would refuse, or one that uses
// a device model or a layout it does not model.
func (t Topology) Machine() fakehost.Machine {
	m, err := t.machine()
	if err != nil {
		panic(fmt.Sprintf("topology %s: %v", t.Name, err))
	}
	return m
}

// Link speeds as sysfs prints them.
const (
	gen1 = "2.5 GT/s PCIe"
	gen4 = "16.0 GT/s PCIe"
)

// Vendor ids.
const (
	intel  = 0x8086
	redHat = 0x1b36 // QEMU's own devices
	virtio = 0x1af4 // QEMU's default subsystem vendor (subsystem 1af4:1100)
	ti     = 0x104c
)

// portKind is what a function is to PCIe, as far as the kernel's grouping and the
// firmware's bridge sizing care.
type portKind int

const (
	kindConventional portKind = iota // no PCIe capability
	kindEndpoint
	kindRootPort
	kindUpstream
	kindDownstream
)

// model is a QEMU device model as the guest sees it.
type model struct {
	vendor, device       uint16
	subVendor, subDevice uint16
	class                uint32
	rev                  uint8
	kind                 portKind
	driver               string // what binds to it in the test guest
	speed, maxSpeed      string // current and maximum link; "" for conventional PCI
	width, maxWidth      int
	pm                   bool   // has the power management capability
	acs                  bool   // has ACS (which the kernel's grouping looks for)
	reset                string // reset methods besides bus: "flr", "pm" or ""
	aer                  bool   // has the Advanced Error Reporting capability
	bars                 []fakehost.BAR
	multifunction        bool // header type's multi-function bit, for built-in functions
	reserved             []string
}

func bar(index int, size, flags uint64) fakehost.BAR {
	return fakehost.BAR{Index: index, Size: size, Flags: flags}
}

// models are the QEMU 7.2 device models the topologies use.
var models = map[string]model{
	// A generic PCIe root port: an MSI-X BAR, ACS, no power management; QEMU has it
	// report a 16 GT/s x32 link since QEMU 4.0, and shows as its current link the one of
	// the device in its slot (currentLink).
	"pcie-root-port": {
		vendor: redHat, device: 0x000c, subVendor: redHat, subDevice: 0x0000, class: 0x060400,
		kind: kindRootPort, driver: "pcieport", maxSpeed: gen4, maxWidth: 32,
		acs: true, aer: true, bars: []fakehost.BAR{bar(0, 0x1000, fakehost.Mem32)},
	},
	// pxb-pcie: the PCI expander bridge's own function on bus 0; the root bus it opens
	// is a host bridge of its own.
	"pxb-pcie": {
		vendor: redHat, device: 0x000b, subVendor: virtio, subDevice: 0x1100, class: 0x060000,
		kind: kindConventional,
	},
	// The TI XIO3130 switch: upstream port without ACS, downstream ports without ACS
	// whose Link Capabilities are empty.
	"x3130-upstream": {
		vendor: ti, device: 0x8232, class: 0x060400, rev: 0x02, kind: kindUpstream, driver: "pcieport",
		speed: gen1, width: 1, reset: "flr", aer: true,
	},
	"xio3130-downstream": {
		vendor: ti, device: 0x8233, class: 0x060400, rev: 0x01, kind: kindDownstream, driver: "pcieport",
		speed: gen1, width: 1, maxSpeed: "Unknown", maxWidth: fakehost.NoWidth, reset: "flr", aer: true,
	},
	// The 82574L NIC that plays the GPU, on the e1000e driver.
	"e1000e": {
		vendor: intel, device: 0x10d3, subVendor: intel, subDevice: 0x0000, class: 0x020000,
		kind: kindEndpoint, driver: "e1000e", speed: gen1, width: 1, pm: true, reset: "pm", aer: true,
		bars: []fakehost.BAR{
			bar(0, 0x20000, fakehost.Mem32), bar(1, 0x20000, fakehost.Mem32),
			bar(2, 0x20, fakehost.IOPort), bar(3, 0x4000, fakehost.Mem32),
		},
	},
	// QEMU's NVMe controller; the test initramfs has no nvme driver.
	"nvme": {
		vendor: redHat, device: 0x0010, subVendor: virtio, subDevice: 0x1100, class: 0x010802, rev: 0x02,
		kind: kindEndpoint, speed: gen1, width: 1, pm: true, reset: "flr",
		bars: []fakehost.BAR{bar(0, 0x4000, fakehost.Mem64)},
	},
}

// isaDMA is the region Intel's IOMMU driver reserves for an ISA bridge (floppy DMA).
const isaDMA = "0x0000000000000000 0x0000000000ffffff direct-relaxable"

// chipset returns the functions a machine type puts on bus 0 by itself, by devfn.
// Nothing in the test guest drives them.
func chipset(machine string) map[[2]uint8]model {
	intelFn := func(device uint16, class uint32, rev uint8, mf bool, bars ...fakehost.BAR) model {
		return model{vendor: intel, device: device, subVendor: virtio, subDevice: 0x1100, class: class, rev: rev, multifunction: mf, bars: bars}
	}
	if machine == "pc" {
		// 440FX host bridge, PIIX3 ISA bridge and IDE (its legacy ports fixed), PIIX4 ACPI.
		legacy := uint64(0x110)
		return map[[2]uint8]model{
			{0x00, 0}: intelFn(0x1237, 0x060000, 0x02, false),
			{0x01, 0}: intelFn(0x7000, 0x060100, 0x00, true),
			{0x01, 1}: intelFn(0x7010, 0x010180, 0x00, false,
				bar(0, 8, legacy), bar(1, 1, legacy), bar(2, 8, legacy), bar(3, 1, legacy), bar(4, 0x10, fakehost.IOPort)),
			{0x01, 3}: intelFn(0x7113, 0x068000, 0x03, false),
		}
	}
	// Q35 MCH, and the ICH9 LPC (ISA) bridge, AHCI and SMBus controllers.
	lpc := intelFn(0x2918, 0x060100, 0x02, true)
	lpc.reserved = []string{isaDMA}
	return map[[2]uint8]model{
		{0x00, 0}: intelFn(0x29c0, 0x060000, 0x00, false),
		{0x1f, 0}: lpc,
		{0x1f, 2}: intelFn(0x2922, 0x010601, 0x02, true, bar(4, 0x20, fakehost.IOPort), bar(5, 0x1000, fakehost.Mem32)),
		{0x1f, 3}: intelFn(0x2930, 0x0c0500, 0x02, true, bar(4, 0x40, fakehost.IOPort)),
	}
}

// Resource flags of bridge windows as the kernel prints them.
const (
	windowIO   = 0x100
	windowMem  = 0x200
	windowPref = 0x102201 // 64-bit prefetchable
)

// SeaBIOS's smallest bridge windows: 4 KiB of I/O ports, 2 MiB of memory.
const (
	minIOWindow  = 0x1000
	minMemWindow = 0x200000
)

// function is a PCI function in the guest's tree.
type function struct {
	id         string // the description's id; "" for a built-in function
	m          model
	slot, fn   uint8
	on         *bus // the bus it is on
	sec        *bus // the bus it leads to: a bridge's secondary bus
	windows    [3]window
	group      int
	hasGroup   bool
	resetFirst bool // the first function the kernel found on its (non-root) bus
}

type bus struct {
	root bool
	num  uint8
	numa int
	self *function // the bridge leading to it; nil on a root bus
	fns  []*function
}

type window struct{ size, align uint64 }

// Region types, as SeaBIOS sizes them.
const (
	regionIO = iota
	regionMem
	regionPref
)

func regionOf(flags uint64) int {
	switch {
	case flags&0x100 != 0:
		return regionIO
	case flags&0x2000 != 0:
		return regionPref
	}
	return regionMem
}

// multifunction is whether the kernel takes the function to be part of a multi-function
// device: function 0 by its header type, any other function always (it is found only
// when function 0 says so).
func (f *function) multifunction() bool { return f.fn > 0 || f.m.multifunction }

func (t Topology) machine() (fakehost.Machine, error) {
	machineType := t.MachineType
	switch machineType {
	case "", "q35":
		machineType = "q35"
	case "pc":
		if t.IOMMU {
			return fakehost.Machine{}, fmt.Errorf("QEMU's intel-iommu needs machine type q35")
		}
	default:
		return fakehost.Machine{}, fmt.Errorf("machine type %q is not modelled", t.MachineType)
	}
	rootName := map[string]string{"q35": "pcie.0", "pc": "pci.0"}[machineType]
	bus0 := &bus{root: true, numa: -1}
	buses := map[string]*bus{rootName: bus0}
	var expanders []*bus // pxb-pcie root buses in the order QEMU created them
	used := map[*bus]map[uint8]bool{}
	place := func(b *bus, f *function) error {
		devfn := f.slot<<3 | f.fn
		if used[b] == nil {
			used[b] = map[uint8]bool{}
		}
		if used[b][devfn] {
			return fmt.Errorf("%s: slot %02x.%d is taken", f.id, f.slot, f.fn)
		}
		used[b][devfn] = true
		f.on = b
		b.fns = append(b.fns, f)
		return nil
	}
	cs := chipset(machineType)
	for _, at := range slices.SortedFunc(maps.Keys(cs), func(a, b [2]uint8) int { return int(a[0])<<3 + int(a[1]) - int(b[0])<<3 - int(b[1]) }) {
		if err := place(bus0, &function{m: cs[at], slot: at[0], fn: at[1]}); err != nil {
			return fakehost.Machine{}, err
		}
	}
	for _, d := range t.Devices {
		m, ok := models[d.Model]
		if !ok {
			return fakehost.Machine{}, fmt.Errorf("%s: device model %q is not modelled", d.ID, d.Model)
		}
		on, ok := buses[d.Bus]
		if !ok {
			return fakehost.Machine{}, fmt.Errorf("%s: bus %q is neither the root bus nor an earlier bridge", d.ID, d.Bus)
		}
		f := &function{id: d.ID, m: m}
		if prop(d, "multifunction") == "on" {
			f.m.multifunction = true
		}
		if d.Addr != "" {
			var err error
			if f.slot, f.fn, err = parseAddr(d.Addr); err != nil {
				return fakehost.Machine{}, fmt.Errorf("%s: %v", d.ID, err)
			}
		} else {
			// QEMU takes function 0 of the first free slot.
			for used[on][f.slot<<3] {
				if f.slot++; f.slot > 0x1f {
					return fakehost.Machine{}, fmt.Errorf("%s: bus %s is full", d.ID, d.Bus)
				}
			}
		}
		if err := place(on, f); err != nil {
			return fakehost.Machine{}, err
		}
		switch {
		case d.Model == "pxb-pcie":
			if on != bus0 {
				return fakehost.Machine{}, fmt.Errorf("%s: an expander bridge goes on %s", d.ID, rootName)
			}
			nr, err := strconv.ParseUint(prop(d, "bus_nr"), 0, 8)
			if err != nil {
				return fakehost.Machine{}, fmt.Errorf("%s: bus_nr: %v", d.ID, err)
			}
			numa := -1
			if s := prop(d, "numa_node"); s != "" {
				if numa, err = strconv.Atoi(s); err != nil || numa < 0 || numa >= t.NUMA {
					return fakehost.Machine{}, fmt.Errorf("%s: numa_node %q is not a node of the guest", d.ID, s)
				}
			}
			b := &bus{root: true, num: uint8(nr), numa: numa}
			buses[d.ID] = b
			expanders = append(expanders, b)
		case m.kind == kindRootPort || m.kind == kindUpstream || m.kind == kindDownstream:
			b := &bus{self: f}
			f.sec = b
			buses[d.ID] = b
		}
	}
	for _, b := range buses {
		slices.SortFunc(b.fns, func(x, y *function) int { return int(x.slot)<<3 + int(x.fn) - int(y.slot)<<3 - int(y.fn) })
		// QEMU refuses other functions beside a function 0 that is not multi-function;
		// without a function 0 they are there, but neither the firmware nor the kernel
		// looks for them.
		first := map[uint8]*function{}
		for _, f := range b.fns {
			if f.fn == 0 {
				first[f.slot] = f
			}
		}
		visible := b.fns[:0]
		for _, f := range b.fns {
			switch f0 := first[f.slot]; {
			case f0 == nil:
			case f.fn > 0 && !f0.m.multifunction:
				return fakehost.Machine{}, fmt.Errorf("%s: function %02x.0 is not multi-function (multifunction=on)", f.id, f.slot)
			default:
				visible = append(visible, f)
			}
		}
		b.fns = visible
		if !b.root && len(b.fns) > 0 {
			b.fns[0].resetFirst = true
		}
	}

	// Bus numbers: SeaBIOS numbers the buses below bus 0 depth first in slot order, then
	// each expander's root bus (bus_nr) in increasing order the same way from bus_nr+1.
	next := 0
	var number func(b *bus) error
	number = func(b *bus) error {
		for _, f := range b.fns {
			if f.sec == nil {
				continue
			}
			if next++; next > 0xff {
				return fmt.Errorf("more than 256 buses")
			}
			f.sec.num = uint8(next)
			f.sec.numa = b.numa
			if err := number(f.sec); err != nil {
				return err
			}
		}
		return nil
	}
	if err := number(bus0); err != nil {
		return fakehost.Machine{}, err
	}
	ascending := slices.Clone(expanders)
	slices.SortFunc(ascending, func(x, y *bus) int { return int(x.num) - int(y.num) })
	for _, b := range ascending {
		if int(b.num) <= next {
			return fakehost.Machine{}, fmt.Errorf("expander bus_nr 0x%02x is at or below bus 0x%02x, already numbered", b.num, next)
		}
		next = int(b.num)
		if err := number(b); err != nil {
			return fakehost.Machine{}, err
		}
	}
	for _, b := range append([]*bus{bus0}, expanders...) {
		sizeWindows(b)
		if err := assignIO(b, b == bus0); err != nil {
			return fakehost.Machine{}, err
		}
	}

	// The order the kernel adds devices, which is the order its IOMMU driver groups them
	// in: bus 0's root bus first, then the expanders' in the order of QEMU's list of
	// child buses (newest first), which its ACPI tables follow; on each bus its functions,
	// then the buses behind its bridges in turn.
	roots := []*bus{bus0}
	for i := len(expanders) - 1; i >= 0; i-- {
		roots = append(roots, expanders[i])
	}
	var order []*function
	var add func(b *bus)
	add = func(b *bus) {
		order = append(order, b.fns...)
		for _, f := range b.fns {
			if f.sec != nil {
				add(f.sec)
			}
		}
	}
	for _, b := range roots {
		add(b)
	}
	if t.IOMMU {
		groups := 0
		for _, f := range order {
			f.group, f.hasGroup = groupOf(f, &groups), true
		}
	}

	m := fakehost.Machine{
		IOMMU:         t.IOMMU,
		IOMMUType:     "DMA-FQ",
		Drivers:       guestDrivers,
		DriverModules: guestBuiltins,
		Files:         t.guestFiles(),
		// The IOMMU class is there whatever the machine; the emulated Intel IOMMU
		// registers its unit in it.
		Dirs: []string{"/sys/class/iommu"},
	}
	if t.IOMMU {
		m.Links = map[string]string{"/sys/class/iommu/dmar0": "../../devices/virtual/iommu/dmar0"}
	}
	for n := range max(t.NUMA, 1) {
		m.Nodes = append(m.Nodes, fakehost.Node{ID: n, CPUs: strconv.Itoa(n)})
	}
	for _, b := range append([]*bus{bus0}, ascending...) {
		m.Bridges = append(m.Bridges, fakehost.HostBridge{Bus: b.num, NUMA: b.numa, Devices: devices(b, machineType)})
	}
	return m, nil
}

// sizeWindows sizes the windows of the bridges below b as SeaBIOS does: each window holds
// what the bus behind it needs, aligned to the largest alignment among that, and is at
// least the minimum. An empty window gets the minimum on a port with a hot-plug slot (the
// root and downstream ports), except an I/O window, which SeaBIOS leaves unassigned on a
// PCIe port (assignIO).
func sizeWindows(b *bus) {
	for _, f := range b.fns {
		if f.sec == nil {
			continue
		}
		sizeWindows(f.sec)
		for r := range f.windows {
			w := window{align: minMemWindow}
			if r == regionIO {
				w.align = minIOWindow
			}
			var sum uint64
			for _, c := range f.sec.fns {
				for _, br := range c.m.bars {
					if regionOf(br.Flags) == r {
						sum += br.Size
						w.align = max(w.align, br.Size)
					}
				}
				if c.sec != nil {
					sum += c.windows[r].size
					w.align = max(w.align, c.windows[r].align)
				}
			}
			if sum == 0 && f.hotplug() && r != regionIO {
				sum = w.align
			}
			w.size = (sum + w.align - 1) / w.align * w.align
			f.windows[r] = w
		}
	}
}

// hotplug is whether f is a port with a hot-plug slot.
func (f *function) hotplug() bool { return f.m.kind == kindRootPort || f.m.kind == kindDownstream }

// assignIO gives I/O windows to the bridges on bus 0's root bus that the firmware left
// without one, as the kernel does (drivers/pci/setup-bus.c, pbus_size_io with a realloc
// list): below such a bridge a hot-plug port gets room for pci_hotplug_io_size (256
// ports), and every bridge the room its bridges below get, rounded up to 4 KiB. A port
// the firmware left without one below a bridge it gave one keeps none: the firmware
// sized that window to fit exactly what it placed, so the kernel finds no room. So does
// every port below an expander's root bus, whose host bridge has only the I/O ranges
// the firmware placed there.
func assignIO(b *bus, bus0 bool) error {
	var need func(f *function) uint64
	need = func(f *function) uint64 {
		var sum uint64
		for _, c := range f.sec.fns {
			if c.sec != nil {
				sum += need(c)
			}
		}
		if f.hotplug() {
			sum += 0x100
		}
		size := (sum + minIOWindow - 1) / minIOWindow * minIOWindow
		f.windows[regionIO] = window{size: size, align: minIOWindow}
		return size
	}
	if !bus0 {
		return nil
	}
	var used uint64
	for _, f := range b.fns {
		for _, br := range f.m.bars {
			if regionOf(br.Flags) == regionIO {
				used += br.Size
			}
		}
		if f.sec == nil {
			continue
		}
		if f.windows[regionIO].size == 0 {
			need(f)
		}
		used += f.windows[regionIO].size
	}
	if used > 0xf000 {
		return fmt.Errorf("the bridges on bus 0 need %#x I/O ports, more than there are; which get them is not modelled", used)
	}
	return nil
}

// groupOf is the IOMMU group the kernel (drivers/iommu/iommu.c, pci_device_group) puts f
// in, given the groups of the functions added before it; new groups take the next number.
func groupOf(f *function, groups *int) int {
	// Up from f's bus to where every bridge above has ACS: a bridge passed on the way
	// takes f into its group.
	p := f
	for b := f.on; !b.root; b = b.self.on {
		if acsPath(b.self) {
			break
		}
		p = b.self
		if p.hasGroup {
			return p.group
		}
	}
	// Functions of one slot that do not isolate themselves share a group.
	if p.multifunction() && !acsEnabled(p) {
		for _, q := range p.on.fns {
			if q != p && q.slot == p.slot && !acsEnabled(q) && q.hasGroup {
				return q.group
			}
		}
	}
	g := *groups
	*groups++
	return g
}

// acsEnabled is the kernel's pci_acs_enabled for the models here: conventional PCI never
// isolates; root and downstream ports do if they have ACS; an endpoint or upstream port
// does when it is a single function, and otherwise only with ACS.
func acsEnabled(f *function) bool {
	switch f.m.kind {
	case kindConventional:
		return false
	case kindRootPort, kindDownstream:
		return f.m.acs
	}
	return !f.multifunction() || f.m.acs
}

// acsPath is pci_acs_path_enabled from f up to its root bus.
func acsPath(f *function) bool {
	for {
		if !acsEnabled(f) {
			return false
		}
		if f.on.root {
			return true
		}
		f = f.on.self
	}
}

// devices describes the functions on b for fakehost.
func devices(b *bus, machineType string) []fakehost.Device {
	var out []fakehost.Device
	for _, f := range b.fns {
		m := f.m
		d := fakehost.Device{
			Slot: f.slot, Func: f.fn, Vendor: m.vendor, Device: m.device, SubVendor: m.subVendor, SubDevice: m.subDevice,
			Class: m.class, Rev: m.rev, Driver: m.driver, Group: fakehost.NoGroup,
			MaxSpeed: m.maxSpeed, MaxWidth: m.maxWidth,
			BARs: slices.Clone(m.bars), Multifunction: m.multifunction, NoPM: !m.pm, Reserved: m.reserved,
			AER: m.aer && machineType != "pc", // the capability is in extended config space
		}
		d.Speed, d.Width = f.currentLink()
		if f.hasGroup {
			d.Group = f.group
		}
		if machineType == "pc" {
			d.ConfigSize = 256 // no extended config space (no MMCONFIG)
		}
		// The kernel offers a bus reset for the only function on a bus behind a bridge;
		// it looks when it finds each function, so the first one found gets it.
		var reset []string
		if m.reset != "" {
			reset = append(reset, m.reset)
		}
		if f.resetFirst {
			reset = append(reset, "bus")
		}
		if d.ResetMethod = strings.Join(reset, " "); d.ResetMethod == "" {
			d.ResetMethod = fakehost.NoReset
		}
		if f.sec != nil {
			d.Secondary = f.sec.num
			d.Children = devices(f.sec, machineType)
			for r, flags := range []uint64{windowIO, windowMem, windowPref} {
				if w := f.windows[r]; w.size > 0 {
					d.BARs = append(d.BARs, fakehost.BAR{Index: 13 + r, Size: w.size, Flags: flags})
				}
			}
		}
		out = append(out, d)
	}
	return out
}

// currentLink is the link f shows as trained. QEMU's generic root port copies it from
// function 0 of the device in its slot, within its own capabilities
// (pcie_sync_bridge_lnk), and shows its capabilities when the slot is empty; every other
// model shows its fixed link status.
func (f *function) currentLink() (string, int) {
	m := f.m
	if m.kind != kindRootPort {
		return m.speed, m.width
	}
	for _, c := range f.sec.fns {
		if c.slot == 0 && c.fn == 0 && c.m.kind != kindConventional {
			speed, width := c.currentLink()
			if gts(speed) > gts(m.maxSpeed) {
				speed = m.maxSpeed
			}
			return speed, min(width, m.maxWidth)
		}
	}
	return m.maxSpeed, m.maxWidth
}

// gts is a link speed's rate: 16 for "16.0 GT/s PCIe".
func gts(speed string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimSuffix(speed, " GT/s PCIe"), 64)
	return v
}

// prop returns the value of a -device property, "" when it is not given.
func prop(d Device, name string) string {
	for _, p := range d.Props {
		if k, v, ok := strings.Cut(p, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// parseAddr reads QEMU's addr=: slot[.function] in hex.
func parseAddr(s string) (slot, function uint8, err error) {
	sl, fu, hasFn := strings.Cut(s, ".")
	n, err := strconv.ParseUint(strings.TrimPrefix(sl, "0x"), 16, 8)
	if err != nil || n > 0x1f {
		return 0, 0, fmt.Errorf("addr %q: bad slot", s)
	}
	var f uint64
	if hasFn {
		if f, err = strconv.ParseUint(fu, 16, 8); err != nil || f > 7 {
			return 0, 0, fmt.Errorf("addr %q: bad function", s)
		}
	}
	return uint8(n), uint8(f), nil
}

// guestDrivers are the PCI drivers Debian's 6.1 kernel registers in the test guest: its
// built-in ones and those of the modules the initramfs loads.
var guestDrivers = []string{
	"8250_mid", "8250_pericom", "agpgart-intel", "agpgart-sis", "agpgart-via", "e1000e",
	"iosf_mbi_pci", "pcieport", "serial", "shpchp", "vfio-pci", "xen-platform-pci",
}

// guestBuiltins are the drivers built into that kernel without a /sys/module entry, so
// without a module link; shpchp is built in too but has one (it has parameters).
var guestBuiltins = map[string]string{
	"8250_mid": "", "8250_pericom": "", "agpgart-intel": "", "agpgart-sis": "", "agpgart-via": "",
	"iosf_mbi_pci": "", "serial": "", "xen-platform-pci": "",
}

// guestModules are the modules the tests' initramfs loads (e1000e, vfio-pci and
// vfio_iommu_type1 with their dependencies, in loading order), as its /etc/modules and
// /proc/modules list them.
var guestModules = []string{"e1000e", "vfio", "vfio_virqfd", "irqbypass", "vfio-pci-core", "vfio-pci", "vfio_iommu_type1"}

// guestFiles are the guest's files besides sysfs's PCI tree: its command line, host
// name, module list and the vfio modules' parameters, and stand-ins for the files whose
// contents the description does not determine.
func (t Topology) guestFiles() map[string]string {
	var etcModules, procModules strings.Builder
	for i := len(guestModules) - 1; i >= 0; i-- {
		fmt.Fprintf(&procModules, "%s 16384 0 - Live 0x0000000000000000\n", strings.ReplaceAll(guestModules[i], "-", "_"))
	}
	for _, m := range guestModules {
		etcModules.WriteString(m + ".ko\n")
	}
	var cpuinfo strings.Builder
	ncpus := max(t.NUMA, 1)
	for c := range ncpus {
		fmt.Fprintf(&cpuinfo, "processor\t: %d\nvendor_id\t: AuthenticAMD\nmodel name\t: QEMU Virtual CPU version 2.5+\nphysical id\t: 0\ncore id\t\t: %d\ncpu cores\t: %d\napicid\t\t: %d\n\n", c, c, ncpus, c)
	}
	kmsg := "5,0,0,-;Linux version 6.1.0-amd64\n6,1,0,-;Command line: " + t.cmdline() + "\n"
	if t.IOMMU {
		kmsg += "6,2,0,-;DMAR: IOMMU enabled\n"
	}
	product := "Standard PC (Q35 + ICH9, 2009)\n"
	if t.MachineType == "pc" {
		product = "Standard PC (i440FX + PIIX, 1996)\n"
	}
	return map[string]string{
		// QEMU's SMBIOS tables under SeaBIOS, which dates every build 04/01/2014.
		"/sys/class/dmi/id/sys_vendor":                                    "QEMU\n",
		"/sys/class/dmi/id/product_name":                                  product,
		"/sys/class/dmi/id/bios_vendor":                                   "SeaBIOS\n",
		"/sys/class/dmi/id/bios_date":                                     "04/01/2014\n",
		"/sys/class/dmi/id/bios_version":                                  "1.16.2-debian-1.16.2-1\n",
		"/sys/module/pcie_aspm/parameters/policy":                         "[default] performance powersave powersupersave \n",
		"/proc/cmdline":                                                   t.cmdline() + "\n",
		"/proc/sys/kernel/hostname":                                       "(none)\n",
		"/etc/modules":                                                    etcModules.String(),
		"/sys/module/vfio/version":                                        "0.3\n",
		"/sys/module/vfio_iommu_type1/version":                            "0.2\n",
		"/sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts": "N\n",
		"/sys/module/vfio_iommu_type1/parameters/disable_hugepages":       "N\n",
		"/sys/module/vfio_iommu_type1/parameters/dma_entry_limit":         "65535\n",
		"/sys/module/vfio_pci/parameters/disable_denylist":                "N\n",
		"/sys/module/vfio_pci/parameters/disable_idle_d3":                 "N\n",
		"/sys/module/vfio_pci/parameters/disable_vga":                     "N\n",
		"/sys/module/vfio_pci/parameters/enable_sriov":                    "N\n",
		"/sys/module/vfio_pci/parameters/nointxmask":                      "N\n",
		// Stand-ins: the real contents depend on the kernel build and the boot.
		"/proc/version": "Linux version 6.1.0-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian 6.1\n",
		"/proc/cpuinfo": cpuinfo.String(),
		"/proc/modules": procModules.String(),
		"/proc/devices": "Character devices:\n  1 mem\n  4 tty\n 10 misc\n246 vfio\n\nBlock devices:\n259 blkext\n",
		"/dev/kmsg":     kmsg,
	}
}
