package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pve"
)

func newPVE(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pve mappings|sync|vm-layout",
		Short: "Keep Proxmox VE consistent with the split: PCI mappings, containers, VMs",
		Long: `Keep Proxmox VE's configuration consistent with the split: the PCI mappings of
/etc/pve/mapping/pci.cfg, the device entries of the containers that use the GPUs, and the
VMs that pass them through (mappings, sync). vm-layout gives a VM a PCIe layout that
carries the host's NUMA nodes. docs/proxmox.md walks through the reference case,
docs/vm-topology.md through the VM layout.`,
	}
	cmd.AddCommand(newPVEMappings(g), newPVESync(g), newPVEVMLayout(g))
	return cmd
}

func newPVEMappings(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "mappings",
		Short:   "List the PCI mappings, with what this node's entries point to and whether Proxmox's check passes",
		Example: `  gpusplit --demo pve mappings`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, inv, err := g.inventory()
			if err != nil {
				return err
			}
			node, err := pve.NodeName(h)
			if err != nil {
				return err
			}
			data, err := h.ReadFile(pve.MappingPath)
			if errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(g.stdout, "%s: no PCI mappings (%s does not exist).\n", h.Root(), pve.MappingPath)
				return nil
			}
			if err != nil {
				return err
			}
			f, err := pve.ParseMappings(pve.MappingPath, string(data))
			if err != nil {
				return err
			}
			type row struct {
				Mapping  string   `json:"mapping"`
				Node     string   `json:"node"`
				Path     string   `json:"path"`
				ID       string   `json:"id"`
				Device   string   `json:"device"`
				Driver   string   `json:"driver"`
				NUMANode *int     `json:"numa_node"`
				Checked  bool     `json:"checked"`
				Problems []string `json:"problems"`
			}
			var rows []row
			for _, m := range f.Mappings {
				for _, e := range m.Maps {
					r := row{Mapping: m.ID, Node: e.Node, Path: e.Path, ID: e.ID, Problems: []string{}}
					if e.Node == node {
						r.Checked = true
						r.Problems = pve.Check(inv.Tree, e)
						first, _, _ := strings.Cut(e.Path, ";")
						if !strings.Contains(first, ".") {
							first += ".0"
						}
						if a, err := pci.ParseAddress(first); err == nil {
							if d := inv.Tree.Lookup(a); d != nil {
								r.Device, r.Driver = model(d), d.Driver
								n := d.NUMANode
								r.NUMANode = &n
							}
						}
					}
					rows = append(rows, r)
				}
			}
			if g.json() {
				if rows == nil {
					rows = []row{}
				}
				return g.writeJSON(struct {
					Node     string `json:"node"`
					Mappings []row  `json:"entries"`
				}{node, rows})
			}
			fmt.Fprintf(g.stdout, "%s: %d PCI mappings; this node is %s.\n\n", h.Root(), len(f.Mappings), node)
			tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "MAPPING\tNODE\tPATH\tDEVICE\tDRIVER\tNUMA\tPROXMOX CHECK")
			for _, r := range rows {
				check, dev, drv, numa := "(other node)", "", "", ""
				if r.Checked {
					check = "ok"
					if len(r.Problems) > 0 {
						check = "FAILS: " + strings.Join(r.Problems, "; ")
					}
					dev, drv = orDash(r.Device), orNone(r.Driver)
					if r.NUMANode != nil {
						numa = fmt.Sprint(*r.NUMANode)
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Mapping, r.Node, r.Path, dev, drv, numa, check)
			}
			return tw.Flush()
		},
	}
}

func newPVESync(g *globals) *cobra.Command {
	var d desiredFlags
	var apply, dryRun bool
	var vmMapping string
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Make Proxmox's mappings, containers and VMs match the split (diffs; --apply writes)",
		Long: `Make Proxmox match the split (from ` + "--vfio" + ` or the desired state file, as for plan):

  - the mapping of the vfio-pci side (the desired state's group mapping, or the existing
    mapping's name plus -vm, or --vm-mapping) holds exactly this node's vfio-pci GPUs,
    and the nvidia side's mapping only the GPUs still on nvidia; other nodes' entries and
    other mappings are untouched;
  - each container that uses the GPUs keeps device entries (devN, or lxc.mount.entry when
    it uses those) for exactly its GPUs that stay on nvidia, through the /dev/nvidiaN
    minors the driver reports, plus /dev/nvidiactl and /dev/nvidia-uvm(-tools);
  - each VM that uses the mappings points at the vfio-pci side, with pcie=1 on a q35
    machine, x-vga off for compute GPUs, and numa: 1 with numaN entries bound to the
    GPUs' host NUMA nodes.

Without --apply it changes nothing and prints a unified diff of every file it would
change, with what to know about each (a running guest sees changes at its next start).
--apply writes them as Proxmox does: under its locks, to <file>.tmp.<pid> then renamed,
refusing a file changed since it was read or a guest config with a lock, and keeping the
previous version under ` + pve.BackupDir + `.`,
		Example: `  gpusplit --demo pve sync --vfio numa:1 --dry-run
  sudo gpusplit pve sync --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if apply && dryRun {
				return errors.New("--apply and --dry-run contradict each other; use one")
			}
			pl, err := d.plan(g)
			if err != nil {
				return err
			}
			return syncProxmox(g, pl, pve.SyncOptions{VMMapping: vmMapping}, apply)
		},
	}
	d.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&apply, "apply", false, "write the changes")
	f.BoolVar(&dryRun, "dry-run", false, "print the diffs and change nothing (the default)")
	f.StringVar(&vmMapping, "vm-mapping", "", "the mapping of the vfio-pci side (default: the existing mapping's name plus -vm)")
	return cmd
}

// syncDoc is the JSON form of a sync: each changed file's diff, with its notes.
type syncDoc struct {
	Applied bool         `json:"applied"`
	Changes []changeJSON `json:"changes"`
	Notes   []string     `json:"notes"`
}

type changeJSON struct {
	Path  string   `json:"path"`
	Diff  string   `json:"diff"`
	Notes []string `json:"notes"`
}

// runSync computes the Proxmox changes of a planned split, and writes them when apply is set.
func runSync(pl *planned, o pve.SyncOptions, apply bool) (*syncDoc, []pve.Change, []string, error) {
	changes, notes, err := pve.Sync(pl.h, pl.inv, pl.plan, pl.desired, o)
	if err != nil {
		return nil, nil, nil, err
	}
	doc := &syncDoc{Applied: apply, Changes: []changeJSON{}, Notes: append([]string{}, notes...)}
	for _, c := range changes {
		doc.Changes = append(doc.Changes, changeJSON{Path: c.Path, Diff: c.Diff(), Notes: append([]string{}, c.Notes...)})
	}
	if apply {
		if err := writeChanges(pl, changes); err != nil {
			return doc, changes, notes, err
		}
	}
	return doc, changes, notes, nil
}

// syncProxmox runs the sync and prints it: the diffs with their notes, or JSON.
func syncProxmox(g *globals, pl *planned, o pve.SyncOptions, apply bool) error {
	doc, changes, notes, err := runSync(pl, o, apply)
	if err != nil {
		return err
	}
	if g.json() {
		return g.writeJSON(doc)
	}
	if len(changes) == 0 {
		fmt.Fprintf(g.stdout, "%s: Proxmox already matches the split.\n", pl.h.Root())
	}
	for _, c := range changes {
		if diff := c.Diff(); diff != "" {
			fmt.Fprint(g.stdout, diff)
		}
		for _, n := range c.Notes {
			fmt.Fprintf(g.stdout, "# %s\n", n)
		}
		fmt.Fprintln(g.stdout)
	}
	for _, n := range notes {
		fmt.Fprintf(g.stdout, "note: %s\n", n)
	}
	switch {
	case apply:
		fmt.Fprintf(g.stdout, "wrote %d files; the previous versions are in %s.\n", countChanged(changes), pve.BackupDir)
	case len(changes) > 0:
		fmt.Fprintln(g.stdout, "dry run: nothing was written; --apply writes these changes.")
	}
	return nil
}

// writeChanges writes the changed files: the mappings first, then the guests.
func writeChanges(pl *planned, changes []pve.Change) error {
	if !pl.h.Writable() {
		return fmt.Errorf("cannot write to %s: %w", pl.h.Root(), errSnapshot)
	}
	w := &pve.Writer{H: pl.h}
	for _, c := range changes {
		if c.Old == c.New {
			continue
		}
		if err := w.Write(c.Path, c.Old, c.New); err != nil {
			return err
		}
	}
	return nil
}

func countChanged(changes []pve.Change) int {
	n := 0
	for _, c := range changes {
		if c.Old != c.New {
			n++
		}
	}
	return n
}
