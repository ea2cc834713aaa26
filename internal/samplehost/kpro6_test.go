package samplehost

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// The sample host kpro6: a Proxmox VE 9 cluster node, an ASUS ESC8000A-E13 with two AMD
// EPYC 9335 (Turin, 32 cores each) and 8 × NVIDIA RTX PRO 6000 Blackwell Workstation Edition,
// each GPU behind its own root port on its own root complex: 01, 11, 61, 71 on NUMA 0
// and 81, 91, e1, f1 on NUMA 1. All eight are on the nvidia driver and passed to LXC
// container 129 (the state before a split); VM 131 would use four of them through the
// mapping pro6000 and is stopped.

const (
	nvidia = 0x10de
	amd    = 0x1022
	// RTX PRO 6000 Blackwell Workstation Edition and its HDMI audio function, with the
	// subsystem ids the board reports.
	rtxPro6000  = 0x2bb1
	rtxSub      = 0x204b
	gb202Audio  = 0x22e8
	turinRC     = 0x153a
	turinIOMMU  = 0x153b
	turinRCEC   = 0x153c
	turinDummy  = 0x153d
	turinGPP    = 0x153e
	turinIntGPP = 0x1555
	gen5        = "32.0 GT/s PCIe"
	gen4        = "16.0 GT/s PCIe"
	gen3        = "8.0 GT/s PCIe"
	gen2        = "5.0 GT/s PCIe"
)

// gpuGroups are the IOMMU groups of the eight GPUs, in address order.
var gpuGroups = map[uint8]int{0x01: 10, 0x11: 28, 0x61: 42, 0x71: 61, 0x81: 72, 0x91: 90, 0xe1: 101, 0xf1: 117}

// groups hands out IOMMU group numbers in order, skipping the GPUs' groups.
type groups struct{ n int }

func (g *groups) next() int {
	for {
		g.n++
		taken := false
		for _, v := range gpuGroups {
			taken = taken || v == g.n
		}
		if !taken {
			return g.n
		}
	}
}

func kpro6() fakehost.Machine {
	g := &groups{n: -1}
	var bridges []fakehost.HostBridge
	for i, rc := range []uint8{0x00, 0x10, 0x60, 0x70, 0x80, 0x90, 0xe0, 0xf0} {
		numa := 0
		if rc >= 0x80 {
			numa = 1
		}
		devs := []fakehost.Device{
			{Slot: 0, Func: 0, Vendor: amd, Device: turinRC, SubVendor: amd, SubDevice: turinRC, Class: 0x060000, Group: g.next()},
			{Slot: 0, Func: 2, Vendor: amd, Device: turinIOMMU, SubVendor: amd, SubDevice: turinIOMMU, Class: 0x080600, Group: fakehost.NoGroup},
			{Slot: 0, Func: 3, Vendor: amd, Device: turinRCEC, SubVendor: amd, SubDevice: turinRCEC, Class: 0x080700, Driver: "pcieport", Group: g.next()},
			{Slot: 1, Func: 0, Vendor: amd, Device: turinDummy, Class: 0x060000, Group: g.next()},
		}
		port := g.next()
		bus := rc + 1
		devs = append(devs, fakehost.Device{
			Slot: 1, Func: 1, Vendor: amd, Device: turinGPP, SubVendor: amd, SubDevice: turinGPP,
			Class: 0x060400, Driver: "pcieport", Group: port, Speed: gen5, Width: 16, Secondary: bus,
			Children: gpu(i, bus),
		})
		devs = append(devs, extras(rc, g)...)
		bridges = append(bridges, fakehost.HostBridge{Domain: 0, Bus: rc, NUMA: numa, Devices: devs})
	}
	m := fakehost.Machine{
		Nodes:         []fakehost.Node{{ID: 0, CPUs: "0-31,64-95"}, {ID: 1, CPUs: "32-63,96-127"}},
		IOMMU:         true,
		Bridges:       bridges,
		Drivers:       []string{"vfio-pci"},
		NvidiaVersion: "580.95.05",
		Processes:     processes(),
		Files:         files(),
		Links: map[string]string{
			"etc/pve/local":       "nodes/kpro6",
			"etc/pve/lxc":         "nodes/kpro6/lxc",
			"etc/pve/qemu-server": "nodes/kpro6/qemu-server",
			"etc/pve/openvz":      "nodes/kpro6/openvz",
		},
	}
	return m
}

// pcieCap is a PCI Express capability (id 0x10, at 0x40, the last of the list) of an
// endpoint as the kernel leaves it: DevCap supporting a payload of 128<<mps bytes, DevCtl
// with a payload of 256 bytes, a read request of 128<<mrrs, relaxed ordering, extended
// tags and no snoop enabled, 10-bit tags supported and enabled (DevCap2, DevCtl2), and the
// link's ASPM off (LnkCtl).
func pcieCap(mps uint32, mrrs uint16) []byte {
	c := make([]byte, 0x3c)
	le16 := func(off int, v uint16) { c[off], c[off+1] = byte(v), byte(v>>8) }
	le32 := func(off int, v uint32) { le16(off, uint16(v)); le16(off+2, uint16(v>>16)) }
	c[0], c[1] = 0x10, 0x00
	le16(0x02, 0x0002)                             // version 2, a PCI Express endpoint
	le32(0x04, mps|0x8000)                         // DevCap: payload, role-based error reporting
	le16(0x08, 1<<5|mrrs<<12|0x0010|0x0100|0x0800) // DevCtl
	le32(0x0c, 0x0040d905)                         // LnkCap: 32 GT/s, x16, L1 supported
	le16(0x10, 0x0040)                             // LnkCtl: common clock, ASPM off
	le16(0x12, 0x1105)                             // LnkSta: 32 GT/s x16
	le32(0x24, 0x00030000)                         // DevCap2: 10-bit tag completer and requester
	le16(0x28, 0x1000)                             // DevCtl2: 10-bit tag requester enabled
	return c
}

// rebar is a Resizable BAR capability (id 0x15 at 0x100) for one BAR, programmed to
// 2^(size+20) bytes, supporting the sizes of the bits of sizes (bit n: 2^(n+16) bytes).
func rebar(bar, size int, sizes uint32) []byte {
	c := make([]byte, 12)
	le32 := func(off int, v uint32) {
		c[off], c[off+1], c[off+2], c[off+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	le32(0, 0x00010015)
	le32(4, sizes)
	le32(8, uint32(size)<<8|1<<5|uint32(bar))
	return c
}

// gpu is the GPU and its audio function in the slot below root port i.
func gpu(i int, bus uint8) []fakehost.Device {
	base32 := uint64(0xf0000000) - uint64(i)*0x08000000
	base64 := uint64(0x20000000000) + uint64(i)*0x4000000000
	grp := gpuGroups[bus]
	return []fakehost.Device{
		{
			Slot: 0, Func: 0, Vendor: nvidia, Device: rtxPro6000, SubVendor: nvidia, SubDevice: rtxSub,
			Class: 0x030000, Rev: 0xa1, Driver: "nvidia", Group: grp, Speed: gen5, Width: 16,
			Model: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
			Caps:  pcieCap(0x1, 0x2), ExtConfig: rebar(1, 17, 0x003ffc00),
			BARs: []fakehost.BAR{
				{Index: 0, Start: base32, Size: 64 << 20, Flags: fakehost.Mem32},
				{Index: 1, Start: base64, Size: 128 << 30, Flags: fakehost.Mem64Pref},
				{Index: 3, Start: base64 + 128<<30, Size: 32 << 20, Flags: fakehost.Mem64Pref},
				{Index: 5, Start: 0x1000 + uint64(i)*0x1000, Size: 0x80, Flags: fakehost.IOPort},
				{Index: 6, Start: base32 + 64<<20, Size: 512 << 10, Flags: fakehost.ROM},
			},
		},
		{
			Slot: 0, Func: 1, Vendor: nvidia, Device: gb202Audio, SubVendor: nvidia, SubDevice: 0x0000,
			Class: 0x040300, Rev: 0xa1, Driver: "snd_hda_intel", Group: grp, Speed: gen5, Width: 16,
			BARs: []fakehost.BAR{{Index: 0, Start: base32 + 64<<20 + 512<<10, Size: 16 << 10, Flags: fakehost.Mem32}},
		},
	}
}

// extras are the other devices of a root complex: NICs, NVMe, the BMC, USB and SATA.
func extras(rc uint8, g *groups) []fakehost.Device {
	port := func(slot uint8, bus uint8, speed string, width int, children ...fakehost.Device) fakehost.Device {
		return fakehost.Device{
			Slot: slot, Func: 1, Vendor: amd, Device: turinGPP, SubVendor: amd, SubDevice: turinGPP,
			Class: 0x060400, Driver: "pcieport", Group: g.next(), Speed: speed, Width: width,
			Secondary: bus, Children: children,
		}
	}
	nvme := func(bus uint8) fakehost.Device {
		return fakehost.Device{
			Vendor: 0x144d, Device: 0xa80a, SubVendor: 0x144d, SubDevice: 0xaa0a, Class: 0x010802,
			Driver: "nvme", Group: g.next(), Speed: gen4, Width: 4,
			BARs: []fakehost.BAR{{Index: 0, Start: 0xc0000000 + uint64(bus)<<20, Size: 32 << 10, Flags: fakehost.Mem64}},
		}
	}
	switch rc {
	case 0x00: // the board's 10GBASE-T ports
		grp := g.next()
		nic := func(fn uint8) fakehost.Device {
			return fakehost.Device{
				Func: fn, Vendor: 0x8086, Device: 0x15ff, SubVendor: 0x15d9, SubDevice: 0x1c6c, Class: 0x020000,
				Rev: 0x02, Driver: "i40e", Group: grp, Speed: gen3, Width: 8,
				BARs: []fakehost.BAR{{Index: 0, Start: 0x18000000000 + uint64(fn)<<24, Size: 16 << 20, Flags: fakehost.Mem64Pref}},
			}
		}
		return []fakehost.Device{port(3, 0x02, gen3, 8, nic(0), nic(1))}
	case 0x10, 0x90:
		return []fakehost.Device{port(3, rc+2, gen4, 4, nvme(rc+2))}
	case 0x60: // the BMC's VGA behind its PCIe-to-PCI bridge, then USB and SATA
		bmcGroup := g.next()
		bmc := fakehost.Device{
			Vendor: 0x1a03, Device: 0x1150, SubVendor: 0x1a03, SubDevice: 0x1150, Class: 0x060400, Rev: 0x06,
			Group: bmcGroup, Speed: gen2, Width: 1, Secondary: 0x63,
			Children: []fakehost.Device{{
				Vendor: 0x1a03, Device: 0x2000, SubVendor: 0x15d9, SubDevice: 0x1d50, Class: 0x030000, Rev: 0x52,
				Driver: "ast", Group: bmcGroup,
				BARs: []fakehost.BAR{
					{Index: 0, Start: 0xc8000000, Size: 64 << 20, Flags: fakehost.Mem32},
					{Index: 1, Start: 0xcc000000, Size: 256 << 10, Flags: fakehost.Mem32},
					{Index: 2, Start: 0x3000, Size: 0x80, Flags: fakehost.IOPort},
				},
			}},
		}
		internal := fakehost.Device{
			Slot: 7, Func: 1, Vendor: amd, Device: turinIntGPP, SubVendor: amd, SubDevice: turinIntGPP,
			Class: 0x060400, Driver: "pcieport", Group: g.next(), Speed: gen4, Width: 16, Secondary: 0x64,
			Children: []fakehost.Device{
				{Func: 0, Vendor: amd, Device: 0x1556, SubVendor: amd, SubDevice: 0x1556, Class: 0x130000, Group: g.next(), Speed: gen4, Width: 16},
				{Func: 1, Vendor: amd, Device: 0x156e, SubVendor: amd, SubDevice: 0x156e, Class: 0x108000, Driver: "ccp", Group: g.next(), Speed: gen4, Width: 16},
				{Func: 3, Vendor: amd, Device: 0x1557, SubVendor: 0x15d9, SubDevice: 0x1c6c, Class: 0x0c0330, Driver: "xhci_hcd", Group: g.next(), Speed: gen4, Width: 16},
			},
		}
		sata := fakehost.Device{
			Slot: 7, Func: 2, Vendor: amd, Device: turinIntGPP, SubVendor: amd, SubDevice: turinIntGPP,
			Class: 0x060400, Driver: "pcieport", Group: g.next(), Speed: gen4, Width: 16, Secondary: 0x65,
			Children: []fakehost.Device{{Vendor: amd, Device: 0x7901, SubVendor: 0x15d9, SubDevice: 0x1c6c, Class: 0x010601, Rev: 0x93, Driver: "ahci", Group: g.next(), Speed: gen4, Width: 16}},
		}
		return []fakehost.Device{port(5, 0x62, gen2, 1, bmc), internal, sata}
	case 0x80: // the ConnectX-7 for the cluster network
		grp := g.next()
		cx7 := func(fn uint8) fakehost.Device {
			return fakehost.Device{
				Func: fn, Vendor: 0x15b3, Device: 0x1021, SubVendor: 0x15b3, SubDevice: 0x0041, Class: 0x020000,
				Driver: "mlx5_core", Group: grp, Speed: gen5, Width: 16, RDMA: fmt.Sprintf("mlx5_%d", fn),
				BARs: []fakehost.BAR{{Index: 0, Start: 0x38000000000 + uint64(fn)<<26, Size: 64 << 20, Flags: fakehost.Mem64Pref}},
			}
		}
		return []fakehost.Device{port(3, 0x82, gen5, 16, cx7(0), cx7(1))}
	}
	return nil
}

func processes() []fakehost.Process {
	gpus := func(extra ...string) []string {
		var out []string
		out = append(out, extra...)
		for i := range 8 {
			out = append(out, fmt.Sprintf("/dev/nvidia%d", i))
		}
		return out
	}
	return []fakehost.Process{
		{
			PID: 2211, Comm: "nvidia-persiste", Cgroup: "/system.slice/nvidia-persistenced.service",
			Cmdline: []string{"/usr/bin/nvidia-persistenced", "--user", "nvidia-persistenced"},
			Files:   gpus("/dev/nvidiactl"),
		},
		{
			PID: 48213, Comm: "python3", Cgroup: "/lxc/129/ns/system.slice/vllm.service",
			Cmdline: []string{"/opt/vllm/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/Qwen3-235B-A22B-FP8", "--tensor-parallel-size", "8"},
			Files:   gpus("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"),
		},
		{
			PID: 3982, Comm: "pvedaemon", Cgroup: "/system.slice/pvedaemon.service",
			Cmdline: []string{"pvedaemon"},
		},
	}
}

func files() map[string]string {
	var pciCfg strings.Builder
	pciCfg.WriteString("a6000-ws\n")
	pciCfg.WriteString("\tmap id=10de:2230,iommugroup=24,node=kpro5,path=0000:41:00.0,subsystem-id=10de:1459\n")
	pciCfg.WriteString("\tmap id=10de:2230,iommugroup=38,node=kpro5,path=0000:c1:00.0,subsystem-id=10de:1459\n")
	// Planted for pve cluster: kpro5's RTX PRO 6000, in pro6000 too.
	pciCfg.WriteString("\tmap id=10de:2bb1,iommugroup=52,node=kpro5,path=0000:81:00,subsystem-id=10de:204b\n")
	pciCfg.WriteString("\tdescription workstation GPUs of kpro5: the RTX A6000 pair, then its RTX PRO 6000\n\n")
	pciCfg.WriteString("pro6000\n")
	for _, bus := range []uint8{0x01, 0x11, 0x61, 0x71, 0x81, 0x91, 0xe1, 0xf1} {
		fmt.Fprintf(&pciCfg, "\tmap id=10de:2bb1,iommugroup=%d,node=kpro6,path=0000:%02x:00,subsystem-id=10de:204b\n", gpuGroups[bus], bus)
	}
	pciCfg.WriteString("\tmap id=10de:2bb1,iommugroup=12,node=kpro7,path=0000:41:00,subsystem-id=10de:204b\n")
	pciCfg.WriteString("\tmap id=10de:2bb1,iommugroup=77,node=kpro7,path=0000:c1:00,subsystem-id=10de:204b\n")
	pciCfg.WriteString("\tmap id=10de:2bb1,iommugroup=52,node=kpro5,path=0000:81:00,subsystem-id=10de:204b\n")
	// Planted for pve cluster: kpro4 left the cluster (pvecm delnode), its entry stayed.
	pciCfg.WriteString("\tmap id=10de:2bb1,iommugroup=31,node=kpro4,path=0000:21:00,subsystem-id=10de:204b\n")
	pciCfg.WriteString("\tdescription RTX PRO 6000 Blackwell, whole cards with HDMI audio\n\n")

	var lxc strings.Builder
	lxc.WriteString("#vLLM inference server, all eight RTX PRO 6000\n")
	lxc.WriteString("arch: amd64\ncores: 64\n")
	devs := map[int]string{8: "/dev/nvidiactl,mode=0666", 9: "/dev/nvidia-uvm,mode=0666", 10: "/dev/nvidia-uvm-tools,mode=0666",
		11: "/dev/nvidia-caps/nvidia-cap1,mode=0444", 12: "/dev/nvidia-caps/nvidia-cap2,mode=0444"}
	for i := range 8 {
		devs[i] = fmt.Sprintf("/dev/nvidia%d,gid=44,mode=0666", i)
	}
	// Proxmox writes keys in lexical order: dev0, dev1, dev10, … dev2.
	var keys []string
	for i := range devs {
		keys = append(keys, fmt.Sprintf("dev%d", i))
	}
	slices.Sort(keys)
	for _, k := range keys {
		var n int
		fmt.Sscanf(k, "dev%d", &n)
		fmt.Fprintf(&lxc, "%s: %s\n", k, devs[n])
	}
	lxc.WriteString("features: nesting=1\nhostname: infer01\nmemory: 262144\nmp0: /tank/models,mp=/models\n")
	lxc.WriteString("net0: name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:6A:3C:19,ip=dhcp,type=veth\n")
	lxc.WriteString("onboot: 1\nostype: debian\nrootfs: local-zfs:subvol-129-disk-0,size=200G\nswap: 0\nunprivileged: 1\n")

	vm := `#Training VM%3A four RTX PRO 6000 through the mapping pro6000
agent: 1
balloon: 0
bios: ovmf
boot: order=scsi0;net0
cores: 32
cpu: host
efidisk0: local-zfs:vm-131-disk-0,efitype=4m,pre-enrolled-keys=0,size=1M
hostpci0: mapping=pro6000,pcie=1
hostpci1: mapping=pro6000,pcie=1
hostpci2: mapping=pro6000,pcie=1
hostpci3: mapping=pro6000,pcie=1
machine: q35
memory: 262144
meta: creation-qemu=10.0.2,ctime=1760712201
name: train01
net0: virtio=BC:24:11:2F:71:0A,bridge=vmbr0,firewall=1
numa: 1
ostype: l26
scsi0: local-zfs:vm-131-disk-1,iothread=1,size=500G
scsihw: virtio-scsi-single
smbios1: uuid=5b0f3a8e-6c1d-4e8a-9d52-0c7e1f2a9b31
sockets: 2
vmgenid: 3c9d2e71-8a4f-4b6e-b1d0-7f2a5c9e8d14
`
	return map[string]string{
		"proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=/dev/mapper/pve-root ro quiet amd_iommu=on iommu=pt\n",
		// The firmware's tables, as an ASUS ESC8000A-E13 reports them.
		"sys/class/dmi/id/sys_vendor":              "ASUSTeK COMPUTER INC.\n",
		"sys/class/dmi/id/product_name":            "ESC8000A-E13\n",
		"sys/class/dmi/id/board_vendor":            "ASUSTeK COMPUTER INC.\n",
		"sys/class/dmi/id/bios_vendor":             "American Megatrends Inc.\n",
		"sys/class/dmi/id/bios_version":            "0402\n",
		"sys/class/dmi/id/bios_date":               "06/12/2025\n",
		"sys/module/pcie_aspm/parameters/policy":   "[default] performance powersave powersupersave \n",
		"proc/sys/kernel/hostname":                 "kpro6\n",
		"proc/version":                             "Linux version 6.17.2-1-pve (build@proxmox) (gcc (Debian 14.2.0-19) 14.2.0, GNU ld (GNU Binutils for Debian) 2.44) #1 SMP PREEMPT_DYNAMIC PMX 6.17.2-1 (2025-10-21T11:55Z) x86_64\n",
		"proc/devices":                             procDevices,
		"proc/cpuinfo":                             cpuinfo(),
		"dev/kmsg":                                 kernelLog,
		"etc/hostname":                             "kpro6\n",
		"etc/default/grub":                         grub,
		"etc/pve/mapping/pci.cfg":                  pciCfg.String(),
		"etc/pve/nodes/kpro6/lxc/129.conf":         lxc.String(),
		"etc/pve/nodes/kpro6/qemu-server/131.conf": vm,
		"etc/pve/nodes/kpro5/qemu-server/120.conf": "cores: 16\nhostpci0: mapping=a6000-ws,pcie=1\nmachine: q35\nmemory: 65536\nname: ws-kpro5\nostype: l26\n",
		"etc/pve/.members":                         members,
		"etc/pve/nodes/kpro5/qemu-server/125.conf": vm125,
		"etc/pve/nodes/kpro5/qemu-server/179.conf": vm179,
		"etc/pve/nodes/kpro5/lxc/150.conf":         ct150,
		"etc/pve/nodes/kpro7/qemu-server/171.conf": vm171,
		"etc/pve/ha/resources.cfg":                 haResources,
		"etc/pve/ha/rules.cfg":                     haRules,
		"etc/pve/replication.cfg":                  replication,
		"etc/pve/storage.cfg":                      storage,
	}
}

// storage is storage.cfg of a node installed on ZFS: the installer's local (a directory)
// and local-zfs (guest disks, as the guests' configs name them), with snippets added to
// local's content, where gpusplit pve hook install writes the hookscript.
const storage = "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup,snippets\n\n" +
	"zfspool: local-zfs\n\tpool rpool/data\n\tsparse\n\tcontent images,rootdir\n\n"

// The rest of the cluster, for gpusplit pve cluster, which reads /etc/pve alone. One
// problem of each kind is planted: VM 171 takes three devices of pro6000, which has two
// on kpro7 (guest-node-short); pro6000 keeps an entry of kpro4, no longer a member
// (entry-unknown-node); VM 120's strict HA rule allows kpro6, where a6000-ws has no
// entry (target-node-short); kpro5's RTX PRO 6000 (0000:81:00) is in a6000-ws as a third
// choice and in pro6000, used by VMs 120 and 125, which can run together
// (gpu-in-two-mappings). VM 179 uses pro6000 on kpro5 too, but is a template; VM 171's
// HA rule and replication target kpro6, where pro6000 has eight entries; container 150
// passes a GPU in the raw style.

// members is .members as pmxcfs writes it: the nodes in the order of its hash table.
const members = `{
"nodename": "kpro6",
"version": 7,
"cluster": { "name": "kpro", "version": 3, "nodes": 3, "quorate": 1 },
"nodelist": {
  "kpro6": { "id": 2, "online": 1, "ip": "10.20.0.16"},
  "kpro5": { "id": 1, "online": 1, "ip": "10.20.0.15"},
  "kpro7": { "id": 3, "online": 1, "ip": "10.20.0.17"}
  }
}
`

const vm125 = `bios: ovmf
boot: order=scsi0
cores: 16
cpu: host
efidisk0: local-zfs:vm-125-disk-0,efitype=4m,pre-enrolled-keys=0,size=1M
hostpci0: mapping=pro6000,pcie=1
machine: q35
memory: 98304
name: render05
net0: virtio=BC:24:11:8E:21:25,bridge=vmbr0,firewall=1
ostype: l26
scsi0: local-zfs:vm-125-disk-1,iothread=1,size=200G
scsihw: virtio-scsi-single
`

// ct150 passes a GPU the way of the guides before devN: bind mounts and the cgroup rule
// of the nvidia majors (195, and nvidia-uvm's, which the kernel gives at boot).
const ct150 = `arch: amd64
cores: 8
features: nesting=1
hostname: notebook5
memory: 32768
net0: name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:51:0C:7E,ip=dhcp,type=veth
ostype: ubuntu
rootfs: local-zfs:subvol-150-disk-0,size=64G
swap: 0
unprivileged: 1
lxc.cgroup2.devices.allow: c 195:* rwm
lxc.cgroup2.devices.allow: c 511:* rwm
lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file
lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file
lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file
`

const vm171 = `bios: ovmf
boot: order=scsi0
cores: 32
cpu: host
efidisk0: local-zfs:vm-171-disk-0,efitype=4m,pre-enrolled-keys=0,size=1M
hostpci0: mapping=pro6000,pcie=1
hostpci1: mapping=pro6000,pcie=1
hostpci2: mapping=pro6000,pcie=1
machine: q35
memory: 196608
name: train07
net0: virtio=BC:24:11:3D:90:71,bridge=vmbr0,firewall=1
numa: 1
ostype: l26
scsi0: local-zfs:vm-171-disk-1,iothread=1,size=400G
scsihw: virtio-scsi-single
sockets: 2
`

const vm179 = `bios: ovmf
boot: order=scsi0
cores: 16
cpu: host
efidisk0: local-zfs:base-179-disk-0,efitype=4m,pre-enrolled-keys=0,size=1M
hostpci0: mapping=pro6000,pcie=1
machine: q35
memory: 65536
name: render-template
net0: virtio=BC:24:11:8E:21:79,bridge=vmbr0,firewall=1
ostype: l26
scsi0: local-zfs:base-179-disk-1,iothread=1,size=200G
scsihw: virtio-scsi-single
template: 1
`

// The HA configuration as PVE 9 writes it: node-affinity rules in rules.cfg (groups.cfg
// is gone once every node runs 9).
const haResources = "vm: 120\n\tstate started\n\nvm: 171\n\tstate started\n\n"

const haRules = "node-affinity: ws-kpro5\n\tnodes kpro5:2,kpro6:1\n\tresources vm:120\n\tstrict 1\n\n" +
	"node-affinity: train\n\tnodes kpro6,kpro7\n\tresources vm:171\n\tstrict 1\n\n"

const replication = "local: 171-0\n\ttarget kpro6\n\tschedule */15\n\n"

const grub = `# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=` + "`( . /etc/os-release && echo ${NAME} )`" + `
GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt"
GRUB_CMDLINE_LINUX=""
`

const procDevices = `Character devices:
  1 mem
  4 /dev/vc/0
  4 tty
  4 ttyS
  5 /dev/tty
  5 /dev/console
  5 /dev/ptmx
  7 vcs
 10 misc
 13 input
 21 sg
 29 fb
128 ptm
136 pts
180 usb
188 ttyUSB
189 usb_device
195 nvidia-frontend
226 drm
234 nvidia-caps
235 nvidia-caps-imex-channels
236 nvidia-uvm
237 vfio
238 nvme-generic
239 nvme
240 ipmidev
241 hidraw
242 ttyDBC
243 bsg
244 watchdog
245 ptp
246 pps
247 cec
248 rtc
249 dma_heap
250 dax
251 dimmctl
252 ndctl
253 tpm
254 gpiochip

Block devices:
  7 loop
  8 sd
  9 md
 11 sr
 65 sd
 66 sd
 67 sd
 68 sd
 69 sd
 70 sd
 71 sd
128 sd
129 sd
130 sd
131 sd
132 sd
133 sd
134 sd
135 sd
230 zvol
252 device-mapper
253 virtblk
254 mdp
259 blkext
`

// kernelLog is an excerpt of the host's boot log in /dev/kmsg's format: healthy, with
// the IOMMU in passthrough and the note of the invalid amd_iommu=on.
const kernelLog = `5,0,0,-;Linux version 6.17.2-1-pve (build@proxmox) (gcc (Debian 14.2.0-19) 14.2.0, GNU ld (GNU Binutils for Debian) 2.44) #1 SMP PREEMPT_DYNAMIC PMX 6.17.2-1 (2025-10-21T11:55Z) x86_64
6,1,0,-;Command line: BOOT_IMAGE=/boot/vmlinuz-6.17.2-1-pve root=/dev/mapper/pve-root ro quiet amd_iommu=on iommu=pt
5,412,1203311,-;AMD-Vi: Unknown option - 'on'
6,1502,3410771,-;iommu: Default domain type: Passthrough (set via kernel command line)
6,1503,3411002,-;AMD-Vi: Extended features (0x246577efa2254afa, 0x10): PPR NX GT [5] IA GA PC GA_vAPIC
6,1504,3411050,-;AMD-Vi: Interrupt remapping enabled
4,2210,9122017,-;nvidia: loading out-of-tree module taints kernel.
6,2291,9913502,-;NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Oct  9 21:29:00 UTC 2025
6,2295,10301881,-;nvidia-modeset: Loading NVIDIA UNIX Open Kernel Mode Setting Driver for x86_64  580.95.05  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Oct  9 21:11:38 UTC 2025
`

// cpuinfo is /proc/cpuinfo of two EPYC 9335 (Zen 5: family 0x1a, model 0x02; 4 CCDs of
// 8 cores) with SMT: CPUs 0-31 and 64-95 are socket 0's cores and their siblings, 32-63
// and 96-127 socket 1's.
func cpuinfo() string {
	const flags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good amd_lbr_v2 nopl nonstop_tsc cpuid extd_apicid aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 hw_pstate ssbd mba perfmon_v2 ibrs ibpb stibp ibrs_enhanced vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local user_shstk avx_vnni avx512_bf16 clzero irperf xsaveerptr rdpru wbnoinvd amd_ppin cppc arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold avic v_vmsave_vmload vgif x2avic v_spec_ctrl vnmi avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid bus_lock_detect movdiri movdir64b overflow_recov succor smca fsrm avx512_vp2intersect flush_l1d debug_swap"
	var b strings.Builder
	for cpu := range 128 {
		socket, core := cpu/32%2, cpu%32
		apic := socket<<7 | core<<1 | cpu/64
		fmt.Fprintf(&b, "processor\t: %d\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n", cpu)
		fmt.Fprintf(&b, "model name\t: AMD EPYC 9335 32-Core Processor\nstepping\t: 1\nmicrocode\t: 0xb002116\ncpu MHz\t\t: 1500.000\ncache size\t: 1024 KB\n")
		fmt.Fprintf(&b, "physical id\t: %d\nsiblings\t: 64\ncore id\t\t: %d\ncpu cores\t: 32\napicid\t\t: %d\ninitial apicid\t: %d\n", socket, core, apic, apic)
		fmt.Fprintf(&b, "fpu\t\t: yes\nfpu_exception\t: yes\ncpuid level\t: 16\nwp\t\t: yes\nflags\t\t: %s\n", flags)
		b.WriteString("bugs\t\t: sysret_ss_attrs spectre_v1 spectre_v2 spec_store_bypass\nbogomips\t: 6390.81\nTLB size\t: 192 4K pages\nclflush size\t: 64\ncache_alignment\t: 64\naddress sizes\t: 52 bits physical, 57 bits virtual\npower management: ts ttp tm hwpstate cpb eff_freq_ro [13] [14] [15]\n\n")
	}
	return b.String()
}
