package addrspace

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// BAR is one memory BAR (or the expansion ROM) of a function passed to the VM.
type BAR struct {
	Index        int    // 0–5, or 6 for the ROM
	Size         uint64 // bytes: the largest the function offers (Resizable BAR), else its size
	Is64Bit      bool
	Prefetchable bool
}

// pref64 says whether the BAR goes to a 64-bit prefetchable window: the only BARs a
// bridge can forward above 4 GiB.
func (b BAR) pref64() bool { return b.Index != romIndex && b.Is64Bit && b.Prefetchable }

const romIndex = 6

// Function is one PCI function of a passed device, by its host address.
type Function struct {
	Address string `json:"address"`
	BARs    []BAR  `json:"bars"`
}

// Device is what one hostpciN entry passes: a GPU and the other functions of its slot.
type Device struct {
	Entry     string     `json:"entry"` // hostpci0 … hostpci15
	Functions []Function `json:"functions"`
}

func (d Device) pref64() uint64 {
	var sum uint64
	for _, f := range d.Functions {
		for _, b := range f.BARs {
			if b.pref64() {
				sum += b.Size
			}
		}
	}
	return sum
}

// bus is a bus of the guest and what sits on it: functions' BARs and the bridges to
// further buses.
type bus struct {
	name    string
	hotplug bool // a hot-plug slot (PCIe root port, SHPC bridge): firmware pads its windows
	bars    []busBAR
	devices []string // the hostpci entries whose functions are on this bus or below
	kids    []*bus
}

// busBAR is a BAR on a bus, with the hostpci entry whose function has it.
type busBAR struct {
	BAR
	entry string
}

// hostpciIndex is N of hostpciN.
func hostpciIndex(entry string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(entry, "hostpci"))
	if err != nil {
		return -1
	}
	return n
}

// buildBus lays the devices out as qemu-server does (PCI.pm): on q35, a hostpciN with
// pcie=1 behind a PCIe root port of its own, the first four the ich9-pcie-port-1…4 of
// pve-q35-4.0.cfg at 1c.0–1c.3 (present whether used or not), the others ones it adds
// (print_pcie_root_port); without pcie=1 behind the PCI bridges pci.0 (hostpci0–3) and
// pci.2 (hostpci4–15), which on q35 sit behind the DMI-to-PCI bridge at 1e.0 with pci.1
// and pci.3 (get_pci_addr_map). On i440fx pci.0 is the root bus itself, and pci.2 a
// bridge qemu-server adds when something is on it. The devices left out are not placed.
func buildBus(g *guest, devices []Device, leftOut map[string]bool) *bus {
	root := &bus{name: "pci root bus"}
	bridges := map[string]*bus{}
	bridge := func(name string) *bus {
		if b := bridges[name]; b != nil {
			return b
		}
		b := &bus{name: name, hotplug: true}
		bridges[name] = b
		return b
	}
	var ports [4]*bus
	if g.q35 {
		for i := range ports {
			ports[i] = &bus{name: fmt.Sprintf("root port 1c.%d", i), hotplug: true}
		}
		for i := range 4 {
			bridge(fmt.Sprintf("pci.%d", i))
		}
	}
	var extra []*bus
	for _, d := range devices {
		if leftOut[d.Entry] {
			continue
		}
		var bars []busBAR
		for _, f := range d.Functions {
			for _, b := range f.BARs {
				if b.Index == romIndex && !g.romOn(d.Entry) {
					continue
				}
				bars = append(bars, busBAR{BAR: b, entry: d.Entry})
			}
		}
		n := hostpciIndex(d.Entry)
		var on *bus
		switch {
		case g.q35 && g.pcieOn(d.Entry) && n >= 0 && n < 4:
			on = ports[n]
		case g.q35 && g.pcieOn(d.Entry):
			on = &bus{name: "root port of " + d.Entry, hotplug: true}
			extra = append(extra, on)
		case n >= 0 && n < 4 && !g.q35:
			on = root
		case n >= 0 && n < 4:
			on = bridge("pci.0")
		default:
			on = bridge("pci.2")
		}
		on.bars = append(on.bars, bars...)
		on.devices = append(on.devices, d.Entry)
	}
	if g.q35 {
		for _, p := range ports {
			root.kids = append(root.kids, p)
		}
		root.kids = append(root.kids, extra...)
		dmi := &bus{name: "DMI-to-PCI bridge 1e.0"}
		for i := range 4 {
			b := bridges[fmt.Sprintf("pci.%d", i)]
			dmi.kids = append(dmi.kids, b)
			dmi.devices = append(dmi.devices, b.devices...)
		}
		root.kids = append(root.kids, dmi)
	} else if b := bridges["pci.2"]; b != nil {
		root.kids = append(root.kids, b)
	}
	return root
}

// romOn and pcieOn read the hostpci entry's options; a device the config has no entry
// for is taken as qemu-server's default (rombar on) on a PCIe root port.
func (g *guest) romOn(entry string) bool {
	if on, ok := g.rombar[entry]; ok {
		return on
	}
	return true
}

func (g *guest) pcieOn(entry string) bool {
	if on, ok := g.pcie[entry]; ok {
		return on
	}
	return true
}

// res is one resource a firmware places on a bus: a BAR or a bridge's window.
type res struct {
	size, align uint64
	devices     []string // the hostpci entries it holds
}

// sortRes orders resources as the firmwares do before placing them one after the other:
// the largest alignment first (SeaBIOS pci_region_create_entry, edk2 InsertResourceNode),
// among equals the larger first.
func sortRes(rs []res) {
	slices.SortStableFunc(rs, func(a, b res) int {
		if c := cmp.Compare(b.align, a.align); c != 0 {
			return c
		}
		return cmp.Compare(b.size, a.size)
	})
}
