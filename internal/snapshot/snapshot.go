// Package snapshot captures what gpusplit reads from a host into a .tar.gz archive that
// --root reads back: the PCI parts of sysfs with their links, IOMMU groups, NUMA nodes,
// the nvidia driver's procfs, the processes holding GPUs, the kernel log, and the boot
// and Proxmox files gpusplit looks at. Nothing else goes in: never /etc/pve/priv, never
// keys, of a guest config only the keys gpusplit reads (with the secrets in args
// redacted), of a process only its program's name, of /etc/gpusplit only split.toml;
// the kernel command line, wherever it is captured, with its secrets redacted.
// What it leaves out of the files it captures it reports, without the values.
package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/plural"
)

// deviceFiles are the attributes of a PCI device directory that are captured.
var deviceFiles = []string{
	"vendor", "device", "subsystem_vendor", "subsystem_device", "class", "revision",
	"numa_node", "local_cpulist", "local_cpus", "current_link_speed", "current_link_width",
	"max_link_speed", "max_link_width", "resource", "driver_override", "enable", "irq",
	"modalias", "uevent", "reset_method", "d3cold_allowed", "power_state", "boot_vga",
	"broken_parity_status", "msi_bus", "ari_enabled", "secondary_bus_number",
	"subordinate_bus_number", "sriov_numvfs", "sriov_totalvfs", "sriov_offset",
	"sriov_stride", "sriov_vf_device", "sriov_drivers_autoprobe", "label", "index",
	"acpi_index", "config", "aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal",
	// NVIDIA's vGPU manager on a virtual function (kernels since 6.8): the type it
	// carries and those it can take.
	"nvidia/current_vgpu_type", "nvidia/creatable_vgpu_types",
}

// deviceLinks are the links of a device directory that are captured, with their targets.
var deviceLinks = []string{"driver", "iommu_group", "physfn", "subsystem"}

// writeOnly are attributes the kernel lets nobody read; they are captured as empty files
// so that a snapshot shows they exist.
var writeOnly = []string{
	"bind", "unbind", "new_id", "remove_id", "drivers_probe",
	"rescan", "remove", "reset",
}

// Summary says what went into a snapshot.
type Summary struct {
	Root        string   `json:"root"`
	Files       int      `json:"files"`
	Links       int      `json:"links"`
	Directories int      `json:"directories"`
	Bytes       int64    `json:"bytes"`      // contents, uncompressed
	Unreadable  []string `json:"unreadable"` // paths that exist but may not be read (root may)
	// Refused are the paths left out for what they are, whoever runs: a file over its
	// size cap, a FIFO or device where a file belongs; "path: reason".
	Refused      []string `json:"refused"`
	ArchiveBytes int64    `json:"archive_bytes"` // the .tar.gz as written
	// Redacted are the captured files that lost lines or values on the way, in path
	// order; FilesLeftOut the files beside captured ones (in /etc/gpusplit and
	// /etc/pve/mapping) that gpusplit does not read and the snapshot does not hold.
	Redacted     []Redaction `json:"redacted"`
	FilesLeftOut []string    `json:"files_left_out"`
}

// capture collects entries before writing, so the archive is sorted and deterministic.
type capture struct {
	h       *host.Host
	files   map[string][]byte
	links   map[string]string
	dirs    map[string]bool
	bad     []string
	refused []string
	// redacted is what was left out of captured files, by path; leftOut the files left out.
	redacted map[string]Redaction
	leftOut  []string
	// bytes and entries are what the archive holds as its reader counts them (see
	// fits); counted the directories already counted, full the files left out for want
	// of room.
	bytes, entries int64
	counted        map[string]bool
	full           int
	cfg            Files
}

// Files are the files of gpusplit's and Proxmox's configuration that a snapshot keeps.
// The packages that read them own their names (plan, pve); the caller passes them in.
type Files struct {
	SplitConfig string   // the desired split (plan.DefaultConfig): the one file kept of its directory
	Mapping     string   // the PCI mappings (pve.MappingPath): the one file kept of its directory
	Members     string   // the cluster's members (pve.MembersPath), reduced to the nodes
	Storage     string   // the storages (pve.StoragePath), reduced to those that hold snippets
	Whole       []string // files kept as they are: HA resources, rules and groups, replication
}

// Capture reads h and writes the snapshot archive to w, with the configuration files f.
func Capture(h *host.Host, w io.Writer, f Files) (*Summary, error) {
	c := &capture{h: h, cfg: f, files: map[string][]byte{}, links: map[string]string{}, dirs: map[string]bool{}, redacted: map[string]Redaction{}, counted: map[string]bool{"/": true}}
	if err := c.pci(); err != nil {
		return nil, err
	}
	// Proxmox's and gpusplit's files before the rest: they are what a snapshot that
	// fills up (a crafted root) most needs.
	c.etc()
	c.processes()
	c.system()
	if c.full > 1 {
		c.refused = append(c.refused, fmt.Sprintf("and %s left out: the snapshot was full", plural.N(c.full-1, "more entry", "more entries")))
	}
	s := &Summary{Root: h.Root(), Unreadable: c.bad, Refused: c.refused, Redacted: []Redaction{}, FilesLeftOut: c.leftOut}
	if s.Unreadable == nil {
		s.Unreadable = []string{}
	}
	if s.Refused == nil {
		s.Refused = []string{}
	}
	for _, p := range slices.Sorted(maps.Keys(c.redacted)) {
		s.Redacted = append(s.Redacted, c.redacted[p])
	}
	if s.FilesLeftOut == nil {
		s.FilesLeftOut = []string{}
	}
	cw := &countingWriter{w: w}
	if err := c.write(cw, s); err != nil {
		return nil, err
	}
	s.ArchiveBytes = cw.n
	return s, nil
}

// pci captures every PCI device, its bridges and host bridge, drivers, groups and buses.
func (c *capture) pci() error {
	names, err := c.h.ReadDir("/sys/bus/pci/devices")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("nothing to capture: %s has no /sys/bus/pci/devices (is it a Linux machine's root?)", c.h.Root())
		}
		return err
	}
	c.dir("/sys/bus/pci/devices")
	devDirs := map[string]bool{}
	for _, n := range names {
		p := "/sys/bus/pci/devices/" + n
		if !c.link(p) {
			continue
		}
		real, err := c.h.Realpath(p)
		if err != nil {
			c.unreadable(p, err)
			continue
		}
		devDirs[real] = true
	}
	for _, d := range slices.Sorted(maps.Keys(devDirs)) {
		c.device(d)
		// The host bridge and the bridges above are captured as devices too; the host
		// bridge's own directory holds its pci_bus.
		if hb := hostBridgeDir(d); hb != "" {
			c.pciBuses(hb)
		}
	}
	for _, f := range []string{"drivers_autoprobe", "drivers_probe", "rescan"} {
		c.file("/sys/bus/pci/" + f)
	}
	// A driver's directory holds links to its devices and files nobody may read (bind,
	// unbind, new_id, remove_id, uevent): those are kept as empty files.
	c.each("/sys/bus/pci/drivers", func(drv string) {
		c.each(drv, func(p string) {
			if !c.link(p) {
				if kind, _, err := c.h.Lstat(p); err == nil && kind == host.File {
					c.put(p, nil)
				}
			}
		})
	})
	c.each("/sys/class/pci_bus", func(p string) { c.link(p) })
	c.each("/sys/kernel/iommu_groups", func(g string) {
		c.file(g + "/type")
		c.file(g + "/reserved_regions")
		c.each(g+"/devices", func(p string) { c.link(p) })
	})
	return nil
}

// device captures one device directory.
func (c *capture) device(dir string) {
	c.dir(dir)
	// The directories Proxmox looks for to tell a device that offers mediated devices
	// or NVIDIA's vGPU (pci_device_info), empty or not.
	for _, d := range []string{"nvidia", "mdev_supported_types"} {
		if c.h.IsDir(dir + "/" + d) {
			c.dir(dir + "/" + d)
		}
	}
	for _, f := range deviceFiles {
		c.file(dir + "/" + f)
	}
	for _, l := range deviceLinks {
		c.link(dir + "/" + l)
	}
	if names, err := c.h.ReadDir(dir); err == nil {
		for _, n := range names {
			if strings.HasPrefix(n, "virtfn") {
				c.link(dir + "/" + n)
			}
		}
	}
	// RDMA ports (as nvidia-smi lists NICs) and vfio character devices are named by
	// their directories.
	c.each(dir+"/infiniband", func(p string) { c.dir(p) })
	c.each(dir+"/vfio-dev", func(p string) { c.dir(p) })
	c.pciBuses(dir)
}

// pciBuses captures the pci_bus directories below a bridge or host bridge.
func (c *capture) pciBuses(dir string) {
	c.each(dir+"/pci_bus", func(b string) {
		c.dir(b)
		c.file(b + "/cpuaffinity")
		c.file(b + "/cpulistaffinity")
		c.link(b + "/device")
		c.link(b + "/subsystem")
	})
}

// system captures NUMA nodes, CPUs, modules and the kernel's own files.
func (c *capture) system() {
	for _, f := range []string{"online", "possible", "has_cpu", "has_memory", "has_normal_memory"} {
		c.file("/sys/devices/system/node/" + f)
	}
	c.each("/sys/devices/system/node", func(p string) {
		if strings.HasPrefix(path.Base(p), "node") {
			c.file(p + "/cpulist")
			c.file(p + "/cpumap")
		}
	})
	c.file("/sys/devices/system/cpu/online")
	c.file("/sys/devices/system/cpu/possible")
	// The firmware's names for the doctor's firmware report; the serial numbers and
	// UUIDs beside them stay out.
	for _, f := range []string{"sys_vendor", "product_name", "board_vendor", "board_name", "bios_vendor", "bios_version", "bios_date"} {
		c.file("/sys/class/dmi/id/" + f)
	}
	c.each("/sys/class/iommu", func(p string) { c.link(p) })
	for _, m := range []string{"nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "vfio", "vfio_pci", "vfio_pci_core", "vfio_iommu_type1", "kvm", "kvm_amd", "kvm_intel", "pcie_aspm"} {
		dir := "/sys/module/" + m
		c.file(dir + "/version")
		c.each(dir+"/parameters", func(p string) { c.file(p) })
	}
	// The command line's secrets are redacted, here and in the kernel log (cmdline.go).
	c.reduced("/proc/cmdline", reduceCmdline)
	for _, f := range []string{"/proc/devices", "/proc/cpuinfo", "/proc/version", "/proc/sys/kernel/hostname", "/proc/modules"} {
		c.file(f)
	}
	c.tree("/proc/driver/nvidia", 4)
	log, err := c.h.KernelLog()
	if log != nil {
		var r Redaction
		log, r = redactKernelLog(host.KernelLogPath, log)
		c.note(r)
	}
	switch {
	case err == nil:
		c.put(host.KernelLogPath, log)
	case errors.Is(err, host.ErrLogCut):
		// The live log past its cap: its first part is kept, and said to be.
		c.put(host.KernelLogPath, log)
		c.refused = append(c.refused, fmt.Sprintf("%s: %v", host.KernelLogPath, err))
	case errors.Is(err, fs.ErrNotExist):
	default:
		c.unreadable(host.KernelLogPath, err)
	}
}

// processes captures the processes that hold a GPU's device node open: their name,
// cgroup (which Proxmox guest) and those open files. Arguments stay out: they can hold
// secrets. So does argv[0] but for its program's name (programName), and only where
// that name begins with comm, the kernel's copy of the executable's file name (cut at
// 15 characters): a process may rewrite argv[0] into a title holding anything
// ("postgres: app password=…"), and where it agrees with no file name it goes too.
func (c *capture) processes() {
	pids, err := c.h.ReadDir("/proc")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.unreadable("/proc", err)
		}
		return
	}
	for _, pid := range pids {
		if strings.Trim(pid, "0123456789") != "" {
			continue
		}
		dir := "/proc/" + pid
		fds, err := c.h.ReadDir(dir + "/fd")
		if err != nil {
			continue
		}
		var held []string
		for _, fd := range fds {
			t, err := c.h.Readlink(dir + "/fd/" + fd)
			if err == nil && (strings.HasPrefix(t, "/dev/nvidia") || strings.HasPrefix(t, "/dev/vfio/")) {
				held = append(held, fd)
				c.putLink(dir+"/fd/"+fd, t)
			}
		}
		if len(held) == 0 {
			continue
		}
		c.file(dir + "/comm")
		c.file(dir + "/cgroup")
		c.cmdline(dir)
	}
}

// cmdline captures a process's argv[0] reduced to its program's name, and notes what
// went: the arguments, and argv[0] where it was more than that name.
func (c *capture) cmdline(dir string) {
	b, err := c.h.ReadFile(dir + "/cmdline")
	if err != nil || strings.Trim(string(b), "\x00") == "" {
		return // a kernel thread or a zombie: nothing to keep
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	r := Redaction{File: dir + "/cmdline", LeftOut: map[string]int{}, Replaced: map[string]int{}}
	if len(args) > 1 {
		r.LeftOut["arguments"] = len(args) - 1
	}
	comm, _ := c.h.ReadString(dir + "/comm")
	prog := programName(args[0])
	if prog == "" || comm == "" || !strings.HasPrefix(prog, comm) {
		r.LeftOut["argv[0]"] = 1
	} else {
		c.put(dir+"/cmdline", []byte(prog+"\x00"))
		if prog != args[0] {
			r.Replaced["argv[0]"] = 1 // by its program's name
		}
	}
	c.note(r)
}

// etc captures the boot configuration and the Proxmox files gpusplit reads.
func (c *capture) etc() {
	for _, f := range []string{"/etc/hostname", "/etc/kernel/proxmox-boot-uuids", "/etc/modules"} {
		c.file(f)
	}
	// The kernel command lines the boot configuration gives, with their secrets
	// redacted as /proc/cmdline's are (cmdline.go).
	c.reduced("/etc/kernel/cmdline", reduceCmdline)
	c.reduced("/etc/default/grub", reduceGrub)
	c.each("/etc/default/grub.d", func(p string) { c.reduced(p, reduceGrub) })
	for _, d := range []string{"/etc/modprobe.d", "/etc/modules-load.d"} {
		c.each(d, func(p string) { c.file(p) })
	}
	// Of /etc/gpusplit and /etc/pve/mapping only the file gpusplit reads: the others
	// (usb.cfg, dir.cfg, whatever an administrator keeps beside split.toml) are not its
	// business. pci.cfg is kept whole: every line of it is read, its descriptions are
	// written back by pve sync, and Proxmox shows them to anyone who may see the mapping.
	for _, f := range []string{c.cfg.SplitConfig, c.cfg.Mapping} {
		if f != "" {
			c.only(path.Dir(f), path.Base(f))
		}
	}
	// The guest configs of every node, and the links that point at this node's.
	for _, l := range []string{"/etc/pve/local", "/etc/pve/qemu-server", "/etc/pve/lxc"} {
		c.link(l)
	}
	c.each("/etc/pve/nodes", func(node string) {
		for _, kind := range []string{"qemu-server", "lxc"} {
			c.each(node+"/"+kind, func(p string) {
				if strings.HasSuffix(p, ".conf") {
					c.guest(p)
				}
			})
		}
	})
	c.file("/run/qemu-server/pci-id-reservations")
	// The GPUs a VM's stop quarantined, with the evidence: status and doctor name them.
	c.each(health.Dir, func(p string) {
		if strings.HasSuffix(p, ".json") {
			c.file(p)
		}
	})
	// Each guest's last hand-off, which metrics reports.
	c.each(hook.HandOffDir, func(p string) {
		if strings.HasSuffix(p, ".json") {
			c.file(p)
		}
	})
	// What pve cluster and pve hook read of the cluster, reduced to that.
	if c.cfg.Members != "" {
		c.reduced(c.cfg.Members, reduceMembers)
	}
	if c.cfg.Storage != "" {
		c.reduced(c.cfg.Storage, reduceStorage)
	}
	for _, f := range c.cfg.Whole {
		c.file(f)
	}
}

// reduced captures a file through reduce, noting what it left out.
func (c *capture) reduced(p string, reduce func(string, []byte) ([]byte, Redaction)) {
	if b, ok := c.read(p); ok {
		b, r := reduce(p, b)
		c.note(r)
		if b != nil {
			c.put(p, b)
		}
	}
}

// only captures the file name of dir, and notes every other entry of dir as left out.
func (c *capture) only(dir, name string) {
	names, err := c.h.ReadDir(dir)
	if err != nil {
		return
	}
	c.dir(dir)
	for _, n := range names {
		if n == name {
			c.file(dir + "/" + n)
		} else {
			c.leftOut = append(c.leftOut, dir+"/"+n)
		}
	}
}

// guest captures a VM or container config reduced to what gpusplit reads.
func (c *capture) guest(p string) {
	if b, ok := c.read(p); ok {
		var r Redaction
		b, r = reduceGuest(p, b)
		c.note(r)
		c.put(p, b)
	}
}

// note keeps a redaction that left something out.
func (c *capture) note(r Redaction) {
	if !r.empty() {
		c.redacted[r.File] = r
	}
}

// file captures a regular file; a missing one is skipped, an unreadable one noted.
func (c *capture) file(p string) {
	if b, ok := c.read(p); ok {
		c.put(p, b)
	}
}

// read returns what file captures of p, and whether there is anything.
func (c *capture) read(p string) ([]byte, bool) {
	kind, _, err := c.h.Lstat(p)
	if err == nil && kind == host.Other {
		c.refused = append(c.refused, p+": not a regular file (a FIFO, device or socket)")
		return nil, false
	}
	if err != nil || kind != host.File {
		return nil, false
	}
	if slices.Contains(writeOnly, path.Base(p)) {
		return nil, true
	}
	b, err := c.h.ReadFile(p)
	if err != nil {
		c.unreadable(p, err)
		return nil, false
	}
	return b, true
}

// unreadable notes a file that could not be read: as wanting root when that is why,
// else as refused with the reason (over its cap, not a regular file, the root spent).
func (c *capture) unreadable(p string, err error) {
	if errors.Is(err, fs.ErrPermission) {
		c.bad = append(c.bad, p)
		return
	}
	var pe *host.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	c.refused = append(c.refused, fmt.Sprintf("%s: %v", p, err))
}

// link captures a symbolic link as a link; it reports whether p was one.
func (c *capture) link(p string) bool {
	kind, target, err := c.h.Lstat(p)
	if err != nil || kind != host.Link {
		return false
	}
	c.putLink(p, target)
	return true
}

func (c *capture) dir(p string) {
	if c.fits(p, 0) {
		c.dirs[p] = true
	}
}

func (c *capture) put(p string, b []byte) {
	if c.fits(p, len(b)) {
		c.files[p] = b
	}
}

func (c *capture) putLink(p, target string) {
	if c.fits(p, len(target)) {
		c.links[p] = target
	}
}

// fits reports whether an entry at p holding n bytes (a file's contents, a link's
// target) fits in the archive, and counts it when it does. The snapshot must read
// back: what it holds is counted as the archive's reader counts it against
// host.MaxArchiveBytes and host.MaxArchiveEntries (every name, each directory it
// implies once, every file's size), and what would pass either is left out and
// said to be. This also bounds what a capture holds in memory.
func (c *capture) fits(p string, n int) bool {
	if c.counted[p] {
		return true // a directory counted as implied, or an entry put again
	}
	add, entries := int64(len(p)+n), int64(1)
	var implied []string
	for d := path.Dir(p); !c.counted[d]; d = path.Dir(d) {
		implied = append(implied, d)
		add += int64(len(d))
		entries++
	}
	if c.bytes+add > host.MaxArchiveBytes || c.entries+entries > host.MaxArchiveEntries {
		if c.full == 0 {
			c.refused = append(c.refused, fmt.Sprintf("%s: left out: the snapshot would hold more than %d entries or their names and contents more than %d MiB, more than gpusplit reads of one",
				p, host.MaxArchiveEntries, host.MaxArchiveBytes>>20))
		}
		c.full++
		return false
	}
	c.bytes += add
	c.entries += entries
	c.counted[p] = true
	for _, d := range implied {
		c.counted[d] = true
	}
	return true
}

// each calls fn for every entry of dir; a missing dir is nothing to capture.
func (c *capture) each(dir string, fn func(p string)) {
	names, err := c.h.ReadDir(dir)
	if err != nil {
		return
	}
	c.dir(dir)
	for _, n := range names {
		fn(dir + "/" + n)
	}
}

// tree captures dir recursively to depth levels: files, links and directories.
func (c *capture) tree(dir string, depth int) {
	c.each(dir, func(p string) {
		kind, _, err := c.h.Lstat(p)
		switch {
		case err != nil:
		case kind == host.Link:
			c.link(p)
		case kind == host.Dir && depth > 0:
			c.tree(p, depth-1)
		case kind == host.File:
			c.file(p)
		}
	})
}

// hostBridgeDir returns the host bridge directory of a device's real path:
// /sys/devices/pci0000:00 for /sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0.
func hostBridgeDir(real string) string {
	comps := strings.Split(real, "/")
	for i := len(comps) - 1; i > 0; i-- {
		if strings.HasPrefix(comps[i], "pci") {
			return strings.Join(comps[:i+1], "/")
		}
	}
	return ""
}

func (c *capture) write(w io.Writer, s *Summary) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	all := map[string]bool{}
	for p := range c.files {
		all[p] = true
	}
	for p := range c.links {
		all[p] = true
	}
	for p := range c.dirs {
		all[p] = true
	}
	epoch := time.Unix(0, 0)
	for _, p := range slices.Sorted(maps.Keys(all)) {
		name := strings.TrimPrefix(p, "/")
		hdr := &tar.Header{Name: name, ModTime: epoch, Mode: 0o644, Format: tar.FormatPAX}
		if t, ok := c.links[p]; ok {
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, t, 0o777
			s.Links++
		} else if b, ok := c.files[p]; ok {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(b))
			s.Files++
			s.Bytes += int64(len(b))
		} else {
			hdr.Typeflag, hdr.Mode, hdr.Name = tar.TypeDir, 0o755, name+"/"
			s.Directories++
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(c.files[p]); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (cw *countingWriter) Write(b []byte) (int, error) {
	n, err := cw.w.Write(b)
	cw.n += int64(n)
	return n, err
}
