package vmlayout

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/nccl"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/pveprop"
)

// ErrLaidOut says that a VM's GPUs are already in gpusplit's layout (pve vm-layout).
var ErrLaidOut = errors.New("its GPUs are in gpusplit's NUMA layout (its args)")

// MaxHostpci is the number of hostpciN entries qemu-server reads (hostpci0–hostpci15).
const MaxHostpci = 16

// ReservationsPath is where qemu-server records which PCI devices it has reserved for
// which VM (PVE/QemuServer/PCI.pm).
const ReservationsPath = "/run/qemu-server/pci-id-reservations"

// pcieRootPorts are the root ports qemu-server puts hostpciN with pcie=1 behind, on a q35
// machine: the first four come with its pve-q35 config files (ich9-pcie-port-1…4 at
// 1c.0–1c.3), the others it adds as needed (print_pcie_root_port).
var pcieRootPorts = [MaxHostpci]string{
	"1c.0", "1c.1", "1c.2", "1c.3",
	"10.0", "10.1", "10.2", "10.3", "10.4", "10.5", "10.6", "10.7",
	"11.0", "11.1", "11.2", "11.3",
}

// win7Slots are the slots on pcie.0 that a Windows 7 guest's pcie=1 devices get instead
// of a root port (hostpciNbus0 in get_pcie_addr_map).
var win7Slots = [MaxHostpci]uint8{0x10, 0x11, 0x12, 0x13, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x15, 0x16, 0x17, 0x18, 0x19}

// pciSlots are the conventional PCI places of hostpciN without pcie=1
// (get_pci_addr_map): bus pci.0 for the first four, pci.2 for the others.
var pciSlots = [MaxHostpci]struct{ bus, slot uint8 }{
	{0, 0x10}, {0, 0x11}, {0, 0x1b}, {0, 0x1c},
	{2, 0x0d}, {2, 0x0e}, {2, 0x0f}, {2, 0x10}, {2, 0x11}, {2, 0x12}, {2, 0x13}, {2, 0x14}, {2, 0x15}, {2, 0x16}, {2, 0x17}, {2, 0x18},
}

// pciBridge is where the bridge of bus pci.N sits, as a guest path: on q35 behind the
// DMI-to-PCI bridge at 1e.0 (pve-q35-4.0.cfg), on i440fx pci.0 is the root bus itself
// and pci.1, pci.2 are bridges at 1e.0 and 1f.0; with a legacy IGD, pci.2 moves behind
// pci.1 at 1e.0 ("pci.2-igd" in get_pci_addr_map), so that slot 1f.0 stays the IGD's
// ISA bridge's.
func pciBridge(q35, legacyIGD bool, bus uint8) string {
	if q35 {
		return fmt.Sprintf("1e.0/%02x.0", bus+1)
	}
	switch {
	case bus == 0:
		return ""
	case bus == 1:
		return "1e.0"
	case legacyIGD:
		return "1e.0/1e.0"
	}
	return "1f.0"
}

// checkLegacyIGD applies qemu-server's rules for legacy-igd=1 (parse_hostpci_devices):
// one such entry, i440fx, vga: none, no x-vga or mdev; the device itself is checked
// with its alternatives (igdDevice). It says whether the VM has one.
func checkLegacyIGD(g *pve.Guest, entries map[int]pve.Key, q35 bool) (bool, error) {
	found := false
	for i := range MaxHostpci {
		k, ok := entries[i]
		if !ok {
			continue
		}
		opts := pveprop.Parse(k.Value, "host")
		if opts["legacy-igd"] != "1" {
			continue
		}
		vga, _ := g.Get("vga")
		why := ""
		switch {
		case found:
			why = "only one device can be assigned in legacy-igd mode"
		case pveprop.Parse(vga, "type")["type"] != "none":
			why = "legacy IGD assignment requires VGA mode to be 'none'"
		case opts["rombar"] == "0":
			why = "legacy IGD assignment requires rombar to be enabled"
		case opts["x-vga"] == "1":
			why = "legacy IGD assignment is not compatible with x-vga"
		case opts["mdev"] != "":
			why = "legacy IGD assignment is not compatible with mdev"
		case q35:
			why = "legacy IGD assignment is not compatible with q35"
		}
		if why != "" {
			return false, fmt.Errorf("%s: %s, which qemu-server refuses at start", k.Name, why)
		}
		found = true
	}
	return found, nil
}

// nvidiaVGPU says whether an mdev entry is NVIDIA's vGPU on kernels since 6.8, and which
// type: mdev=nvidia-N on a device with the vGPU manager's sysfs directory (nvidia/),
// which qemu-server then passes whole as vfio-pci,host=<the VF>, after setting the VF's
// vGPU type (lspci's "nvidia" flag in PVE::SysFSTools, create_nvidia_device in
// PCI/Mdev.pm). It returns "" for a classic mediated device.
func (p *predictor) nvidiaVGPU(key string, opts map[string]string) (string, error) {
	n, ok := strings.CutPrefix(opts["mdev"], "nvidia-")
	if _, err := strconv.Atoi(n); !ok || err != nil || strings.Trim(n, "0123456789") != "" {
		return "", nil
	}
	alts, err := p.alternatives(key, opts)
	if err != nil {
		return "", err
	}
	for _, funcs := range alts {
		if len(funcs) > 1 {
			return "", fmt.Errorf("%s: mdev=%s names several functions, which qemu-server refuses (\"cannot use mediated device with multifunction device\")", key, opts["mdev"])
		}
	}
	if d := p.t.Lookup(alts[0][0]); d != nil && p.h.IsDir(d.Path+"/nvidia") {
		return opts["mdev"], nil
	}
	return "", nil
}

// igdDevice checks the device of a legacy-igd entry as qemu-server does: one function,
// one alternative, and the host's 00:02.0, where Intel's integrated graphics sit.
func igdDevice(key string, alts [][]pci.Address) error {
	why := ""
	switch {
	case len(alts) > 1:
		why = "legacy IGD assignment is not compatible with alternate devices"
	case len(alts[0]) > 1:
		why = "legacy IGD assignment is not compatible with multifunction devices"
	case !strings.HasSuffix(alts[0][0].String(), "02.0"):
		why = "legacy IGD assignment only works for devices on host bus 00:02.0"
	}
	if why != "" {
		return fmt.Errorf("%s: %s, which qemu-server refuses at start", key, why)
	}
	return nil
}

// overrideIDs gives a device the ids that the entry's vendor-id, device-id, sub-vendor-id
// and sub-device-id make the guest see (QEMU's x-pci-* properties), keeping the host's.
func overrideIDs(d *Device, opts map[string]string) {
	id := func(k string) string { return strings.ToLower(strings.TrimPrefix(opts[k], "0x")) }
	if v := id("vendor-id"); v != "" && v != d.Vendor {
		d.HostVendor, d.Vendor = d.Vendor, v
	}
	if v := id("device-id"); v != "" && v != d.Device {
		d.HostDevice, d.Device = d.Device, v
	}
	d.SubVendor, d.SubDevice = id("sub-vendor-id"), id("sub-device-id")
}

// Predict reads VM vmid's configuration on this node and works out, with qemu-server's
// rules, the host device behind each hostpciN and where the guest will see it.
func Predict(h *host.Host, t *pci.Tree, vmid int, now time.Time) (*Manifest, error) {
	return predict(h, t, vmid, now, true)
}

// Devices is Predict for the devices alone, GPUs or not: what qemu-server will give the
// VM, for the hook that prepares them.
func Devices(h *host.Host, t *pci.Tree, vmid int, now time.Time) (*Manifest, error) {
	return predict(h, t, vmid, now, false)
}

func predict(h *host.Host, t *pci.Tree, vmid int, now time.Time, needGPU bool) (*Manifest, error) {
	node, err := pve.NodeName(h)
	if err != nil {
		return nil, err
	}
	g, err := pve.ReadGuest(h, pve.QEMU, vmid)
	if errors.Is(err, fs.ErrNotExist) {
		if other := otherNode(h, vmid); other != "" {
			return nil, fmt.Errorf("VM %d is on node %s, not on this node %s: run gpusplit there", vmid, other, node)
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if tpl, _ := g.Get("template"); tpl == "1" {
		// config_to_command keeps only the disks of a template, which starts for backups
		// alone (and qm start refuses it): no hostpci device reaches a guest.
		return nil, fmt.Errorf("VM %d is a template: qemu-server passes no hostpci device to a template, which starts only for backups; describe a VM cloned from it", vmid)
	}
	if a, _ := g.Get("arch"); a != "" && a != "x86_64" {
		return nil, fmt.Errorf("VM %d is an %s guest; gpusplit knows qemu-server's x86_64 layouts only", vmid, a)
	}
	machine, _ := g.Get("machine")
	q35 := strings.Contains(pveprop.Parse(machine, "type")["type"], "q35")
	ostype, _ := g.Get("ostype")
	m := &Manifest{Version: ManifestVersion, VMID: vmid, Node: node, Machine: "i440fx", Devices: []Device{}, GuestNUMA: []GuestNode{}, Notes: []string{}}
	if q35 {
		m.Machine = "q35"
	}
	p := &predictor{h: h, t: t, vmid: vmid, node: node, now: now, used: map[pci.Address]bool{}}
	if err := p.readReservations(); err != nil {
		return nil, err
	}
	entries := g.Numbered("hostpci")
	legacyIGD, err := checkLegacyIGD(g, entries, q35)
	if err != nil {
		return nil, err
	}
	predicted := map[string][]string{}
	alternatives := map[string]int{}
	running := h.Exists(fmt.Sprintf("/run/qemu-server/%d.pid", vmid))
	var elsewhere []string // devices on another driver than vfio-pci
	var kept []string      // driver=keep: qemu-server leaves them on their driver
	for i := range MaxHostpci {
		k, ok := entries[i]
		if !ok {
			continue
		}
		opts := pveprop.Parse(k.Value, "host")
		vgpu := ""
		if opts["mdev"] != "" {
			var err error
			if vgpu, err = p.nvidiaVGPU(k.Name, opts); err != nil {
				return nil, err
			}
			if vgpu == "" {
				m.Notes = append(m.Notes, fmt.Sprintf("%s is a mediated device (mdev=%s): qemu-server passes it by its sysfs path (vfio-pci,sysfsdev=/sys/bus/mdev/devices/…), a part of a device, not a PCI function of the host: left out", k.Name, opts["mdev"]))
				continue
			}
		}
		pcie := opts["pcie"] == "1"
		if pcie && !q35 {
			return nil, fmt.Errorf("%s has pcie=1 on an i440fx machine, which qemu-server refuses (\"q35 machine model is not enabled\")", k.Name)
		}
		alts, err := p.alternatives(k.Name, opts)
		if err != nil {
			return nil, err
		}
		if opts["legacy-igd"] == "1" {
			if err := igdDevice(k.Name, alts); err != nil {
				return nil, err
			}
		}
		funcs, choice, err := p.choose(k.Name, alts)
		if err != nil {
			return nil, err
		}
		if choice == "predicted" {
			predicted[opts["mapping"]] = append(predicted[opts["mapping"]], fmt.Sprintf("%s gets %s", k.Name, funcs[0].Slot()))
			alternatives[opts["mapping"]] = len(alts)
		}
		if d := t.Lookup(funcs[0]); d.Driver != "vfio-pci" && !running && vgpu == "" {
			what := fmt.Sprintf("%s (%s)", funcs[0], cmp.Or(d.Driver, "no driver"))
			if opts["driver"] == "keep" {
				kept = append(kept, what)
			} else {
				elsewhere = append(elsewhere, what)
			}
		}
		// Where the slot is: behind a root port, on pcie.0 (Windows 7), or on a PCI bus.
		var slot string
		switch {
		case pcie && ostype == "win7":
			slot = fmt.Sprintf("%02x", win7Slots[i])
		case pcie:
			slot = pcieRootPorts[i] + "/00"
		case opts["legacy-igd"] == "1":
			slot = "02" // pci.0 addr 2, the display's slot (get_pci_addr_map: legacy-igd)
		default:
			ps := pciSlots[i]
			slot = fmt.Sprintf("%02x", ps.slot)
			if b := pciBridge(q35, legacyIGD, ps.bus); b != "" {
				slot = b + "/" + slot
			}
		}
		for j, a := range funcs {
			d := t.Lookup(a)
			speed, width := nccl.Link(t, d)
			fn := 0
			if len(funcs) > 1 {
				fn = j // qemu-server numbers the functions of a multifunction entry in order
			}
			dev := Device{
				Hostpci:     k.Name,
				GuestPath:   fmt.Sprintf("%s.%d", slot, fn),
				Vendor:      fmt.Sprintf("%04x", d.VendorID),
				Device:      fmt.Sprintf("%04x", d.DeviceID),
				Class:       fmt.Sprintf("0x%06x", d.Class),
				HostAddress: a,
				HostNUMA:    d.NUMANode,
				LinkSpeed:   speed,
				LinkWidth:   width,
				Mapping:     opts["mapping"],
				Choice:      choice,
				Keep:        opts["driver"] == "keep",
			}
			if j == 0 {
				// qemu-server gives the id overrides to the entry's first function only.
				overrideIDs(&dev, opts)
			}
			if vgpu != "" {
				// The VF carries the vGPU: vfio shows the guest the VF's ids, and the
				// GPU behind it is the physical function, whose place on the host counts.
				dev.VGPU = vgpu
				if d.PhysFn != nil {
					dev.PhysFn = d.PhysFn.String()
					if pf := t.Lookup(*d.PhysFn); pf != nil {
						dev.HostNUMA = pf.NUMANode
						dev.LinkSpeed, dev.LinkWidth = nccl.Link(t, pf)
					}
				}
			}
			m.Devices = append(m.Devices, dev)
		}
	}
	if len(elsewhere) > 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("%s not on vfio-pci now: qemu-server rebinds them when VM %d starts, taking them from whatever uses them; split the GPUs first (gpusplit plan, apply)", strings.Join(elsewhere, ", "), vmid))
	}
	if len(kept) > 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("%s not on vfio-pci, and their entries say driver=keep: qemu-server neither resets nor rebinds them, so VM %d cannot start until they are on vfio-pci (gpusplit plan, apply)", strings.Join(kept, ", "), vmid))
	}
	for _, mp := range slices.Sorted(maps.Keys(predicted)) {
		m.Notes = append(m.Notes, fmt.Sprintf("mapping %s has %d devices on this node; qemu-server gives each entry the first one that is free when VM %d starts: %s, if no other VM holds them then", mp, alternatives[mp], vmid, strings.Join(predicted[mp], ", ")))
	}
	gpus := 0
	for _, d := range m.Devices {
		if d.IsGPU() {
			gpus++
		}
	}
	if gpus == 0 && !needGPU {
		return m, nil
	}
	if gpus == 0 && HasLayout(g) {
		return nil, fmt.Errorf("VM %d: %w: the guest sees the host's NUMA nodes and host bridges itself, and NCCL needs no topology file (gpusplit topo in the guest shows them)", vmid, ErrLaidOut)
	}
	if gpus == 0 {
		return nil, fmt.Errorf("VM %d passes through no GPU (%d functions, none a display controller): there is nothing to describe", vmid, len(m.Devices))
	}
	cliques := readCliques(g)
	for i, d := range m.Devices {
		if c, ok := cliques[d.Hostpci]; ok {
			m.Devices[i].Clique = &c
		}
	}
	m.GuestNUMA, m.Notes = guestNUMA(g, m.Devices, m.Notes)
	return m, nil
}

// otherNode returns the cluster node whose directory holds the VM's config, if any.
func otherNode(h *host.Host, vmid int) string {
	nodes, err := h.ReadDir("/etc/pve/nodes")
	if err != nil {
		return ""
	}
	for _, n := range nodes {
		if h.Exists(fmt.Sprintf("/etc/pve/nodes/%s/qemu-server/%d.conf", n, vmid)) {
			return n
		}
	}
	return ""
}

type predictor struct {
	h        *host.Host
	t        *pci.Tree
	vmid     int
	node     string
	now      time.Time
	mappings *pve.MappingFile
	used     map[pci.Address]bool
	// reserved are qemu-server's live reservations: device to VM.
	reserved map[pci.Address]int
}

var reservationLine = lazyre.New(`^(\S+)\s(\d+)\s(time|pid):(\d+)$`)

// readReservations reads the reservations that still hold.
func (p *predictor) readReservations() error {
	r, err := Reservations(p.h, p.now)
	p.reserved = r
	return err
}

// Reservations reads qemu-server's PCI reservations that still hold, device to VM: those
// of a running VM process, and those whose start-up window has not expired.
func Reservations(h *host.Host, now time.Time) (map[pci.Address]int, error) {
	out := map[pci.Address]int{}
	data, err := h.ReadString(ReservationsPath)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	for _, line := range strings.Split(data, "\n") {
		m := reservationLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a, err1 := pci.ParseAddress(m[1])
		vm, err2 := strconv.Atoi(m[2])
		v, err3 := strconv.ParseInt(m[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		live := m[3] == "time" && time.Unix(v, 0).After(now) ||
			m[3] == "pid" && h.Exists(fmt.Sprintf("/proc/%d", v))
		if live {
			out[a] = vm
		}
	}
	return out, nil
}

// alternatives returns the device sets a hostpci entry may get, in qemu-server's order:
// the host= value is one set (its ';'-separated devices), a mapping offers one set per
// map line of this node.
func (p *predictor) alternatives(key string, opts map[string]string) ([][]pci.Address, error) {
	var paths [][]string
	switch {
	case opts["host"] != "" && opts["mapping"] != "":
		return nil, fmt.Errorf("%s sets both host and mapping, which qemu-server refuses", key)
	case opts["mapping"] != "":
		if p.mappings == nil {
			data, err := p.h.ReadString(pve.MappingPath)
			if errors.Is(err, fs.ErrNotExist) {
				data = ""
			} else if err != nil {
				return nil, err
			}
			if p.mappings, err = pve.ParseMappings(pve.MappingPath, data); err != nil {
				return nil, err
			}
		}
		mp := p.mappings.Mapping(opts["mapping"])
		if mp == nil {
			return nil, fmt.Errorf("%s uses mapping %q, which %s does not have", key, opts["mapping"], pve.MappingPath)
		}
		entries := mp.NodeMaps(p.node)
		if len(entries) == 0 {
			var others []string
			for _, e := range mp.Maps {
				if !slices.Contains(others, e.Node) {
					others = append(others, e.Node)
				}
			}
			return nil, fmt.Errorf("%s uses mapping %s, which has no device on this node %s (only on %s): the VM cannot start here", key, opts["mapping"], p.node, strings.Join(others, ", "))
		}
		for _, e := range entries {
			if problems := pve.Check(p.t, e); len(problems) > 0 {
				return nil, fmt.Errorf("%s: mapping %s, %s: %s; qemu-server refuses a mapping that no longer matches the hardware", key, opts["mapping"], e.Path, strings.Join(problems, "; "))
			}
			paths = append(paths, e.Paths())
		}
	case opts["host"] != "":
		paths = [][]string{strings.Split(opts["host"], ";")}
	default:
		return nil, fmt.Errorf("%s names neither host nor mapping", key)
	}
	var alts [][]pci.Address
	for _, set := range paths {
		var funcs []pci.Address
		for _, id := range set {
			fs, err := p.lookup(id)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			funcs = append(funcs, fs...)
		}
		alts = append(alts, funcs)
	}
	return alts, nil
}

// lookup finds the functions an id names as qemu-server's lspci does: "0000:81:00.0" or
// "81:00.0" one function (domain 0000 when left out), "0000:81:00" every function of the
// slot.
func (p *predictor) lookup(id string) ([]pci.Address, error) {
	s := strings.ToLower(id)
	if strings.Count(s, ":") == 1 {
		s = "0000:" + s
	}
	if !strings.Contains(s, ".") {
		a, err := pci.ParseAddress(s + ".0")
		if err != nil {
			return nil, fmt.Errorf("%q is not a PCI address", id)
		}
		var out []pci.Address
		for _, d := range p.t.Slot(a) {
			out = append(out, d.Address)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no PCI device %s on this host", s)
		}
		return out, nil
	}
	a, err := pci.ParseAddress(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a PCI address", id)
	}
	if p.t.Lookup(a) == nil {
		return nil, fmt.Errorf("no PCI device %s on this host", a)
	}
	return []pci.Address{a}, nil
}

// choose picks the alternative qemu-server's choose_hostpci_devices would: the only one,
// or the first whose devices no earlier entry took and no other VM has reserved.
func (p *predictor) choose(key string, alts [][]pci.Address) ([]pci.Address, string, error) {
	take := func(funcs []pci.Address) {
		for _, a := range funcs {
			p.used[a] = true
		}
	}
	if len(alts) == 1 {
		for _, a := range alts[0] {
			if p.used[a] {
				return nil, "", fmt.Errorf("%s: device %s is assigned more than once, which qemu-server refuses", key, a)
			}
		}
		take(alts[0])
		return alts[0], "fixed", nil
	}
	for _, funcs := range alts {
		free, mine := true, true
		for _, a := range funcs {
			vm, reserved := p.reserved[a]
			free = free && !p.used[a] && (!reserved || vm == p.vmid)
			mine = mine && reserved && vm == p.vmid
		}
		if free {
			take(funcs)
			if mine {
				return funcs, "reserved", nil
			}
			return funcs, "predicted", nil
		}
	}
	return nil, "", fmt.Errorf("%s: no free device among the %d of its mapping: other entries or VMs hold them all, so the VM would not start (\"could not find a free device\")", key, len(alts))
}

// guestNUMA reads the numaN entries bound to a single host node, and notes where the
// GPUs' host nodes have no guest node of their own.
func guestNUMA(g *pve.Guest, devs []Device, notes []string) ([]GuestNode, []string) {
	out := []GuestNode{}
	numaOn, _ := g.Get("numa")
	for _, k := range g.NumberedInOrder("numa") {
		v := pveprop.Parse(k.Value, "")
		hn, err := strconv.Atoi(v["hostnodes"])
		if err != nil {
			continue // unbound, or several host nodes: not one node's
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(k.Name, "numa"))
		out = append(out, GuestNode{Guest: n, Host: hn, CPUs: strings.ReplaceAll(v["cpus"], ";", ",")})
	}
	var missing []int
	for _, d := range devs {
		found := false
		for _, gn := range out {
			found = found || gn.Host == d.HostNUMA
		}
		if d.IsGPU() && d.HostNUMA >= 0 && !found && !slices.Contains(missing, d.HostNUMA) {
			missing = append(missing, d.HostNUMA)
		}
	}
	if len(missing) > 0 {
		why := "its numaN entries bind no guest node to them"
		if numaOn != "1" {
			why = "it has no numa: 1"
		}
		notes = append(notes, fmt.Sprintf("VM %d's GPUs are on host NUMA nodes %v, but %s: the guest's CPUs and memory are not placed near them (gpusplit pve sync binds them)", g.ID, missing, why))
	}
	return out, notes
}
