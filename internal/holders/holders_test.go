package holders

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// extras adds to a fakehost machine the files and links the kernel makes for block
// devices, interfaces and DRM minors, with the relative link targets sysfs uses.
type extras struct {
	files map[string]string
	links map[string]string
}

func newExtras() *extras { return &extras{files: map[string]string{}, links: map[string]string{}} }

func (e *extras) file(p, body string) { e.files[p] = body }

// link makes p a link to target, relative to p's directory as sysfs writes them.
func (e *extras) link(p, target string) {
	rel, err := filepath.Rel(path.Dir(p), target)
	if err != nil {
		panic(err)
	}
	e.links[p] = rel
}

// disk lays out a block device (a disk, or a partition when parent is its disk's
// directory) with its dev number, and its /sys/block link for a disk.
func (e *extras) disk(dir, dev string) {
	e.file(dir+"/dev", dev+"\n")
	e.file(dir+"/size", "2097152\n")
	e.link("/sys/block/"+path.Base(dir), dir)
}

func (e *extras) partition(disk, name, dev string) string {
	dir := disk + "/" + name
	e.file(dir+"/dev", dev+"\n")
	e.file(dir+"/partition", strings.TrimLeft(strings.TrimPrefix(name, path.Base(disk)), "p")+"\n")
	e.link("/sys/class/block/"+name, dir)
	return dir
}

// dm lays out a device-mapper device built on the block devices at slaves.
func (e *extras) dm(n, dev, name, uuid string, slaves ...string) string {
	dir := "/sys/devices/virtual/block/dm-" + n
	e.disk(dir, dev)
	e.file(dir+"/dm/name", name+"\n")
	e.file(dir+"/dm/uuid", uuid+"\n")
	for _, s := range slaves {
		e.link(dir+"/slaves/"+path.Base(s), s)
		e.link(s+"/holders/dm-"+n, dir)
	}
	return dir
}

// iface lays out a network interface of a device: flags and operstate as the kernel
// shows them for an interface up (0x1003) or down (0x1002).
func (e *extras) iface(devDir, name string, isUp bool, master string) {
	dir := devDir + "/net/" + name
	flags, state := "0x1002", "down"
	if isUp {
		flags, state = "0x1003", "up"
	}
	e.file(dir+"/flags", flags+"\n")
	e.file(dir+"/operstate", state+"\n")
	e.file(dir+"/address", "52:54:00:12:34:56\n")
	e.link("/sys/class/net/"+name, dir)
	if master != "" {
		bridge := "/sys/devices/virtual/net/" + master
		e.file(bridge+"/flags", "0x1003\n")
		e.file(bridge+"/operstate", "up\n")
		e.link("/sys/class/net/"+master, bridge)
		e.link(dir+"/master", bridge)
	}
}

func (e *extras) drm(devDir, name string) {
	dir := devDir + "/drm/" + name
	minor := strings.TrimLeft(name, "cardD") // card0 → 0, renderD128 → 128
	if strings.HasPrefix(name, "render") {
		minor = strings.TrimPrefix(name, "renderD")
	}
	e.file(dir+"/uevent", "MAJOR=226\nMINOR="+minor+"\nDEVNAME=dri/"+name+"\nDEVTYPE=drm_minor\n")
	e.file(dir+"/dev", "226:"+minor+"\n")
	e.link("/sys/class/drm/"+name, dir)
}

// Device directories of the test machine: all on the root bus of pci0000:00.
const (
	nvmeRoot  = "0000:00:02.0" // the root disk: LVM, swap, a mount, a ZFS vdev
	nicUp     = "0000:00:03.0" // eth0, up, a port of vmbr0
	gpuDRM    = "0000:00:04.0" // card0 and renderD128, one held open
	nvmeIdle  = "0000:00:05.0" // a disk with a partition nobody uses
	nicDown   = "0000:00:06.0" // eth1, down
	vmHost    = "0000:00:07.0" // on vfio-pci, hostpci0 of running VM 131
	vmMapped  = "0000:00:08.0" // on vfio-pci, in mapping "nics" that VM 131 uses
	nvmeMPath = "0000:00:09.0" // a path of NVMe multipath disk nvme2n1, mounted
	vmStopped = "0000:00:0a.0" // hostpci0 of VM 132, whose pid file is stale
	gpuCT     = "0000:00:0b.0" // card1, given to running container 129 with dev0
)

func devDir(addr string) string { return "/sys/devices/pci0000:00/" + addr }

func testMachine(t *testing.T) (*host.Host, []Device) {
	t.Helper()
	slot := func(addr string) uint8 {
		a, err := pci.ParseAddress(addr)
		if err != nil {
			t.Fatal(err)
		}
		return a.Device
	}
	nvme := func(addr string) fakehost.Device {
		return fakehost.Device{Slot: slot(addr), Group: int(slot(addr)), Vendor: 0x144d, Device: 0xa80a, Class: 0x010802, Driver: "nvme", Speed: "16.0 GT/s PCIe", Width: 4}
	}
	nic := func(addr, drv string) fakehost.Device {
		return fakehost.Device{Slot: slot(addr), Group: int(slot(addr)), Vendor: 0x8086, Device: 0x10d3, Class: 0x020000, Driver: drv, Speed: "2.5 GT/s PCIe", Width: 1}
	}
	vga := func(addr string) fakehost.Device {
		return fakehost.Device{Slot: slot(addr), Group: int(slot(addr)), Vendor: 0x1234, Device: 0x1111, Class: 0x030000, Driver: "bochs-drm"}
	}
	m := fakehost.Machine{
		Nodes: []fakehost.Node{{ID: 0, CPUs: "0-3"}},
		IOMMU: true,
		Bridges: []fakehost.HostBridge{{NUMA: -1, Devices: []fakehost.Device{
			nvme(nvmeRoot), nic(nicUp, "e1000e"), vga(gpuDRM), nvme(nvmeIdle), nic(nicDown, "e1000e"),
			nic(vmHost, "vfio-pci"), nic(vmMapped, "vfio-pci"), nvme(nvmeMPath), nic(vmStopped, "vfio-pci"), vga(gpuCT),
		}}},
		Processes: []fakehost.Process{
			{PID: 700, Comm: "Xorg", Cmdline: []string{"/usr/lib/xorg/Xorg", ":0"}, Cgroup: "/system.slice/display-manager.service",
				Files: []string{"/dev/dri/renderD128", "/dev/tty1"}},
			{PID: 901, Comm: "ffmpeg", Cmdline: []string{"ffmpeg", "-hwaccel", "vaapi"}, Cgroup: "/lxc/129/ns/system.slice/transcode.service",
				Files: []string{"/dev/dri/card1"}},
			{PID: 4242, Comm: "kvm", Cmdline: []string{"/usr/bin/kvm", "-id", "131"}, Cgroup: "/qemu.slice/131.scope", Files: []string{"/dev/net/tun", "/dev/vfio/7", "/dev/vfio/vfio"}},
		},
		Files: map[string]string{"/etc/hostname": "pve1\n"},
		Links: map[string]string{},
	}
	e := newExtras()

	// The root disk: p1 mounted (with a space in its mount point), p2 swap, p3 an LVM
	// physical volume whose root volume is /, p4 a vdev of the imported pool rpool.
	disk := devDir(nvmeRoot) + "/nvme/nvme0/nvme0n1"
	e.disk(disk, "259:0")
	e.partition(disk, "nvme0n1p1", "259:1")
	e.partition(disk, "nvme0n1p2", "259:2")
	p3 := e.partition(disk, "nvme0n1p3", "259:3")
	e.partition(disk, "nvme0n1p4", "259:4")
	e.dm("0", "253:0", "pve-root", "LVM-Wq3n8Yb2XvTt0pNn5ZcXyVbKlQmE9fRgH7sS2dL4uA1", p3)
	// p5 is a member of the md array md127, partitioned; its p1 is /boot.
	p5 := e.partition(disk, "nvme0n1p5", "259:9")
	md := "/sys/devices/virtual/block/md127"
	e.disk(md, "9:127")
	e.file(md+"/md/array_state", "clean\n")
	e.file(md+"/md/level", "raid1\n")
	e.link(md+"/slaves/nvme0n1p5", p5)
	e.link(p5+"/holders/md127", md)
	e.partition(md, "md127p1", "259:10")
	// p6 is opened with LUKS, nothing on it mounted: the mapping alone holds it.
	p6 := e.partition(disk, "nvme0n1p6", "259:11")
	e.dm("1", "253:1", "luks-3f1c", "CRYPT-LUKS2-3f1c9e0a5b7d4e21a0c6d8f2b4e6a8c0-luks-3f1c", p6)
	e.file("/run/udev/data/b259:4", "S:disk/by-partlabel/zfs-data\nE:ID_FS_TYPE=zfs_member\nE:ID_FS_LABEL=rpool\nE:ID_FS_USAGE=filesystem\n")
	e.file("/run/udev/data/b259:1", "E:ID_FS_TYPE=ext4\n")
	e.file("/proc/spl/kstat/zfs/rpool/state", "ONLINE\n")

	// The idle disk: a vdev of a pool that is not imported, and a partition that is an
	// inactive LVM physical volume (no holders).
	idle := devDir(nvmeIdle) + "/nvme/nvme1/nvme1n1"
	e.disk(idle, "259:5")
	e.file("/run/udev/data/b259:5", "E:ID_FS_TYPE=zfs_member\nE:ID_FS_LABEL=backup\n")
	e.partition(idle, "nvme1n1p1", "259:6")
	e.file("/run/udev/data/b259:6", "E:ID_FS_TYPE=LVM2_member\n")

	// An NVMe multipath disk: its block device is the subsystem's, one path is ours.
	head := "/sys/devices/virtual/nvme-subsystem/nvme-subsys2/nvme2n1"
	e.disk(head, "259:8")
	e.link(head+"/multipath/nvme2c2n1", devDir(nvmeMPath)+"/nvme/nvme2/nvme2c2n1")
	e.file(devDir(nvmeMPath)+"/nvme/nvme2/nvme2c2n1/dev", "259:7\n")

	e.file("/proc/self/mountinfo", strings.Join([]string{
		"22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/pve-root rw,errors=remount-ro",
		"25 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw",
		"30 22 259:1 / /mnt/data\\040disk rw,relatime shared:5 - ext4 /dev/disk/by-uuid/4c1e7b2a rw",
		"31 22 259:8 / /srv rw,relatime shared:6 - xfs /dev/nvme2n1 rw",
		"32 22 259:10 / /boot rw,relatime shared:8 - ext4 /dev/md127p1 rw",
		"40 22 0:45 / /rpool rw,noatime shared:9 - zfs rpool rw,xattr,noacl",
	}, "\n")+"\n")
	e.file("/proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/nvme0n1p2                          partition\t8388604\t\t0\t\t-2\n")

	e.iface(devDir(nicUp), "eth0", true, "vmbr0")
	e.iface(devDir(nicDown), "eth1", false, "")
	e.drm(devDir(gpuDRM), "card0")
	e.drm(devDir(gpuDRM), "renderD128")
	e.file(devDir(gpuDRM)+"/drm/card0-Virtual-1/status", "connected\n") // a connector: no node
	e.drm(devDir(gpuCT), "card1")

	// VM 131 runs (its pid is a live process); VM 132's pid file is left from a stop.
	e.file("/run/qemu-server/131.pid", "4242\n")
	e.file("/run/qemu-server/132.pid", "4343\n")
	e.file("/run/qemu-server/131.qmp", "")
	e.file("/etc/pve/nodes/pve1/qemu-server/131.conf", "boot: order=scsi0\nhostpci0: "+vmHost+",pcie=1\nhostpci1: mapping=nics,pcie=1\nmemory: 8192\n\n[snap1]\nhostpci2: "+nvmeIdle+"\n")
	e.file("/etc/pve/nodes/pve1/qemu-server/132.conf", "hostpci0: 00:0a.0\n")
	m.Links["/etc/pve/local"] = "nodes/pve1"
	m.Links["/etc/pve/qemu-server"] = "nodes/pve1/qemu-server"
	m.Links["/etc/pve/lxc"] = "nodes/pve1/lxc"
	// The mapping offers nicUp too, on e1000e: a running VM cannot have it. The entry of
	// node pve2 is another host's device.
	e.file("/etc/pve/mapping/pci.cfg", "nics\n\tmap id=8086:10d3,node=pve2,path=0000:00:0a.0\n\tmap id=8086:10d3,node=pve1,path=0000:00:03\n\tmap id=8086:10d3,node=pve1,path=0000:00:08\n\tdescription three NICs\n")

	// Container 129 runs and is given card1; 130 runs with the whole of /dev/dri
	// bind-mounted; 140 is stopped.
	e.file("/sys/fs/cgroup/lxc/129/cgroup.procs", "900\n")
	e.file("/sys/fs/cgroup/lxc/130/cgroup.procs", "901\n")
	e.file("/etc/pve/nodes/pve1/lxc/129.conf", "arch: amd64\ndev0: /dev/dri/card1,gid=44\nhostname: ct129\n")
	e.file("/etc/pve/nodes/pve1/lxc/130.conf", "arch: amd64\nlxc.mount.entry: /dev/dri dev/dri none bind,optional,create=dir\n")
	e.file("/etc/pve/nodes/pve1/lxc/140.conf", "dev0: /dev/dri/card0\n")

	for p, b := range e.files {
		m.Files[p] = b
	}
	for p, l := range e.links {
		m.Links[p] = l
	}
	h, err := m.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var devs []Device
	for _, a := range []string{nvmeRoot, nicUp, gpuDRM, nvmeIdle, nicDown, vmHost, vmMapped, nvmeMPath, vmStopped, gpuCT} {
		addr, _ := pci.ParseAddress(a)
		real, err := h.Realpath("/sys/bus/pci/devices/" + a)
		if err != nil {
			t.Fatal(err)
		}
		drv, _ := h.LinkBase(real + "/driver")
		var nodes []string
		if drv == "vfio-pci" {
			g, _ := h.LinkBase(real + "/iommu_group")
			nodes = append(nodes, "/dev/vfio/"+g)
		}
		devs = append(devs, Device{Address: addr, Path: real, Driver: drv, Nodes: append(nodes, DeviceNodes(h, real)...)})
	}
	return h, devs
}

func TestFind(t *testing.T) {
	h, devs := testMachine(t)
	res := Find(h, devs)
	want := map[string][]string{
		nvmeRoot: {
			"lvm|LVM volume group pve on nvme0n1p3|vgchange -an pve (once nothing uses its volumes)",
			"md|md array md127 on nvme0n1p5|mdadm --stop /dev/md127",
			"dm|device-mapper luks-3f1c on nvme0n1p6|cryptsetup close luks-3f1c",
			"mount|/mnt/data disk mounted from nvme0n1p1|umount /mnt/data disk",
			"swap|swap on nvme0n1p2|swapoff /dev/nvme0n1p2",
			"mount|/ mounted from pve-root on nvme0n1p3|none while the host runs from it: it is the root file system",
			"mount|/boot mounted from md127p1 on nvme0n1p5|umount /boot",
			"zfs|ZFS pool rpool on nvme0n1p4|zpool export rpool",
		},
		nicUp: {"interface|interface eth0 (up, a port of vmbr0)|ip link set eth0 down (the host's traffic through vmbr0 on it stops)"},
		gpuDRM: {
			"process|Xorg (pid 700)|stop the display manager, or move the display to another GPU",
			"container|running container 130 (lxc.mount.entry, /dev/dri/card0)|stop container 130 (pct stop 130)",
		},
		vmHost:    {"process|kvm (pid 4242) of VM 131|stop VM 131 (qm stop 131)"},
		vmMapped:  {"vm|running VM 131 (hostpci1, mapping nics)|stop VM 131 (qm stop 131)"},
		nvmeMPath: {"mount|/srv mounted from nvme2n1|umount /srv"},
		gpuCT: {
			"process|ffmpeg (pid 901) in container 129|stop container 129 (pct stop 129), or the service in it",
			"container|running container 130 (lxc.mount.entry, /dev/dri/card1)|stop container 130 (pct stop 130)",
		},
	}
	for _, d := range devs {
		var got []string
		for _, hd := range res.Holders[d.Address] {
			got = append(got, string(hd.Kind)+"|"+hd.String()+"|"+hd.Release)
		}
		if w := want[d.Address.String()]; !slices.Equal(got, w) {
			t.Errorf("%s: holders\n  %s\nwant\n  %s", d.Address, strings.Join(got, "\n  "), strings.Join(w, "\n  "))
		}
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings %v", res.Warnings)
	}
}

func TestDeviceNodes(t *testing.T) {
	h, devs := testMachine(t)
	for _, d := range devs {
		got := strings.Join(DeviceNodes(h, d.Path), " ")
		want := map[string]string{gpuDRM: "/dev/dri/card0 /dev/dri/renderD128", gpuCT: "/dev/dri/card1"}[d.Address.String()]
		if got != want {
			t.Errorf("%s: nodes %q, want %q", d.Address, got, want)
		}
	}
}

// Where udev has no data on a disk and ZFS is loaded, nothing can say whether a pool
// uses it: a warning says so instead of a silent "not held".
func TestZFSUnknown(t *testing.T) {
	h, devs := testMachine(t)
	dir, err := h.OSPath("/sys/module")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "zfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := Find(h, devs)
	got := res.Warnings
	want := []string{
		"0000:00:02.0: whether ZFS uses nvme0n1, nvme0n1p2, nvme0n1p3, nvme0n1p5, nvme0n1p6 cannot be told (udev has no data on it in /run/udev/data); check zpool status before moving it",
		"0000:00:09.0: whether ZFS uses nvme2n1 cannot be told (udev has no data on it in /run/udev/data); check zpool status before moving it",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestLVMGroup(t *testing.T) {
	for _, c := range []struct{ dm, vg string }{
		{"pve-root", "pve"},
		{"pve-vm--131--disk--0", "pve"},
		{"my--vg-lv", "my-vg"},
		{"a--b--c-d--e", "a-b-c"},
		{"novolume", "novolume"},
	} {
		if got := lvmGroup(c.dm); got != c.vg {
			t.Errorf("lvmGroup(%q) = %q, want %q", c.dm, got, c.vg)
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/a\040b`:    "/mnt/a b",
		`/x\011y\012z`:   "/x\ty\nz",
		`/back\134slash`: `/back\slash`,
		`/plain`:         "/plain",
		`/short\04`:      `/short\04`,
		`/not\9999`:      `/not\9999`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPathHolds(t *testing.T) {
	a, _ := pci.ParseAddress("0000:81:00.1")
	for _, c := range []struct {
		path string
		want bool
	}{
		{"0000:81:00.1", true},
		{"81:00.1", true},
		{"0000:81:00", true}, // every function of the slot
		{"81:00", true},
		{"0000:81:00.0", false},
		{"0001:81:00", false},
		{"0000:82:00", false},
		{"", false},
		{"garbage", false},
	} {
		if got := pathHolds(c.path, a); got != c.want {
			t.Errorf("pathHolds(%q, %s) = %v", c.path, a, got)
		}
	}
}

// qemu-server's reservations say which devices a running VM took: where the file exists,
// a mapping's other devices are not the VM's, and a reserved device is the VM's even
// where its config no longer names it.
func TestReservations(t *testing.T) {
	h, devs := testMachine(t)
	p, err := h.OSPath(reservationPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("0000:00:0b.0 131 pid:4242\n0000:00:05.0 132 pid:4343\n0000:00:07.0 131 time:1760712201\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := Find(h, devs)
	got := map[string][]string{}
	for a, hs := range res.Holders {
		for _, hd := range hs {
			if hd.Kind == KindVM {
				got[a.String()] = append(got[a.String()], hd.String())
			}
		}
	}
	want := map[string][]string{
		gpuCT: {"running VM 131 (reserved, in /run/qemu-server/pci-id-reservations)"},
	}
	if len(got) != len(want) {
		t.Errorf("VM holders %v, want %v", got, want)
	}
	for a, w := range want {
		if !slices.Equal(got[a], w) {
			t.Errorf("%s: VM holders %v, want %v", a, got[a], w)
		}
	}
}
