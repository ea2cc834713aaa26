// Package fakehost lays out a host's sysfs, procfs and configuration files from a short
// description of its PCI topology, shaped like a real kernel's: device directories nested
// under their host bridge and bridges, the /sys/bus/pci/devices, driver, IOMMU group and
// pci_bus links with the relative targets the kernel uses, and the attribute files in the
// kernel's formats. Tests and the sample host behind --demo are built with it, and
// internal/testutils/vmtest checks what it lays out against snapshots of a real kernel's sysfs
// taken in QEMU guests (testdata/vm).
package fakehost

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/cpuset"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Machine describes a host.
type Machine struct {
	// Nodes are the NUMA nodes with their CPU lists ("0-27,56-83"). A machine without
	// NUMA information (a VM guest) has one node 0 holding every CPU, and host bridges
	// with NUMA -1.
	Nodes []Node
	// IOMMU gives every device the iommu_group link of its Group; without it no device
	// has one, as on a host booted without an IOMMU.
	IOMMU bool
	// IOMMUType is every group's type: "identity" (the default: passthrough, as with
	// iommu=pt), "DMA-FQ" (a Debian or Ubuntu kernel's default translation) or "DMA".
	IOMMUType string
	Bridges   []HostBridge
	Processes []Process
	// Files, Links and Dirs add anything else: "/proc/cmdline", "/etc/pve/…", and
	// directories that may be empty ("/sys/class/iommu").
	Files map[string]string
	Links map[string]string
	Dirs  []string
	// Drivers are PCI drivers that are registered whether or not they drive a device.
	Drivers []string
	// DriverModules names the module behind a driver, the target of its
	// /sys/bus/pci/drivers/<driver>/module link; "" marks a driver built into the kernel
	// without a /sys/module entry, which has no such link. A driver not listed here is
	// looked up in knownModules, and failing that taken to be the module of its name
	// with '-' written '_' ("vfio-pci": vfio_pci).
	DriverModules map[string]string
	// NvidiaVersion, when set, makes the nvidia driver's /proc/driver/nvidia and
	// /sys/module/nvidia files, and an information file for each GPU it drives.
	NvidiaVersion string
}

// Node is a NUMA node.
type Node struct {
	ID   int
	CPUs string
}

// HostBridge is a root complex: pciDDDD:BB, with the devices on its root bus.
type HostBridge struct {
	Domain  uint32
	Bus     uint8
	NUMA    int // -1: unknown
	Devices []Device
}

// Device is a PCI function, and for a bridge the devices on its secondary bus.
type Device struct {
	Slot, Func     uint8
	Vendor, Device uint16
	SubVendor      uint16
	SubDevice      uint16
	Class          uint32
	Rev            uint8
	Driver         string
	Group          int // IOMMU group, when the machine has an IOMMU; NoGroup for none
	// Link is the current link ("32.0 GT/s PCIe", 16); MaxSpeed/MaxWidth default to it.
	// A device without Speed is conventional PCI and has no link files. A port whose
	// Link Capabilities are empty shows MaxSpeed "Unknown" and MaxWidth NoWidth.
	Speed    string
	Width    int
	MaxSpeed string
	MaxWidth int
	BARs     []BAR
	// Multifunction sets the multi-function bit of the header type in config space.
	// Function 0 of a slot with other functions has it whether set or not (the kernel
	// looks for no other function otherwise).
	Multifunction bool
	// ConfigSize is the length of the config file: 0 for 4096 on a PCIe device (one with
	// Speed) and 256 on conventional PCI; 256 for a PCIe device too where the host
	// bridge has no extended config space (i440fx).
	ConfigSize int
	// Caps is the standard capability list from offset 0x40 on (the PCI Express
	// capability): given, the capabilities bit of the status register and the list's
	// pointer at 0x34 are set.
	Caps []byte
	// ExtConfig is extended config space from offset 0x100 on (capabilities such as ACS),
	// as root reads it.
	ExtConfig []byte
	// ResetMethod is the reset_method file: "" for "flr bus" on a PCIe device and no
	// file on conventional PCI; NoReset for no file (no method: a root port).
	ResetMethod string
	// NoPM marks a function without the power management capability: d3cold_allowed
	// is 0.
	NoPM bool
	// PowerState is the power_state file: "" for D0 on a device with a driver (which
	// enabled it) and "unknown" on one without (never enabled).
	PowerState string
	// Reserved are IOMMU reserved regions of the device besides the MSI window, as lines
	// of reserved_regions ("0x0000000000000000 0x0000000000ffffff direct-relaxable": the
	// ISA DMA window Intel's IOMMU driver keeps for an ISA bridge); its group lists them.
	Reserved []string
	// Secondary is the bus number a bridge leads to; Children sit on it.
	Secondary uint8
	Children  []Device
	// Model names a GPU in the nvidia driver's information file.
	Model string
	// RDMA names the device's InfiniBand/RoCE port ("mlx5_0"), for NICs.
	RDMA string
	// VirtFns are the SR-IOV virtual functions of a physical function, enabled: each is
	// a device of the same bus at its own slot and function, with a physfn link to this
	// one, which has a virtfnN link to each and the sriov_* files.
	VirtFns []Device
	// TotalVFs is sriov_totalvfs: len(VirtFns) when less. A device with TotalVFs and no
	// VirtFns has SR-IOV with none enabled (sriov_numvfs 0).
	TotalVFs int
	// VGPUTypes gives a virtual function the directory of NVIDIA's vGPU manager
	// (kernels since 6.8): nvidia/creatable_vgpu_types holds it, and
	// nvidia/current_vgpu_type VGPUType.
	VGPUTypes string
	VGPUType  int
	// AER gives the device the Advanced Error Reporting capability's counters, as the
	// kernel shows them for one that has it: aer_dev_correctable, aer_dev_fatal and
	// aer_dev_nonfatal, every error named as Debian 12's kernel names it, each count 0.
	AER bool
}

// BAR is a base address register as the kernel placed it; Start 0 leaves it unassigned.
type BAR struct {
	Index int
	Start uint64
	Size  uint64
	Flags uint64
}

// NoGroup leaves a device without an IOMMU group, as the IOMMU's own function is.
const NoGroup = -1

// NoWidth is a MaxWidth the kernel prints as 0: a port whose Link Capabilities are empty.
const NoWidth = -1

// NoReset is a ResetMethod of a device with no reset method: the kernel shows no
// reset_method file.
const NoReset = "-"

// knownModules are the modules of drivers not named after theirs, as distribution
// kernels build them; "" for built in.
var knownModules = map[string]string{
	"pcieport":    "",
	"xhci_hcd":    "xhci_pci",
	"ehci-pci":    "ehci_pci",
	"i801_smbus":  "i2c_i801",
	"piix4_smbus": "i2c_piix4",
	"bochs-drm":   "bochs",
}

// msiWindow is the IOMMU reserved region every group has on x86: the MSI address range.
const msiWindow = "0x00000000fee00000 0x00000000feefffff msi"

// Common resource flags: what x86 kernels print for typical BARs.
const (
	Mem32     = 0x40200  // 32-bit, non-prefetchable memory
	Mem64Pref = 0x14220c // 64-bit prefetchable memory
	Mem64     = 0x140204 // 64-bit non-prefetchable memory
	IOPort    = 0x40101
	ROM       = 0x46200
	Unset     = 0x20000000
)

// Process is a process with device nodes open.
type Process struct {
	PID     int
	Comm    string
	Cmdline []string
	Cgroup  string // the cgroup v2 path: "/lxc/129/ns/system.slice/vllm.service"
	Files   []string
}

// Tree is a laid-out machine: every file, link and directory, by path relative to the root.
type Tree struct {
	files map[string][]byte
	links map[string]string
	dirs  map[string]bool
}

func newTree() *Tree {
	return &Tree{files: map[string][]byte{}, links: map[string]string{}, dirs: map[string]bool{}}
}

func (t *Tree) file(p, body string) { t.files[strings.TrimPrefix(p, "/")] = []byte(body) }
func (t *Tree) dir(p string)        { t.dirs[strings.TrimPrefix(p, "/")] = true }

// link makes p a link to target, written relative to p's directory as the kernel does.
func (t *Tree) link(p, target string) {
	t.links[strings.TrimPrefix(p, "/")] = relLink(path.Dir(p), target)
}

// relLink is target relative to dir as sysfs writes it (fs/sysfs/symlink.c): up from dir
// to the closest directory that holds target's parent, then down. A link to a directory
// above its own therefore climbs past it and names it: pci_bus/0000:00/device in
// /sys/devices/pci0000:00 is "../../../pci0000:00", not "../..".
func relLink(dir, target string) string {
	parent := path.Dir(target)
	base, up := dir, ""
	for base != "/" && parent != base && !strings.HasPrefix(parent, base+"/") {
		base = path.Dir(base)
		up += "../"
	}
	return up + strings.TrimPrefix(strings.TrimPrefix(target, base), "/")
}

// Build lays out the machine.
func (m Machine) Build() (*Tree, error) {
	b := builder{m: m, t: newTree()}
	if err := b.build(); err != nil {
		return nil, err
	}
	return b.t, nil
}

type builder struct {
	m      Machine
	t      *Tree
	ncpus  int
	all    cpuset.Set
	nodes  map[int]cpuset.Set
	seen   map[pci.Address]bool
	gpus   []placed
	groups map[int][]string // reserved regions of each IOMMU group
}

type placed struct {
	addr pci.Address
	dev  Device
	path string
}

func (b *builder) build() error {
	b.nodes = map[int]cpuset.Set{}
	b.seen = map[pci.Address]bool{}
	b.groups = map[int][]string{}
	var all []string
	for _, n := range b.m.Nodes {
		set, err := cpuset.Parse(n.CPUs)
		if err != nil {
			return fmt.Errorf("node %d: %w", n.ID, err)
		}
		b.nodes[n.ID] = set
		if set.Len() > 0 {
			all = append(all, n.CPUs)
		}
		if cpus := set.CPUs(); len(cpus) > 0 && cpus[len(cpus)-1]+1 > b.ncpus {
			b.ncpus = cpus[len(cpus)-1] + 1
		}
	}
	var err error
	if b.all, err = cpuset.Parse(strings.Join(all, ",")); err != nil {
		return err
	}
	b.system()
	for _, hb := range b.m.Bridges {
		if err := b.hostBridge(hb); err != nil {
			return err
		}
	}
	b.iommuGroups()
	b.nvidia()
	b.processes()
	for p, body := range b.m.Files {
		b.t.file(p, body)
	}
	for p, target := range b.m.Links {
		b.t.links[strings.TrimPrefix(p, "/")] = target
	}
	for _, d := range b.m.Dirs {
		b.t.dir(d)
	}
	return nil
}

// system writes the NUMA nodes and the PCI bus's own files.
func (b *builder) system() {
	var ids, withCPUs []string
	for _, n := range b.m.Nodes {
		dir := fmt.Sprintf("/sys/devices/system/node/node%d", n.ID)
		b.t.file(dir+"/cpulist", b.nodes[n.ID].String()+"\n")
		b.t.file(dir+"/cpumap", b.nodes[n.ID].Mask(b.ncpus)+"\n")
		ids = append(ids, fmt.Sprint(n.ID))
		if b.nodes[n.ID].Len() > 0 {
			withCPUs = append(withCPUs, fmt.Sprint(n.ID))
		}
	}
	list := func(ids []string) string {
		if s, err := cpuset.Parse(strings.Join(ids, ",")); err == nil {
			return s.String()
		}
		return strings.Join(ids, ",")
	}
	online := list(ids)
	for _, f := range []string{"online", "possible", "has_memory", "has_normal_memory"} {
		b.t.file("/sys/devices/system/node/"+f, online+"\n")
	}
	b.t.file("/sys/devices/system/node/has_cpu", list(withCPUs)+"\n")
	b.t.file("/sys/devices/system/cpu/online", b.all.String()+"\n")
	b.t.file("/sys/devices/system/cpu/possible", b.all.String()+"\n")
	b.t.file("/sys/bus/pci/drivers_autoprobe", "1\n")
	b.t.file("/sys/bus/pci/drivers_probe", "")
	b.t.file("/sys/bus/pci/rescan", "")
	b.t.dir("/sys/bus/pci/devices")
	b.t.dir("/sys/bus/pci/drivers")
	b.t.dir("/sys/bus/pci/slots")
	for _, d := range b.m.Drivers {
		b.driver(d)
	}
	// The kernel makes the directory whether or not an IOMMU fills it.
	b.t.dir("/sys/kernel/iommu_groups")
}

func (b *builder) hostBridge(hb HostBridge) error {
	name := fmt.Sprintf("pci%04x:%02x", hb.Domain, hb.Bus)
	dir := "/sys/devices/" + name
	b.t.file(dir+"/uevent", "")
	b.t.dir(dir + "/power")
	b.pciBus(dir, hb.Domain, hb.Bus, hb.NUMA)
	return b.devices(dir, hb.Domain, hb.Bus, hb.NUMA, hb.Devices)
}

// devices lays out the devices of one bus.
func (b *builder) devices(parentDir string, domain uint32, bus uint8, numa int, devs []Device) error {
	for _, d := range devs {
		others := false
		for _, o := range devs {
			others = others || (o.Slot == d.Slot && o.Func != d.Func)
		}
		if err := b.device(parentDir, domain, bus, numa, d, d.Multifunction || (d.Func == 0 && others)); err != nil {
			return err
		}
	}
	return nil
}

// pciBus writes the pci_bus directory of a bus and its /sys/class/pci_bus link.
func (b *builder) pciBus(parentDir string, domain uint32, bus uint8, numa int) {
	name := fmt.Sprintf("%04x:%02x", domain, bus)
	dir := parentDir + "/pci_bus/" + name
	b.t.file(dir+"/cpuaffinity", b.cpus(numa).Mask(b.ncpus)+"\n")
	b.t.file(dir+"/cpulistaffinity", b.cpus(numa).String()+"\n")
	b.t.file(dir+"/rescan", "")
	b.t.link(dir+"/subsystem", "/sys/class/pci_bus")
	b.t.link(dir+"/device", parentDir)
	b.t.link("/sys/class/pci_bus/"+name, dir)
}

// cpus returns the CPUs local to a NUMA node: all of them when it is unknown.
func (b *builder) cpus(numa int) cpuset.Set {
	if s, ok := b.nodes[numa]; ok {
		return s
	}
	return b.all
}

func (b *builder) device(parentDir string, domain uint32, bus uint8, numa int, d Device, multifunction bool) error {
	a := pci.Address{Domain: domain, Bus: bus, Device: d.Slot, Function: d.Func}
	if d.Slot > 0x1f || d.Func > 7 {
		return fmt.Errorf("device %04x:%02x:%02x.%x: slot or function out of range", domain, bus, d.Slot, d.Func)
	}
	if b.seen[a] {
		return fmt.Errorf("device %s described twice", a)
	}
	b.seen[a] = true
	dir := parentDir + "/" + a.String()
	t := b.t
	t.file(dir+"/vendor", fmt.Sprintf("0x%04x\n", d.Vendor))
	t.file(dir+"/device", fmt.Sprintf("0x%04x\n", d.Device))
	t.file(dir+"/subsystem_vendor", fmt.Sprintf("0x%04x\n", d.SubVendor))
	t.file(dir+"/subsystem_device", fmt.Sprintf("0x%04x\n", d.SubDevice))
	t.file(dir+"/class", fmt.Sprintf("0x%06x\n", d.Class))
	t.file(dir+"/revision", fmt.Sprintf("0x%02x\n", d.Rev))
	t.file(dir+"/numa_node", fmt.Sprintf("%d\n", numa))
	t.file(dir+"/local_cpulist", b.cpus(numa).String()+"\n")
	t.file(dir+"/local_cpus", b.cpus(numa).Mask(b.ncpus)+"\n")
	t.file(dir+"/driver_override", "(null)\n")
	t.file(dir+"/enable", map[bool]string{true: "1\n", false: "0\n"}[d.Driver != ""])
	t.file(dir+"/irq", "0\n")
	t.file(dir+"/d3cold_allowed", map[bool]string{true: "0\n", false: "1\n"}[d.NoPM])
	power := d.PowerState
	if power == "" {
		power = map[bool]string{true: "D0", false: "unknown"}[d.Driver != ""]
	}
	t.file(dir+"/power_state", power+"\n")
	t.file(dir+"/broken_parity_status", "0\n")
	t.file(dir+"/msi_bus", "1\n")
	t.file(dir+"/ari_enabled", "0\n")
	t.file(dir+"/remove", "")
	t.file(dir+"/rescan", "")
	t.file(dir+"/modalias", modalias(d)+"\n")
	t.file(dir+"/uevent", uevent(a, d))
	t.file(dir+"/resource", resource(d))
	t.file(dir+"/config", string(config(d, bus, multifunction)))
	t.dir(dir + "/power")
	t.link(dir+"/subsystem", "/sys/bus/pci")
	t.link("/sys/bus/pci/devices/"+a.String(), dir)
	if d.Speed != "" {
		maxSpeed, maxWidth := d.MaxSpeed, d.MaxWidth
		if maxSpeed == "" {
			maxSpeed = d.Speed
		}
		switch maxWidth {
		case 0:
			maxWidth = d.Width
		case NoWidth:
			maxWidth = 0
		}
		t.file(dir+"/current_link_speed", d.Speed+"\n")
		t.file(dir+"/current_link_width", fmt.Sprintf("%d\n", d.Width))
		t.file(dir+"/max_link_speed", maxSpeed+"\n")
		t.file(dir+"/max_link_width", fmt.Sprintf("%d\n", maxWidth))
	}
	if d.AER {
		t.file(dir+"/aer_dev_correctable", aerCounts(aerCorrectable, "TOTAL_ERR_COR"))
		t.file(dir+"/aer_dev_fatal", aerCounts(aerUncorrectable, "TOTAL_ERR_FATAL"))
		t.file(dir+"/aer_dev_nonfatal", aerCounts(aerUncorrectable, "TOTAL_ERR_NONFATAL"))
	}
	switch reset := d.ResetMethod; {
	case reset == NoReset:
	case reset != "":
		t.file(dir+"/reset_method", reset+"\n")
	case d.Speed != "":
		t.file(dir+"/reset_method", "flr bus\n")
	}
	if d.Driver != "" {
		drv := b.driver(d.Driver)
		t.link(dir+"/driver", drv)
		t.link(drv+"/"+a.String(), dir)
	}
	if b.m.IOMMU && d.Group != NoGroup {
		g := fmt.Sprintf("/sys/kernel/iommu_groups/%d", d.Group)
		t.link(dir+"/iommu_group", g)
		t.link(g+"/devices/"+a.String(), dir)
		b.groups[d.Group] = append(b.groups[d.Group], d.Reserved...)
	}
	for _, bar := range d.BARs {
		switch {
		case bar.Index < 6:
			t.file(fmt.Sprintf("%s/resource%d", dir, bar.Index), "")
		case bar.Index == 6:
			t.file(dir+"/rom", "")
		}
	}
	if d.RDMA != "" {
		t.file(dir+"/infiniband/"+d.RDMA+"/node_type", "1: CA\n")
	}
	if d.Driver == "nvidia" && d.Class>>16 == 0x03 {
		b.gpus = append(b.gpus, placed{addr: a, dev: d, path: dir})
	}
	if d.VGPUTypes != "" {
		t.file(dir+"/nvidia/creatable_vgpu_types", d.VGPUTypes)
		t.file(dir+"/nvidia/current_vgpu_type", fmt.Sprintf("%d\n", d.VGPUType))
	}
	if len(d.VirtFns) > 0 || d.TotalVFs > 0 {
		t.file(dir+"/sriov_totalvfs", fmt.Sprintf("%d\n", max(d.TotalVFs, len(d.VirtFns))))
		t.file(dir+"/sriov_numvfs", fmt.Sprintf("%d\n", len(d.VirtFns)))
		for i, vf := range d.VirtFns {
			if err := b.device(parentDir, domain, bus, numa, vf, false); err != nil {
				return err
			}
			vdir := parentDir + "/" + pci.Address{Domain: domain, Bus: bus, Device: vf.Slot, Function: vf.Func}.String()
			t.link(vdir+"/physfn", dir)
			t.link(fmt.Sprintf("%s/virtfn%d", dir, i), vdir)
		}
	}
	if d.Class>>8 == 0x0604 {
		t.file(dir+"/secondary_bus_number", fmt.Sprintf("%d\n", d.Secondary))
		t.file(dir+"/subordinate_bus_number", fmt.Sprintf("%d\n", subordinate(d)))
		b.pciBus(dir, domain, d.Secondary, numa)
		if err := b.devices(dir, domain, d.Secondary, numa, d.Children); err != nil {
			return err
		}
	} else if len(d.Children) > 0 {
		return fmt.Errorf("device %s has children but is not a bridge (class 0x%06x)", a, d.Class)
	}
	return nil
}

// driver writes a driver's directory, with the link to its module unless it is built
// in, and returns its path.
func (b *builder) driver(name string) string {
	drv := "/sys/bus/pci/drivers/" + name
	for _, f := range []string{"bind", "unbind", "new_id", "remove_id", "uevent"} {
		b.t.file(drv+"/"+f, "")
	}
	module, ok := b.m.DriverModules[name]
	if !ok {
		if module, ok = knownModules[name]; !ok {
			module = strings.ReplaceAll(name, "-", "_")
		}
	}
	if module != "" {
		b.t.dir("/sys/module/" + module)
		b.t.link(drv+"/module", "/sys/module/"+module)
	}
	return drv
}

// iommuGroups writes each group's type and reserved regions: the MSI window and what
// its devices reserve, in address order without repeats.
func (b *builder) iommuGroups() {
	typ := b.m.IOMMUType
	if typ == "" {
		typ = "identity"
	}
	for g, regions := range b.groups {
		regions = append(slices.Clone(regions), msiWindow)
		slices.Sort(regions)
		dir := fmt.Sprintf("/sys/kernel/iommu_groups/%d", g)
		b.t.file(dir+"/type", typ+"\n")
		b.t.file(dir+"/reserved_regions", strings.Join(slices.Compact(regions), "\n")+"\n")
	}
}

// subordinate is the highest bus number below a bridge.
func subordinate(d Device) uint8 {
	hi := d.Secondary
	for _, c := range d.Children {
		if c.Class>>8 == 0x0604 {
			hi = max(hi, subordinate(c))
		}
	}
	return hi
}

func modalias(d Device) string {
	return fmt.Sprintf("pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X",
		d.Vendor, d.Device, d.SubVendor, d.SubDevice, d.Class>>16, d.Class>>8&0xff, d.Class&0xff)
}

func uevent(a pci.Address, d Device) string {
	var s strings.Builder
	if d.Driver != "" {
		fmt.Fprintf(&s, "DRIVER=%s\n", d.Driver)
	}
	fmt.Fprintf(&s, "PCI_CLASS=%X\nPCI_ID=%04X:%04X\nPCI_SUBSYS_ID=%04X:%04X\nPCI_SLOT_NAME=%s\nMODALIAS=%s\n",
		d.Class, d.Vendor, d.Device, d.SubVendor, d.SubDevice, a, modalias(d))
	return s.String()
}

// resource writes the kernel's "start end flags" lines: 13 for an endpoint (6 BARs,
// the ROM, 6 SR-IOV BARs), 17 for a bridge, whose last 4 are its windows (I/O, memory,
// prefetchable memory, and one the kernel leaves unused), each the span of what the
// devices below it were given, as the kernel sizes them (4 KiB and 1 MiB granules).
func resource(d Device) string {
	n := 13
	if d.Class>>8 == 0x0604 {
		n = 17
	}
	lines := make([][3]uint64, n)
	for _, bar := range d.BARs {
		end := bar.Start + bar.Size - 1
		if bar.Start == 0 {
			end = bar.Size - 1
		}
		lines[bar.Index] = [3]uint64{bar.Start, end, bar.Flags}
	}
	if n == 17 {
		var w windows
		w.below(d.Children)
		for i, win := range w {
			if win.end != 0 {
				lines[13+i] = [3]uint64{win.start, win.end, win.flags}
			}
		}
	}
	var s strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&s, "0x%016x 0x%016x 0x%016x\n", l[0], l[1], l[2])
	}
	return s.String()
}

// windows are a bridge's I/O, memory and prefetchable memory windows.
type windows [3]struct{ start, end, flags uint64 }

// Window flags as sysfs prints a bridge's windows: I/O, memory, and 64-bit prefetchable
// memory (the low bit is the bridge's "64-bit prefetchable range" type).
const (
	winIO     = 0x100
	winMem    = 0x200
	winPref64 = 0x102201
)

// below widens the windows to hold the assigned BARs of devices and everything under them.
func (w *windows) below(devices []Device) {
	for _, c := range devices {
		for _, bar := range c.BARs {
			if bar.Start == 0 || bar.Flags&Unset != 0 {
				continue
			}
			i, grain, flags := 1, uint64(1<<20), uint64(winMem)
			switch {
			case bar.Index == 6: // the kernel places ROMs in the memory window
			case bar.Flags&0x100 != 0:
				i, grain, flags = 0, 1<<12, winIO
			case bar.Flags&0x2000 != 0:
				i, flags = 2, winPref64
			}
			w.add(i, bar.Start&^(grain-1), (bar.Start+bar.Size+grain-1)&^(grain-1)-1, flags)
		}
		w.below(c.Children)
	}
}

func (w *windows) add(i int, start, end, flags uint64) {
	if w[i].end == 0 || start < w[i].start {
		w[i].start = start
	}
	w[i].end = max(w[i].end, end)
	w[i].flags = flags
}

// config writes the identity part of config space and zeros for the rest: ids,
// revision, class, header type (with the multi-function bit) and, for a bridge, its bus
// numbers, for anything else its subsystem ids. It is 4096 bytes for PCIe, 256 for
// conventional PCI, unless ConfigSize says otherwise.
func config(d Device, bus uint8, multifunction bool) []byte {
	n := d.ConfigSize
	switch {
	case n > 0:
	case d.Speed != "":
		n = 4096
	default:
		n = 256
	}
	c := make([]byte, max(n, 64))
	le16 := func(off int, v uint16) { c[off], c[off+1] = byte(v), byte(v>>8) }
	le16(0, d.Vendor)
	le16(2, d.Device)
	c[8] = d.Rev
	c[9], c[10], c[11] = byte(d.Class), byte(d.Class>>8), byte(d.Class>>16)
	if multifunction {
		c[0x0e] = 0x80
	}
	if len(c) > 0x100 {
		copy(c[0x100:], d.ExtConfig)
	}
	if len(d.Caps) > 0 {
		copy(c[0x40:], d.Caps)
		c[0x06] |= 0x10
		c[0x34] = 0x40
	}
	if d.Class>>8 == 0x0604 {
		c[0x0e] |= 0x01 // header type 1: bridge
		c[0x18], c[0x19], c[0x1a] = bus, d.Secondary, subordinate(d)
	} else {
		le16(0x2c, d.SubVendor)
		le16(0x2e, d.SubDevice)
	}
	return c
}

// nvidia writes what the nvidia driver shows once loaded: one information file per GPU it
// drives, with device minors numbered in address order as it probes them.
func (b *builder) nvidia() {
	if b.m.NvidiaVersion == "" {
		return
	}
	v := b.m.NvidiaVersion
	b.t.file("/proc/driver/nvidia/version", fmt.Sprintf(
		"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Oct  9 21:29:00 UTC 2025\nGCC version:  gcc version 14.2.0 (Debian 14.2.0-19)\n", v))
	b.t.file("/proc/driver/nvidia/params", "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n")
	b.t.file("/sys/module/nvidia/version", v+"\n")
	slices.SortFunc(b.gpus, func(x, y placed) int { return x.addr.Compare(y.addr) })
	for minor, g := range b.gpus {
		model := g.dev.Model
		if model == "" {
			model = "NVIDIA Graphics Device"
		}
		b.t.file(fmt.Sprintf("/proc/driver/nvidia/gpus/%s/information", g.addr), fmt.Sprintf(
			"Model: \t\t %s\nIRQ:   \t\t %d\nGPU UUID: \t GPU-%08x-%04x-%04x-%04x-%012x\nVideo BIOS: \t 98.02.52.00.02\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Firmware: \t %s\nGPU Excluded:\t No\n",
			model, 180+minor, 0x5e1a0000|uint32(g.addr.Bus), 0x2bb1, 0x4c6e, 0x9a00|uint16(minor), 0x3f52a0d10000+uint64(g.addr.Bus), g.addr, minor, v))
	}
}

func (b *builder) processes() {
	for _, p := range b.m.Processes {
		dir := fmt.Sprintf("/proc/%d", p.PID)
		b.t.file(dir+"/comm", p.Comm+"\n")
		b.t.file(dir+"/cmdline", strings.Join(p.Cmdline, "\x00")+"\x00")
		b.t.file(dir+"/cgroup", "0::"+p.Cgroup+"\n")
		b.t.file(dir+"/status", fmt.Sprintf("Name:\t%s\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\n", p.Comm, p.PID, p.PID))
		b.t.links[strings.TrimPrefix(dir+"/fd/0", "/")] = "/dev/null"
		for i, f := range p.Files {
			b.t.links[strings.TrimPrefix(fmt.Sprintf("%s/fd/%d", dir, i+3), "/")] = f
		}
	}
}

// WriteDir writes the tree under dir, which must exist.
func (t *Tree) WriteDir(dir string) error {
	for _, p := range t.sorted() {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		var err error
		switch {
		case t.dirs[p]:
			err = os.MkdirAll(full, 0o755)
		case t.links[p] != "":
			err = os.Symlink(t.links[p], full)
		default:
			err = os.WriteFile(full, t.files[p], 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// WriteArchive writes the tree as a gzip-compressed tar archive, the snapshot format
// --root reads. The output depends only on the tree: members are sorted and dated 0.
func (t *Tree) WriteArchive(w io.Writer) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	epoch := time.Unix(0, 0)
	for _, p := range t.sorted() {
		hdr := &tar.Header{Name: p, ModTime: epoch, Mode: 0o644, Format: tar.FormatPAX}
		switch {
		case t.dirs[p]:
			hdr.Typeflag, hdr.Mode, hdr.Name = tar.TypeDir, 0o755, p+"/"
		case t.links[p] != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, t.links[p], 0o777
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(t.files[p]))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(t.files[p]); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// Archive returns WriteArchive's bytes.
func (t *Tree) Archive() ([]byte, error) {
	var buf bytes.Buffer
	err := t.WriteArchive(&buf)
	return buf.Bytes(), err
}

func (t *Tree) sorted() []string {
	var all []string
	for p := range t.files {
		all = append(all, p)
	}
	for p := range t.links {
		all = append(all, p)
	}
	for p := range t.dirs {
		all = append(all, p)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// Open lays the machine out in dir, which must exist, and returns the host rooted there.
func (m Machine) Open(dir string) (*host.Host, error) {
	tree, err := m.Build()
	if err != nil {
		return nil, err
	}
	if err := tree.WriteDir(dir); err != nil {
		return nil, err
	}
	return host.Open(dir)
}

// The errors the kernel counts per device (drivers/pci/pcie/aer.c,
// aer_correctable_error_string and aer_uncorrectable_error_string), in the order its
// aer_dev_* files list them: those of Debian 12's kernel, as the QEMU tests' guests
// show them (testdata/vm).
var (
	aerCorrectable   = []string{"RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF"}
	aerUncorrectable = []string{"Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF", "MalfTLP", "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr", "PoisonTLPBlocked", "DMWrReqBlocked", "IDECheck", "MisIDETLP", "PCRC_CHECK", "TLPXlatBlocked"}
)

// aerCounts is an aer_dev_* file with no error counted.
func aerCounts(names []string, total string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n + " 0\n")
	}
	return b.String() + total + " 0\n"
}
