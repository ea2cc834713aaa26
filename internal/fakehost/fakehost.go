// Package fakehost lays out a host's sysfs, procfs and configuration files from a short
// description of its PCI topology, shaped like a real kernel's: device directories nested
// under their host bridge and bridges, the /sys/bus/pci/devices, driver, IOMMU group and
// pci_bus links with the relative targets the kernel uses, and the attribute files in the
// kernel's formats. Tests and the sample host behind --demo are built with it.
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
	IOMMU     bool
	Bridges   []HostBridge
	Processes []Process
	// Files and Links add anything else: "/proc/cmdline", "/etc/pve/…".
	Files map[string]string
	Links map[string]string
	// Drivers are PCI drivers that are registered whether or not they drive a device.
	Drivers []string
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
	// A device without Speed is conventional PCI and has no link files.
	Speed    string
	Width    int
	MaxSpeed string
	MaxWidth int
	BARs     []BAR
	// Secondary is the bus number a bridge leads to; Children sit on it.
	Secondary uint8
	Children  []Device
	// Model names a GPU in the nvidia driver's information file.
	Model string
	// RDMA names the device's InfiniBand/RoCE port ("mlx5_0"), for NICs.
	RDMA string
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
	rel, err := filepath.Rel(path.Dir(p), target)
	if err != nil {
		panic(err)
	}
	t.links[strings.TrimPrefix(p, "/")] = rel
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
	m     Machine
	t     *Tree
	ncpus int
	all   cpuset.Set
	nodes map[int]cpuset.Set
	seen  map[pci.Address]bool
	gpus  []placed
}

type placed struct {
	addr pci.Address
	dev  Device
	path string
}

func (b *builder) build() error {
	b.nodes = map[int]cpuset.Set{}
	b.seen = map[pci.Address]bool{}
	var all []string
	for _, n := range b.m.Nodes {
		set, err := cpuset.Parse(n.CPUs)
		if err != nil {
			return fmt.Errorf("node %d: %w", n.ID, err)
		}
		b.nodes[n.ID] = set
		all = append(all, n.CPUs)
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
	b.nvidia()
	b.processes()
	for p, body := range b.m.Files {
		b.t.file(p, body)
	}
	for p, target := range b.m.Links {
		b.t.links[strings.TrimPrefix(p, "/")] = target
	}
	return nil
}

// system writes the NUMA nodes and the PCI bus's own files.
func (b *builder) system() {
	var ids []string
	for _, n := range b.m.Nodes {
		dir := fmt.Sprintf("/sys/devices/system/node/node%d", n.ID)
		b.t.file(dir+"/cpulist", b.nodes[n.ID].String()+"\n")
		b.t.file(dir+"/cpumap", b.nodes[n.ID].Mask(b.ncpus)+"\n")
		ids = append(ids, fmt.Sprint(n.ID))
	}
	online := strings.Join(ids, ",")
	if s, err := cpuset.Parse(online); err == nil {
		online = s.String()
	}
	b.t.file("/sys/devices/system/node/online", online+"\n")
	b.t.file("/sys/devices/system/node/possible", online+"\n")
	b.t.file("/sys/devices/system/cpu/online", b.all.String()+"\n")
	b.t.file("/sys/bus/pci/drivers_autoprobe", "1\n")
	b.t.file("/sys/bus/pci/drivers_probe", "")
	b.t.file("/sys/bus/pci/rescan", "")
	b.t.dir("/sys/bus/pci/devices")
	b.t.dir("/sys/bus/pci/drivers")
	b.t.dir("/sys/bus/pci/slots")
	for _, d := range b.m.Drivers {
		b.driver(d)
	}
	if b.m.IOMMU {
		b.t.dir("/sys/kernel/iommu_groups")
	}
}

func (b *builder) hostBridge(hb HostBridge) error {
	name := fmt.Sprintf("pci%04x:%02x", hb.Domain, hb.Bus)
	dir := "/sys/devices/" + name
	b.t.file(dir+"/uevent", "")
	b.t.dir(dir + "/power")
	b.pciBus(dir, hb.Domain, hb.Bus, hb.NUMA)
	for _, d := range hb.Devices {
		if err := b.device(dir, hb.Domain, hb.Bus, hb.NUMA, d); err != nil {
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

func (b *builder) device(parentDir string, domain uint32, bus uint8, numa int, d Device) error {
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
	t.file(dir+"/d3cold_allowed", "1\n")
	t.file(dir+"/power_state", "D0\n")
	t.file(dir+"/broken_parity_status", "0\n")
	t.file(dir+"/msi_bus", "1\n")
	t.file(dir+"/remove", "")
	t.file(dir+"/rescan", "")
	t.file(dir+"/modalias", modalias(d)+"\n")
	t.file(dir+"/uevent", uevent(a, d))
	t.file(dir+"/resource", resource(d))
	t.file(dir+"/config", string(config(d)))
	t.dir(dir + "/power")
	t.link(dir+"/subsystem", "/sys/bus/pci")
	t.link("/sys/bus/pci/devices/"+a.String(), dir)
	if d.Speed != "" {
		maxSpeed, maxWidth := d.MaxSpeed, d.MaxWidth
		if maxSpeed == "" {
			maxSpeed = d.Speed
		}
		if maxWidth == 0 {
			maxWidth = d.Width
		}
		t.file(dir+"/current_link_speed", d.Speed+"\n")
		t.file(dir+"/current_link_width", fmt.Sprintf("%d\n", d.Width))
		t.file(dir+"/max_link_speed", maxSpeed+"\n")
		t.file(dir+"/max_link_width", fmt.Sprintf("%d\n", maxWidth))
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
		t.file(g+"/type", "identity\n")
		t.file(g+"/reserved_regions", "0x00000000fee00000 0x00000000feefffff msi\n")
	}
	for _, bar := range d.BARs {
		t.file(fmt.Sprintf("%s/resource%d", dir, bar.Index), "")
	}
	if d.RDMA != "" {
		t.file(dir+"/infiniband/"+d.RDMA+"/node_type", "1: CA\n")
	}
	if d.Driver == "nvidia" && d.Class>>16 == 0x03 {
		b.gpus = append(b.gpus, placed{addr: a, dev: d, path: dir})
	}
	if d.Class>>8 == 0x0604 {
		t.file(dir+"/secondary_bus_number", fmt.Sprintf("%d\n", d.Secondary))
		t.file(dir+"/subordinate_bus_number", fmt.Sprintf("%d\n", subordinate(d)))
		b.pciBus(dir, domain, d.Secondary, numa)
		for _, c := range d.Children {
			if err := b.device(dir, domain, d.Secondary, numa, c); err != nil {
				return err
			}
		}
	} else if len(d.Children) > 0 {
		return fmt.Errorf("device %s has children but is not a bridge (class 0x%06x)", a, d.Class)
	}
	return nil
}

// driver writes a driver's directory and returns its path.
func (b *builder) driver(name string) string {
	drv := "/sys/bus/pci/drivers/" + name
	for _, f := range []string{"bind", "unbind", "new_id", "remove_id", "uevent"} {
		b.t.file(drv+"/"+f, "")
	}
	return drv
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
// the ROM, 6 SR-IOV BARs), 17 for a bridge (plus its 4 windows, printed as zero).
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
	var s strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&s, "0x%016x 0x%016x 0x%016x\n", l[0], l[1], l[2])
	}
	return s.String()
}

// config writes the first 64 bytes of config space (the part any user may read) and
// zeros for the rest: 4096 bytes for PCIe, 256 for conventional PCI.
func config(d Device) []byte {
	n := 256
	if d.Speed != "" {
		n = 4096
	}
	c := make([]byte, n)
	le16 := func(off int, v uint16) { c[off], c[off+1] = byte(v), byte(v>>8) }
	le16(0, d.Vendor)
	le16(2, d.Device)
	c[8] = d.Rev
	c[9], c[10], c[11] = byte(d.Class), byte(d.Class>>8), byte(d.Class>>16)
	if d.Class>>8 == 0x0604 {
		c[0x0e] = 0x01 // header type 1: bridge
		c[0x19], c[0x1a] = d.Secondary, subordinate(d)
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
