package inventory

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/table"
	"github.com/gpusplit/gpusplit/internal/topo"
)

// WriteTable prints the GPUs for a person, one row each and one per function, numa being
// the host's NUMA nodes (topo.NUMANodes), at most width columns wide (table.Wide: every
// column). At narrow widths the columns that locate a GPU in the PCIe tree go first; the
// ones a user acts on (address, model, driver, NUMA node, IOMMU group, holders) stay,
// the model cut short and the holders wrapped when need be.
func (inv *Inventory) WriteTable(w io.Writer, numa, width int) error {
	fmt.Fprintf(w, "%s: %s, %s\n\n", inv.Root, plural.S(len(inv.GPUs), "GPU"), plural.S(numa, "NUMA node"))
	if len(inv.GPUs) == 0 {
		fmt.Fprintln(w, "No GPUs found. Use --devices to choose which devices count as GPUs.")
		return nil
	}
	t := table.New(
		table.Column{Header: "GPU"},
		table.Column{Header: "ADDRESS"},
		table.Column{Header: "MODEL", Fit: table.Shorten, Min: 12},
		table.Column{Header: "DRIVER"},
		table.Column{Header: "DEV", Drop: 5},
		table.Column{Header: "NUMA"},
		table.Column{Header: "GROUP"},
		table.Column{Header: "LINK", Drop: 4},
		table.Column{Header: "HOST BRIDGE", Drop: 2},
		table.Column{Header: "ROOT PORT", Drop: 1},
		table.Column{Header: "LARGEST BAR", Drop: 3},
		table.Column{Header: "HELD BY", Fit: table.Wrap, Sep: "; "},
	)
	for i, gp := range inv.GPUs {
		t.Add(fmt.Sprint(i), gp.Address.String(), Model(gp.Device), orNone(gp.Driver), devNode(gp), topo.NUMAAffinity(gp.NUMANode),
			group(gp.IOMMUGroup), orDash(gp.Link.String()), gp.HostBridge.String(), rootPort(gp.Device), largestBAR(gp.BARs), HeldBy(gp.Holders))
		for _, f := range gp.Functions {
			held := ""
			if hs := inv.HoldersOf(f.Address); len(hs) > 0 {
				held = HeldBy(hs)
			}
			t.Add("", "└ "+f.Address.String(), Model(f), orNone(f.Driver), "", "", group(f.IOMMUGroup), "", "", "", "", held)
		}
		if len(gp.VFs) > 0 {
			t.Add("", fmt.Sprintf("└ %d of %d VFs", len(gp.VFs), gp.TotalVFs), vfSummary(gp.VFs), vfDrivers(gp.VFs), "", "", "", "", "", "", "", inv.vfHolders(gp.VFs))
		}
	}
	if err := t.Write(w, width); err != nil {
		return err
	}
	for _, note := range groupNotes(inv) {
		fmt.Fprintln(w, note)
	}
	return nil
}

// WriteLong prints one block per GPU with every detail: BARs, ids, group members.
func (inv *Inventory) WriteLong(w io.Writer, numa int) error {
	fmt.Fprintf(w, "%s: %s, %s\n", inv.Root, plural.S(len(inv.GPUs), "GPU"), plural.S(numa, "NUMA node"))
	for i, gp := range inv.GPUs {
		fmt.Fprintf(w, "\nGPU%d  %s  %s [%s] (subsystem %s, rev %02x)\n", i, gp.Address, gp.Name(), gp.ID(), gp.SubsystemID(), gp.Revision)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		line := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
		drv := orNone(gp.Driver)
		if len(gp.Nodes) > 0 {
			drv += " (" + strings.Join(gp.Nodes, ", ") + ")"
		}
		if gp.DriverOverride != "" {
			drv += ", driver_override " + gp.DriverOverride
		}
		line("driver", drv)
		line("numa", fmt.Sprintf("node %s, CPUs %s", topo.NUMAAffinity(gp.NUMANode), orDash(gp.LocalCPUs.String())))
		var members []string
		for _, m := range inv.Tree.Group(gp.IOMMUGroup) {
			members = append(members, m.Address.String())
		}
		line("iommu", fmt.Sprintf("group %s: %s", group(gp.IOMMUGroup), orDash(strings.Join(members, ", "))))
		path := []string{gp.HostBridge.String()}
		for _, p := range gp.Parents {
			path = append(path, p.String())
		}
		line("path", strings.Join(append(path, gp.Address.String()), " → "))
		line("link", orDash(gp.Link.String()))
		var bars []string
		for _, b := range gp.BARs {
			bars = append(bars, barText(b))
		}
		line("bars", orDash(strings.Join(bars, ", ")))
		for _, f := range gp.Functions {
			line("function", fmt.Sprintf("%s %s [%s] (%s)", f.Address, f.Name(), f.ID(), orNone(f.Driver)))
		}
		if gp.TotalVFs > 0 {
			line("sr-iov", fmt.Sprintf("%d of %d virtual functions enabled", gp.NumVFs, gp.TotalVFs))
		}
		for _, vf := range gp.VFs {
			line("vf", vfText(vf))
		}
		for _, h := range gp.Holders {
			line("held by", h.String()+": "+h.Release)
		}
		for _, f := range gp.Functions {
			for _, h := range inv.HoldersOf(f.Address) {
				line("held by", fmt.Sprintf("%s (of %s): %s", h.String(), f.Address, h.Release))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, note := range groupNotes(inv) {
		fmt.Fprintln(w, "\n"+note)
	}
	return nil
}

// groupNotes names the devices that share a GPU's IOMMU group without being the GPU or
// one of its functions: they would have to move with it.
func groupNotes(inv *Inventory) []string {
	var notes []string
	for i, gp := range inv.GPUs {
		var others []string
		for _, m := range inv.Strangers(gp) {
			others = append(others, fmt.Sprintf("%s (%s)", m.Address, m.Name()))
		}
		if len(others) > 0 {
			notes = append(notes, fmt.Sprintf("IOMMU group %d of GPU%d also holds %s.", gp.IOMMUGroup, i, strings.Join(others, ", ")))
		}
	}
	return notes
}

// chipPrefix matches pci.ids names such as "GB202GL [RTX PRO 6000 Blackwell …]", whose
// bracketed part is the name users know.
var chipPrefix = lazyre.New(`^[A-Za-z0-9]+(?:GL|M)? \[(.+)\]$`)

// Model is the name users know of a device: the bracketed part of a pci.ids name such as
// "GB202GL [RTX PRO 6000 Blackwell …]", else its name.
func Model(d *pci.Device) string {
	if m := chipPrefix.FindStringSubmatch(d.DeviceName); m != nil {
		return m[1]
	}
	return d.Name()
}

func devNode(g GPU) string {
	if len(g.Nodes) == 0 {
		return "-"
	}
	return g.Nodes[0]
}

func rootPort(d *pci.Device) string {
	if rp, ok := d.RootPort(); ok {
		return rp.String()
	}
	return "-"
}

func group(g int) string {
	if g < 0 {
		return "-"
	}
	return fmt.Sprint(g)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func largestBAR(bars []pci.BAR) string {
	var best *pci.BAR
	for i := range bars {
		if !bars[i].IO && bars[i].Index != 6 && (best == nil || bars[i].Size > best.Size) {
			best = &bars[i]
		}
	}
	if best == nil {
		return "-"
	}
	s := best.Name() + " " + size(best.Size)
	if best.Unassigned {
		s += " UNASSIGNED"
	}
	return s
}

func barText(b pci.BAR) string {
	var attrs []string
	switch {
	case b.Index == 6:
		attrs = append(attrs, "read-only")
	case b.IO:
		attrs = append(attrs, "I/O")
	case b.Is64Bit:
		attrs = append(attrs, "64-bit")
	default:
		attrs = append(attrs, "32-bit")
	}
	if b.Prefetchable && b.Index != 6 {
		attrs = append(attrs, "prefetchable")
	}
	if b.Unassigned {
		attrs = append(attrs, "UNASSIGNED")
	}
	return fmt.Sprintf("%s %s (%s)", b.Name(), size(b.Size), strings.Join(attrs, ", "))
}

// size prints a power-of-two size the way lspci does: 128G, 32M, 512K, 128.
func size(n uint64) string {
	for _, u := range []struct {
		shift uint
		unit  string
	}{{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.unit)
		}
	}
	return fmt.Sprint(n)
}

// HeldBy is the HELD BY cell of a device: its holders, or "-".
func HeldBy(hs []holders.Holder) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Short())
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "; ")
}

// ShortName is the name users know of a device named name, as Model.
func ShortName(name string) string {
	if m := chipPrefix.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return name
}

// vfSummary is the MODEL cell of a GPU's virtual functions: the vGPUs they carry, else
// the vGPU types they can take, else the VFs' model.
func vfSummary(vfs []VF) string {
	used, types := 0, map[int]bool{}
	vgpu := false
	for _, vf := range vfs {
		vgpu = vgpu || vf.VGPU
		if vf.VGPUType > 0 {
			used++
		}
		for _, t := range vf.Creatable {
			types[t.ID] = true
		}
	}
	switch {
	case used > 0:
		return fmt.Sprintf("vGPU: %d of %d in use", used, len(vfs))
	case vgpu:
		return fmt.Sprintf("vGPU: none in use, %s", plural.S(len(types), "type"))
	}
	return Model(vfs[0].Device)
}

// vfDrivers are the drivers of a GPU's virtual functions, each once.
func vfDrivers(vfs []VF) string {
	var out []string
	for _, vf := range vfs {
		if d := orNone(vf.Driver); !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return strings.Join(out, ", ")
}

// vfHolders is the HELD BY cell of a GPU's virtual functions: what uses any of them.
func (inv *Inventory) vfHolders(vfs []VF) string {
	var hs []holders.Holder
	seen := map[string]bool{}
	for _, vf := range vfs {
		for _, h := range inv.HoldersOf(vf.Address) {
			if !seen[h.Key()] {
				seen[h.Key()] = true
				hs = append(hs, h)
			}
		}
	}
	return HeldBy(hs)
}

// vfText is a virtual function in the long form: address, driver and vGPU.
func vfText(vf VF) string {
	s := fmt.Sprintf("%s (%s)", vf.Address, orNone(vf.Driver))
	if !vf.VGPU {
		return s
	}
	name := map[int]string{}
	var types []string
	for _, t := range vf.Creatable {
		name[t.ID] = t.Name
		types = append(types, strconv.Itoa(t.ID))
	}
	if vf.VGPUType > 0 {
		s += fmt.Sprintf(", vGPU type %d", vf.VGPUType)
		if n := name[vf.VGPUType]; n != "" {
			s += " (" + n + ")"
		}
	} else {
		s += ", no vGPU"
	}
	if len(types) > 0 {
		s += ", can take " + strings.Join(types, ", ")
	}
	return s
}
