package nccl

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Options say what goes into a topology file besides the <cpu> and <pci> elements.
type Options struct {
	// WithGPUs adds a <gpu dev= sm=> under each NVIDIA GPU. NCCL trusts the dev and sm of
	// a file over what it detects, so a file with them is only right for the machine and
	// driver it was written for; without them NCCL fills them in itself.
	WithGPUs bool
}

// FromHost returns the topology NCCL detects from sysfs for the devices (GPUs and NICs),
// as NCCL's ncclTopoGetXmlFromSys builds it (src/graph/xml.cc): a <pci> for each device
// and each switch above it, a <cpu> per NUMA node at the top. Like NCCL it climbs the
// device's sysfs path two directories at a time, so root ports and switch downstream
// ports never become elements: a GPU under a root port hangs directly off its <cpu>, one
// behind a switch off the switch's upstream port. The warnings name what NCCL will have
// to guess.
func FromHost(h *host.Host, t *pci.Tree, devices []*pci.Device, opt Options) (*Node, []string, error) {
	b := &builder{h: h, t: t, sys: Elem("system", "version", Version), pcis: map[string]*Node{}}
	b.cpu = ReadCPU(h)
	if b.cpu.Arch == "" {
		b.warnings = append(b.warnings, "the CPU's architecture and vendor are unknown (no readable /proc/cpuinfo): NCCL fills them in from the CPU it runs on")
	}
	devs := slices.Clone(devices)
	slices.SortFunc(devs, func(a, b *pci.Device) int { return a.Address.Compare(b.Address) })
	dev := 0
	for _, d := range devs {
		n := b.add(d)
		if opt.WithGPUs && d.VendorID == pci.VendorNVIDIA && d.IsDisplay() {
			g := Elem("gpu", "dev", strconv.Itoa(dev))
			if sm, ok := SM(d.DeviceName); ok {
				g.Set("sm", strconv.Itoa(sm))
			} else {
				b.warnings = append(b.warnings, fmt.Sprintf("%s: the compute capability of %04x:%04x (%s) is not known here: its <gpu> has no sm, which NCCL then reads from the driver", d.Address, d.VendorID, d.DeviceID, d.Name()))
			}
			n.Children = append(n.Children, g)
			dev++
		}
	}
	if c := b.sys.Count(); c > MaxNodes {
		return nil, nil, fmt.Errorf("the topology has %d elements; NCCL reads at most %d: select fewer devices", c, MaxNodes)
	}
	return b.sys, b.warnings, nil
}

type builder struct {
	h        *host.Host
	t        *pci.Tree
	cpu      CPU
	sys      *Node
	pcis     map[string]*Node
	warnings []string
}

// BusID is a device's address as NCCL writes it: lower case, four-digit domain.
func BusID(a pci.Address) string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", a.Domain, a.Bus, a.Device, a.Function)
}

// add returns the <pci> of a device, making it and the elements above it.
func (b *builder) add(d *pci.Device) *Node {
	id := BusID(d.Address)
	if n, ok := b.pcis[id]; ok {
		return n
	}
	speed, width := Link(b.t, d)
	n := PCI(id, d, speed, width)
	b.pcis[id] = n

	// Climb the path two components at a time, as NCCL does: a component that is not
	// a PCI address (pci0000:00, or the VMBus device of a Hyper-V guest) is the CPU.
	comps := strings.Split(strings.Trim(d.Path, "/"), "/")
	var parent *Node
	for up := 1; up <= 2 && parent == nil; up++ {
		i := len(comps) - 1 - up
		if i < 0 || !isBDF(comps[i]) {
			parent = b.cpuNode(d.NUMANode)
		} else if up == 2 {
			a, err := pci.ParseAddress(comps[i])
			if pd := b.t.Lookup(a); err == nil && pd != nil {
				parent = b.add(pd)
			} else {
				b.warnings = append(b.warnings, fmt.Sprintf("%s: the bridge %s above it is not in the scan; placed under its NUMA node", d.Address, comps[i]))
				parent = b.cpuNode(d.NUMANode)
			}
		}
	}
	Insert(parent, n)
	return n
}

// Link is the link_speed and link_width NCCL reads without NVML: the slower of the
// device's and its upstream port's max_link_speed (verbatim), and the narrower of
// their max_link_width, a missing file counting as width 0 (which NCCL takes for x16).
func Link(t *pci.Tree, d *pci.Device) (string, int) {
	var up pci.Link
	if dir := path.Dir(d.Path); isBDF(path.Base(dir)) {
		if a, err := pci.ParseAddress(path.Base(dir)); err == nil {
			if pd := t.Lookup(a); pd != nil {
				up = pd.Link
			}
		}
	}
	speed := d.Link.MaxSpeed
	if speedValue(up.MaxSpeed) < speedValue(d.Link.MaxSpeed) {
		speed = up.MaxSpeed
	}
	return speed, min(d.Link.MaxWidth, up.MaxWidth)
}

// speedValue reads a speed as NCCL's sscanf("%f GT/s") does: the number it starts with,
// or the largest float when there is none.
func speedValue(s string) float64 {
	s = strings.TrimLeft(s, " \n\t")
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' || (end == 0 && (s[0] == '-' || s[0] == '+'))) {
		end++
	}
	v, err := strconv.ParseFloat(s[:end], 32)
	if err != nil {
		return math.MaxFloat32
	}
	return v
}

// PCI returns the <pci> element of a device with the link given, attributes in the order
// NCCL sets them.
func PCI(busID string, d *pci.Device, speed string, width int) *Node {
	return Elem("pci",
		"busid", busID,
		"class", fmt.Sprintf("0x%06x", d.Class),
		"vendor", fmt.Sprintf("0x%04x", d.VendorID),
		"device", fmt.Sprintf("0x%04x", d.DeviceID),
		"subsystem_vendor", fmt.Sprintf("0x%04x", d.SubVendorID),
		"subsystem_device", fmt.Sprintf("0x%04x", d.SubDeviceID),
		"link_speed", speed,
		"link_width", strconv.Itoa(width))
}

// cpuNode returns the <cpu> of a NUMA node, making it when needed.
func (b *builder) cpuNode(numa int) *Node {
	id := strconv.Itoa(numa)
	for _, c := range b.sys.Children {
		if v, _ := c.Get("numaid"); v == id {
			return c
		}
	}
	aff := ""
	if numa >= 0 {
		s, err := b.h.ReadString(fmt.Sprintf("/sys/devices/system/node/node%d/cpumap", numa))
		if err == nil {
			aff = s
		}
	}
	c := b.cpu.Node(numa, aff)
	b.sys.Children = append(b.sys.Children, c)
	return c
}

// Insert adds a child in bus id order, as NCCL keeps the children of an element.
func Insert(parent, child *Node) {
	id, _ := child.Get("busid")
	i := len(parent.Children)
	for j, c := range parent.Children {
		if cid, ok := c.Get("busid"); ok && id < cid {
			i = j
			break
		}
	}
	parent.Children = slices.Insert(parent.Children, i, child)
}

// isBDF is NCCL's checkBDFFormat: twelve characters shaped XXXX:XX:XX.X.
func isBDF(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	return isHex(s[0:4]) && isHex(s[5:7]) && isHex(s[8:10]) && isHex(s[11:])
}
