// Package holders finds what uses a PCI device: the checks a careful administrator makes
// before taking a device from its driver. A user is a process with one of the device's
// nodes open (/dev/nvidiaN, /dev/vfio/…, /dev/dri/…, /dev/snd/…); a file system mounted
// from one of its block devices, swap on one, or LVM, md, device-mapper or ZFS built on
// one; one of its network interfaces that is up; or a running Proxmox VM or container
// whose configuration passes it through. Each holder comes with the way to release it.
//
// Everything is read through host.Host (sysfs, procfs, /run, /etc/pve), so the checks run
// unchanged on the live machine, on fixtures and on snapshots. What cannot be seen that
// way is said in the package's warnings, never guessed.
package holders

import (
	"fmt"
	"path"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/proc"
)

// Kind says what kind of user holds a device.
type Kind string

// The kinds of holders.
const (
	KindProcess   Kind = "process"   // a process with one of the device's nodes open
	KindMount     Kind = "mount"     // a file system mounted from one of its block devices
	KindSwap      Kind = "swap"      // swap on one of its block devices
	KindLVM       Kind = "lvm"       // an LVM volume group with a physical volume on it
	KindMD        Kind = "md"        // an md (software RAID) array with a member on it
	KindDM        Kind = "dm"        // another device-mapper target on it (dm-crypt, multipath…)
	KindZFS       Kind = "zfs"       // an imported ZFS pool with a vdev on it
	KindInterface Kind = "interface" // one of its network interfaces, up
	KindVM        Kind = "vm"        // a running Proxmox VM whose config passes it through
	KindContainer Kind = "container" // a running Proxmox container given one of its nodes
)

// Holder is one user of a device.
type Holder struct {
	Kind Kind
	// Process is the process of a KindProcess holder. A VM or container holder has only
	// its VM or Container set.
	proc.Process
	// Block is the device's block device under a mount, swap, LVM, md, dm or ZFS holder
	// ("nvme0n1p2").
	Block string
	// Name is what holds: the mount point, the swap device, the volume group, the md
	// array, the dm name, the pool, the interface; for a guest the config key that names
	// the device ("hostpci0", "dev0").
	Name string
	// Detail adds what the holder's name alone does not say: the dm volume a file
	// system is on, the bridge an interface is a port of, the mapping a VM uses.
	Detail string
	// Release is the way to make the holder let go.
	Release string
}

// String names the holder in a sentence: "python3 (pid 48213) in container 129",
// "/srv mounted from nvme0n1p1", "interface eth0 (up)".
func (h Holder) String() string {
	switch h.Kind {
	case KindProcess:
		s := fmt.Sprintf("%s (pid %d)", commandName(h.Process), h.PID)
		if h.Container > 0 {
			s += fmt.Sprintf(" in container %d", h.Container)
		}
		if h.VM > 0 {
			s += fmt.Sprintf(" of VM %d", h.VM)
		}
		return s
	case KindMount:
		return fmt.Sprintf("%s mounted from %s", h.Name, h.on())
	case KindSwap:
		return fmt.Sprintf("swap on %s", h.on())
	case KindLVM:
		return fmt.Sprintf("LVM volume group %s on %s", h.Name, h.Block)
	case KindMD:
		return fmt.Sprintf("md array %s on %s", h.Name, h.Block)
	case KindDM:
		return fmt.Sprintf("device-mapper %s on %s", h.Name, h.Block)
	case KindZFS:
		return fmt.Sprintf("ZFS pool %s on %s", h.Name, h.Block)
	case KindInterface:
		s := fmt.Sprintf("interface %s (up)", h.Name)
		if h.Detail != "" {
			s = fmt.Sprintf("interface %s (up, %s)", h.Name, h.Detail)
		}
		return s
	case KindVM:
		return fmt.Sprintf("running VM %d (%s)", h.VM, h.guestKey())
	case KindContainer:
		return fmt.Sprintf("running container %d (%s)", h.Container, h.guestKey())
	case KindKeep:
		return fmt.Sprintf("VM %d's %s (%s)", h.VM, h.Name, h.Detail)
	case KindVirtFns:
		if h.Detail != "" {
			return fmt.Sprintf("%s (given to %s)", h.Name, h.Detail)
		}
		return h.Name
	}
	return string(h.Kind) + " " + h.Name
}

// Short names the holder in a table cell: "python3[48213] in CT 129", "mount /srv",
// "eth0 up", "VM 131".
func (h Holder) Short() string {
	switch h.Kind {
	case KindProcess:
		s := fmt.Sprintf("%s[%d]", commandName(h.Process), h.PID)
		switch {
		case h.Container > 0:
			s += fmt.Sprintf(" in CT %d", h.Container)
		case h.VM > 0:
			s += fmt.Sprintf(" VM %d", h.VM)
		}
		return s
	case KindMount:
		return fmt.Sprintf("mount %s (%s)", h.Name, h.Block)
	case KindSwap:
		return fmt.Sprintf("swap %s", h.Block)
	case KindLVM:
		return fmt.Sprintf("LVM %s (%s)", h.Name, h.Block)
	case KindMD:
		return fmt.Sprintf("%s (%s)", h.Name, h.Block)
	case KindDM:
		return fmt.Sprintf("dm %s (%s)", h.Name, h.Block)
	case KindZFS:
		return fmt.Sprintf("zpool %s (%s)", h.Name, h.Block)
	case KindInterface:
		return h.Name + " up"
	case KindVM:
		return fmt.Sprintf("VM %d", h.VM)
	case KindContainer:
		return fmt.Sprintf("CT %d", h.Container)
	case KindKeep:
		return fmt.Sprintf("keep: VM %d", h.VM)
	case KindVirtFns:
		n, _, _ := strings.Cut(h.Name, " ")
		return n + " VFs"
	}
	return h.String()
}

// Key identifies a holder across devices: one process, mount or guest holding several
// devices is released once.
func (h Holder) Key() string {
	switch h.Kind {
	case KindProcess:
		return fmt.Sprintf("process %d", h.PID)
	case KindVM:
		return fmt.Sprintf("vm %d", h.VM)
	case KindContainer:
		return fmt.Sprintf("container %d", h.Container)
	case KindKeep:
		return fmt.Sprintf("keep vm %d %s", h.VM, h.Name)
	case KindVirtFns:
		return string(h.Kind) + " " + h.Release // the release names the device
	}
	return string(h.Kind) + " " + h.Name
}

// on is the block device a file system or swap is on, with the volume between them.
func (h Holder) on() string {
	if h.Detail != "" {
		return h.Detail + " on " + h.Block
	}
	return h.Block
}

func (h Holder) guestKey() string {
	if h.Detail != "" {
		return h.Name + ", " + h.Detail
	}
	return h.Name
}

// Program is the name of a process holder's program, as String and Short name it
// ("nvidia-persistenced", though comm cuts it at 15 characters).
func (h Holder) Program() string { return commandName(h.Process) }

// commandName is the name of a process's program. comm is cut at 15 characters
// ("nvidia-persiste"), so the program's file name is used when it starts the same way.
func commandName(p proc.Process) string {
	if len(p.Cmdline) > 0 {
		if base := path.Base(p.Cmdline[0]); strings.HasPrefix(base, p.Command) {
			return base
		}
	}
	return p.Command
}

// processRelease says how to make a process let go of a device.
func processRelease(p proc.Process) string {
	name := commandName(p)
	switch {
	case p.Container > 0:
		return fmt.Sprintf("stop container %d (pct stop %d), or the service in it", p.Container, p.Container)
	case p.VM > 0:
		return fmt.Sprintf("stop VM %d (qm stop %d)", p.VM, p.VM)
	case strings.HasPrefix(name, "nvidia-persistenced"):
		return "systemctl stop nvidia-persistenced (or nvidia-smi -pm 0 for the legacy persistence mode)"
	case strings.HasPrefix(name, "nv-fabricmanager"), strings.HasPrefix(name, "nvidia-imex"), strings.HasPrefix(name, "nv-hostengine"), strings.HasPrefix(name, "dcgm"):
		return fmt.Sprintf("stop the %s service", name)
	case name == "Xorg" || name == "gnome-shell" || name == "kwin_wayland" || name == "sddm" || name == "gdm":
		return "stop the display manager, or move the display to another GPU"
	}
	return fmt.Sprintf("stop it (kill %d) or the service that runs it", p.PID)
}

// ProcessHolder is the holder for a process found holding a device's node open.
func ProcessHolder(p proc.Process) Holder {
	return Holder{Kind: KindProcess, Process: p, Release: processRelease(p)}
}

// Device is a PCI device whose users are looked for.
type Device struct {
	Address pci.Address
	Path    string // its directory under /sys/devices, links resolved (pci.Device.Path)
	Driver  string
	// Nodes are its device nodes: /dev/nvidiaN, /dev/vfio/<group>, /dev/vfio/devices/vfioN
	// and those of DeviceNodes.
	Nodes []string
	// VirtFns are the SR-IOV virtual functions it has enabled (pci.Device.VirtFns).
	VirtFns []pci.Address
}

// Result is what Find found.
type Result struct {
	// Holders are each device's users, processes first; a device without any is absent.
	Holders map[pci.Address][]Holder
	// Warnings say what could not be checked, and so may hold a device unseen.
	Warnings []string
	// Unreadable counts the processes whose open files could not be read (other users'
	// processes, without root): one of them may hold a device unseen.
	Unreadable int
}

// Find looks for every user of devs on h.
func Find(h *host.Host, devs []Device) *Result {
	r := &Result{Holders: map[pci.Address][]Holder{}}
	if len(devs) == 0 {
		return r
	}
	r.processes(h, devs)
	b, n := newBlockScan(h), &netScan{h: h}
	for _, d := range devs {
		held, warns := b.holders(d)
		r.add(d.Address, held...)
		r.Warnings = append(r.Warnings, warns...)
		r.add(d.Address, n.interfaces(d)...)
	}
	g := newGuestScan(h)
	for _, d := range devs {
		r.add(d.Address, g.holders(d, r.Holders[d.Address])...)
		r.add(d.Address, g.keepHolders(d)...)
		r.add(d.Address, g.virtFnHolder(d)...)
	}
	r.Warnings = append(r.Warnings, g.warnings...)
	return r
}

func (r *Result) add(a pci.Address, hs ...Holder) {
	if len(hs) > 0 {
		r.Holders[a] = append(r.Holders[a], hs...)
	}
}

// processes finds the processes holding one of the devices' nodes open.
func (r *Result) processes(h *host.Host, devs []Device) {
	byNode := map[string][]pci.Address{}
	for _, d := range devs {
		for _, n := range d.Nodes {
			byNode[n] = append(byNode[n], d.Address)
		}
	}
	if len(byNode) == 0 {
		return
	}
	scan, err := proc.OpenFiles(h, func(p string) bool { return len(byNode[p]) > 0 })
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("processes: %v; holders unknown", err))
		return
	}
	for _, p := range scan.Processes {
		held := map[pci.Address]bool{}
		for _, f := range p.Files {
			for _, a := range byNode[f] {
				held[a] = true
			}
		}
		for _, d := range devs {
			if held[d.Address] {
				delete(held, d.Address) // once per device, in the order of devs
				r.add(d.Address, ProcessHolder(p))
			}
		}
	}
	r.Unreadable = scan.Unreadable
	if scan.Unreadable > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the open files of %d processes could not be read; run as root to see every holder", scan.Unreadable))
	}
}

// DeviceNodes returns the device nodes the kernel made for a device's DRM and sound class
// devices (/dev/dri/card0, /dev/dri/renderD128, /dev/snd/controlC0, /dev/snd/pcmC0D3p),
// from its sysfs directory: what a process uses the device through besides the nvidia
// and vfio nodes.
func DeviceNodes(h *host.Host, sysfsPath string) []string {
	var out []string
	names, _ := h.ReadDir(sysfsPath + "/drm")
	for _, n := range names {
		if !isDRMMinor(n) {
			continue // connectors (card0-HDMI-A-1) have no node
		}
		out = append(out, devName(h, sysfsPath+"/drm/"+n, "dri/"+n))
	}
	cards, _ := h.ReadDir(sysfsPath + "/sound")
	for _, c := range cards {
		if !strings.HasPrefix(c, "card") {
			continue
		}
		entries, _ := h.ReadDir(sysfsPath + "/sound/" + c)
		for _, e := range entries {
			if strings.HasPrefix(e, "controlC") || strings.HasPrefix(e, "pcmC") || strings.HasPrefix(e, "hwC") {
				out = append(out, devName(h, sysfsPath+"/sound/"+c+"/"+e, "snd/"+e))
			}
		}
	}
	return out
}

// isDRMMinor reports whether a drm/ entry is a minor with a node: cardN or renderDN.
func isDRMMinor(name string) bool {
	for _, p := range []string{"card", "renderD"} {
		if n, ok := strings.CutPrefix(name, p); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}

// devName returns the node of a class device from DEVNAME in its uevent, as udev and
// devtmpfs name it, or /dev/<fallback> without one.
func devName(h *host.Host, dir, fallback string) string {
	if ev, err := h.ReadString(dir + "/uevent"); err == nil {
		for _, line := range strings.Split(ev, "\n") {
			if n, ok := strings.CutPrefix(line, "DEVNAME="); ok && n != "" && !strings.Contains(n, "..") {
				return "/dev/" + strings.TrimPrefix(n, "/dev/")
			}
		}
	}
	return "/dev/" + fallback
}
