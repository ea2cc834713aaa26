package holders

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
)

// maxStack bounds how deep block devices built on block devices are followed (LVM on md
// on a partition is three): the holders links of a sane machine never loop, but a
// fixture or a snapshot may.
const maxStack = 8

// blockScan reads, once and only when a device has block devices, what they are checked
// against: the machine's block devices, its mounts, its swap, its imported ZFS pools.
type blockScan struct {
	h      *host.Host
	disks  map[string]string // /sys/block name → its directory, links resolved
	read   bool
	mounts []mount
	swaps  []string // /proc/swaps file names
	pools  map[string]bool
	zfs    bool // the zfs module is loaded
}

// blockDev is a block device: the device's own (a disk or a partition) or one built on
// them (dm, md).
type blockDev struct {
	name string // the kernel's name: nvme0n1p1, dm-0, md0
	dir  string // its sysfs directory
	dev  string // major:minor
	// base is the device's own block device beneath it: itself for a disk or partition.
	base string
	// vol names a built device for people: "pve-root" for dm-0, "md0".
	vol string
	// dmName is the device-mapper name of a dm device ("pve-root"), as /dev/mapper has it.
	dmName string
	// part marks a partition of a built device (md0p1): a holder of the device built
	// on, not one of its own.
	part bool
}

type mount struct {
	dev, point, fstype, source string
}

func newBlockScan(h *host.Host) *blockScan { return &blockScan{h: h} }

// load reads the machine-wide tables on first use.
func (b *blockScan) load() {
	if b.read {
		return
	}
	b.read = true
	b.disks = map[string]string{}
	names, _ := b.h.ReadDir("/sys/block")
	for _, n := range names {
		if real, err := b.h.Realpath("/sys/block/" + n); err == nil {
			b.disks[n] = real
		}
	}
	b.mounts = readMounts(b.h)
	b.swaps = readSwaps(b.h)
	b.zfs = b.h.Exists("/sys/module/zfs")
	b.pools = map[string]bool{}
	pools, _ := b.h.ReadDir("/proc/spl/kstat/zfs")
	for _, p := range pools {
		if b.h.IsDir("/proc/spl/kstat/zfs/" + p) {
			b.pools[p] = true
		}
	}
	for _, m := range b.mounts {
		if m.fstype == "zfs" {
			pool, _, _ := strings.Cut(m.source, "/")
			b.pools[pool] = true
		}
	}
}

// disksOf returns the disks of a device: those whose sysfs directory lies under the
// device's (nvme/nvme0/nvme0n1, host0/…/block/sda, virtio1/block/vda), and NVMe
// multipath disks (under /sys/devices/virtual/nvme-subsystem) with a path through it.
func (b *blockScan) disksOf(d Device) []blockDev {
	if d.Path == "" {
		return nil
	}
	b.load()
	var out []blockDev
	for _, name := range sortedKeys(b.disks) {
		dir := b.disks[name]
		mine := under(dir, d.Path)
		if !mine && strings.Contains(dir, "/nvme-subsystem/") {
			paths, _ := b.h.ReadDir(dir + "/multipath")
			for _, p := range paths {
				if real, err := b.h.Realpath(dir + "/multipath/" + p); err == nil && under(real, d.Path) {
					mine = true
				}
			}
		}
		if mine {
			out = append(out, b.dev(name, dir, name))
		}
	}
	return out
}

func (b *blockScan) dev(name, dir, base string) blockDev {
	bd := blockDev{name: name, dir: dir, base: base}
	bd.dev, _ = b.h.ReadString(dir + "/dev")
	if n, err := b.h.ReadString(dir + "/dm/name"); err == nil && n != "" {
		bd.dmName, bd.vol = n, n
	} else if name != base {
		bd.vol = name
	}
	return bd
}

// partitions returns a disk's partitions: the entries of its directory that have a
// partition attribute (nvme0n1p1, sda2).
func (b *blockDev) partitions(h *host.Host) []string {
	names, _ := h.ReadDir(b.dir)
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, b.name) && n != b.name && h.Exists(b.dir+"/"+n+"/partition") {
			out = append(out, n)
		}
	}
	return out
}

// holders returns the users of a device's block devices, and what could not be checked.
func (b *blockScan) holders(d Device) ([]Holder, []string) {
	disks := b.disksOf(d)
	if len(disks) == 0 {
		return nil, nil
	}
	var own []blockDev
	for _, disk := range disks {
		own = append(own, disk)
		for _, p := range disk.partitions(b.h) {
			own = append(own, b.dev(p, disk.dir+"/"+p, p))
		}
	}
	var out []Holder
	seen := map[string]bool{}
	add := func(h Holder) {
		if k := h.Key() + " " + h.Block; !seen[k] {
			seen[k] = true
			out = append(out, h)
		}
	}
	all := slices.Clone(own)
	for _, o := range own {
		for _, s := range b.stacked(o, map[string]bool{o.name: true}, 0) {
			all = append(all, s)
			if !s.part {
				add(stackHolder(b.h, s))
			}
		}
	}
	for _, bd := range all {
		for _, m := range b.mounts {
			if matches(bd, m.dev, m.source) {
				release := "umount " + m.point
				if m.point == "/" {
					release = "none while the host runs from it: it is the root file system"
				}
				add(Holder{Kind: KindMount, Name: m.point, Block: bd.base, Detail: bd.vol, Release: release})
			}
		}
		for _, s := range b.swaps {
			if matches(bd, "", s) {
				add(Holder{Kind: KindSwap, Name: s, Block: bd.base, Detail: bd.vol, Release: "swapoff " + s})
			}
		}
	}
	var unknown []string
	for _, o := range own {
		props, ok := udevProps(b.h, o.dev)
		if !ok {
			unknown = append(unknown, o.name)
			continue
		}
		if props["ID_FS_TYPE"] == "zfs_member" {
			pool := props["ID_FS_LABEL"]
			if b.pools[pool] {
				add(Holder{Kind: KindZFS, Name: pool, Block: o.name, Release: "zpool export " + pool})
			}
		}
	}
	var warns []string
	if b.zfs && len(unknown) > 0 {
		warns = append(warns, fmt.Sprintf("%s: whether ZFS uses %s cannot be told (udev has no data on it in /run/udev/data); check zpool status before moving it",
			d.Address, strings.Join(unknown, ", ")))
	}
	return out, warns
}

// stacked returns the block devices built on bd, at any depth, from the holders/
// directories (dm, md, LVM, bcache all register there), with their partitions.
func (b *blockScan) stacked(bd blockDev, seen map[string]bool, depth int) []blockDev {
	if depth >= maxStack {
		return nil
	}
	names, _ := b.h.ReadDir(bd.dir + "/holders")
	var out []blockDev
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		dir, err := b.h.Realpath("/sys/block/" + n)
		if err != nil {
			if dir, err = b.h.Realpath(bd.dir + "/holders/" + n); err != nil {
				continue
			}
		}
		s := b.dev(n, dir, bd.base)
		out = append(out, s)
		for _, p := range s.partitions(b.h) {
			ps := b.dev(p, dir+"/"+p, bd.base)
			ps.part = true
			out = append(out, ps)
		}
		out = append(out, b.stacked(s, seen, depth+1)...)
	}
	return out
}

// stackHolder describes a block device built on one of the device's: an LVM volume
// group, an md array, a dm-crypt or other device-mapper target.
func stackHolder(h *host.Host, s blockDev) Holder {
	if s.dmName != "" {
		uuid, _ := h.ReadString(s.dir + "/dm/uuid")
		switch {
		case strings.HasPrefix(uuid, "LVM-"):
			vg := lvmGroup(s.dmName)
			return Holder{Kind: KindLVM, Name: vg, Block: s.base, Detail: s.dmName,
				Release: fmt.Sprintf("vgchange -an %s (once nothing uses its volumes)", vg)}
		case strings.HasPrefix(uuid, "CRYPT-"):
			return Holder{Kind: KindDM, Name: s.dmName, Block: s.base, Release: "cryptsetup close " + s.dmName}
		case strings.HasPrefix(uuid, "mpath-"):
			return Holder{Kind: KindDM, Name: s.dmName, Block: s.base, Release: "multipath -f " + s.dmName}
		}
		return Holder{Kind: KindDM, Name: s.dmName, Block: s.base, Release: "dmsetup remove " + s.dmName}
	}
	if h.IsDir(s.dir + "/md") {
		return Holder{Kind: KindMD, Name: s.name, Block: s.base, Release: "mdadm --stop /dev/" + s.name}
	}
	return Holder{Kind: KindDM, Name: s.name, Block: s.base, Release: "stop what runs " + s.name + " (it is built on the device)"}
}

// lvmGroup returns the volume group of an LVM device-mapper name: "pve-root" is volume
// root of group pve; a '-' inside a name is written "--" ("my--vg-lv" is group my-vg).
func lvmGroup(dmName string) string {
	for i := 0; i < len(dmName); i++ {
		if dmName[i] != '-' {
			continue
		}
		if i+1 < len(dmName) && dmName[i+1] == '-' {
			i++
			continue
		}
		return strings.ReplaceAll(dmName[:i], "--", "-")
	}
	return strings.ReplaceAll(dmName, "--", "-")
}

// matches reports whether a mount's or swap's device is bd: by major:minor when the
// mount table gives one (it is 0:N for btrfs and other file systems with anonymous
// devices), else by the source's name.
func matches(bd blockDev, dev, source string) bool {
	if dev != "" && bd.dev != "" && dev == bd.dev {
		return true
	}
	switch source {
	case "/dev/" + bd.name:
		return true
	case "":
		return false
	}
	return bd.dmName != "" && source == "/dev/mapper/"+bd.dmName
}

// readMounts reads the mount table: /proc/self/mountinfo (with each mount's device
// number), or /proc/mounts where it is missing. Mounts of other mount namespaces (a
// container's own) are not in it; the container is then seen through its config.
func readMounts(h *host.Host) []mount {
	var out []mount
	if text, err := h.ReadString("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(text, "\n") {
			// id parent major:minor root mount-point options [optional…] - type source super-options
			f := strings.Fields(line)
			sep := slices.Index(f, "-")
			if len(f) < 5 || sep < 6 || sep+2 >= len(f) {
				continue
			}
			out = append(out, mount{dev: f[2], point: unescape(f[4]), fstype: f[sep+1], source: unescape(f[sep+2])})
		}
		return out
	}
	if text, err := h.ReadString("/proc/mounts"); err == nil {
		for _, line := range strings.Split(text, "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 {
				out = append(out, mount{source: unescape(f[0]), point: unescape(f[1]), fstype: f[2]})
			}
		}
	}
	return out
}

// readSwaps reads the file names of /proc/swaps.
func readSwaps(h *host.Host) []string {
	text, err := h.ReadString("/proc/swaps")
	if err != nil {
		return nil
	}
	var out []string
	for i, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); i > 0 && len(f) > 0 {
			out = append(out, unescape(f[0]))
		}
	}
	return out
}

// unescape undoes the kernel's octal escapes in mount tables: "\040" is a space.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// udevProps reads udev's database entry of a block device (/run/udev/data/bMAJ:MIN): the
// E: lines hold what blkid found on it (ID_FS_TYPE=zfs_member, ID_FS_LABEL=rpool).
func udevProps(h *host.Host, dev string) (map[string]string, bool) {
	if dev == "" {
		return nil, false
	}
	text, err := h.ReadString("/run/udev/data/b" + dev)
	if err != nil {
		return nil, false
	}
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if kv, ok := strings.CutPrefix(line, "E:"); ok {
			if k, v, ok := strings.Cut(kv, "="); ok {
				out[k] = v
			}
		}
	}
	return out, true
}

// under reports whether the sysfs path p lies inside the directory dir.
func under(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
