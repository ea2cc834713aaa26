package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/split"
)

func newPVE(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pve mappings|sync|vm-layout|backups",
		Short: "Keep Proxmox VE consistent with the split: PCI mappings, containers, VMs",
		Long: `Keep Proxmox VE's configuration consistent with the split: the PCI mappings of
/etc/pve/mapping/pci.cfg, the device entries of the containers that use the GPUs, and the
VMs that pass them through (mappings, sync). vm-layout gives a VM a PCIe layout that
carries the host's NUMA nodes; backups lists and restores the versions gpusplit replaced.
docs/proxmox.md walks through the reference case,
docs/vm-topology.md through the VM layout.`,
	}
	cmd.AddCommand(newPVEMappings(g), newPVESync(g), newPVEVMLayout(g), newPVEP2PClique(g), newPVEBackups(g), newPVECluster(g), newPVEHook(g))
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
			doc, err := pve.ReportMappings(h, inv.Tree, model)
			if err != nil {
				return err
			}
			if g.json() {
				return g.writeJSON(doc)
			}
			return doc.WriteText(g.stdout, h.Root(), g.width())
		},
	}
}

func newPVESync(g *globals) *cobra.Command {
	var d desiredFlags
	var w writeFlags
	var force bool
	var vmMapping string
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Make Proxmox's mappings, containers and VMs match the split (shows the diffs, then asks)",
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
    GPUs' host NUMA nodes;
  - each VM given GPUs gets what its firmware needs to place their BARs: phys-bits (and
    +pdpe1gb) in cpu, OVMF's 64-bit window in args; a host whose CPU cannot give the
    width is refused (docs/vm-topology.md, The guest's address space).

It prints a unified diff of every file it would change, with what to know about each (a
running guest sees changes at its next start), then asks (--yes: it does not ask;
--dry-run: it stops there). It writes them as Proxmox does: under its locks, to
<file>.tmp.<pid> then renamed, refusing a file changed since it was shown or a guest
config with a lock, and keeping the previous version under ` + pve.BackupDir + `.`,
		Example: `  gpusplit --demo pve sync --vfio numa:1 --dry-run
  sudo gpusplit pve sync --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(); err != nil {
				return err
			}
			if vmMapping != "" && !plan.ValidMappingID(vmMapping) {
				return fmt.Errorf("--vm-mapping %q is not a Proxmox mapping id: a letter, then at least one more letter, digit, '-' or '_'", vmMapping)
			}
			if w.writing() {
				if err := needRoot(g, "pve sync", "it writes /etc/pve and takes Proxmox's locks", append(pve.WriteDirs, bind.LockDir)...); err != nil {
					return err
				}
			}
			pl, err := d.plan(g)
			if err != nil {
				return err
			}
			o := pve.SyncOptions{VMMapping: vmMapping}
			mode := pve.SyncMode{Force: force, Command: "pve sync"}
			models := splitModels(pl)
			shown, err := runSync(pl, o, mode, models)
			if shown == nil {
				return err
			}
			stop := err != nil || w.dryRun || len(shown.Changes) == 0
			if w.showsCheck(g, stop) {
				if jerr := showSync(g, pl, shown, pve.SyncText{DryRun: w.dryRun}); jerr != nil {
					return jerr
				}
			}
			if stop {
				if shown.Refused() && !force {
					return fmt.Errorf("%w\n--force writes a refused result all the same", stopped(err, shown.Problems))
				}
				return stopped(err, shown.Problems)
			}
			if err := w.proceed(g, fmt.Sprintf("Write %s?", plural.S(len(shown.Changes), "file"))); err != nil {
				return err
			}
			// The driver lock, then the host read again (docs/handoff.md, "Locks"): no
			// GPU moves between the read of the drivers and the write of what follows
			// from them, and what is written is what was shown (pve.SyncMode.Shown).
			_, lock, err := g.lockedHost()
			if err != nil {
				return err
			}
			defer lock.Unlock()
			if pl, err = d.plan(g); err != nil {
				return fmt.Errorf("nothing was written: %w", err)
			}
			mode.Apply, mode.Shown = true, shown.Changes
			doc, err := runSync(pl, o, mode, models)
			if doc == nil {
				return err
			}
			if jerr := showSync(g, pl, doc, pve.SyncText{Written: true}); jerr != nil {
				return jerr
			}
			return err
		},
	}
	d.register(cmd)
	w.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&force, "force", false, "write a result that the checks refuse (a VM with more hostpci entries than its mapping has GPUs, mapping entries that no longer match the host, merging into another node's mapping)")
	f.StringVar(&vmMapping, "vm-mapping", "", "the mapping of the vfio-pci side (default: the existing mapping's name plus -vm)")
	return cmd
}

// syncDoc is pve sync -o json (docs/json.md): the sync's report, and the split's models.
type syncDoc struct {
	*pve.SyncReport
	// Models says, for the groups of split.toml that name a model, whether it still
	// fits on what the guest keeps (as plan says it); absent without one.
	Models []planModelJSON `json:"models,omitempty"`
}

// errSyncStops ends a check that found reasons the write would stop.
var errSyncStops = errors.New("nothing was written: the write would stop, for the reasons above")

// pveErr words a pve error's way out with the command line's flags: a check that found
// what would stop the write says so, a refused sync what --force does.
func pveErr(err error) error {
	var refused *pve.RefusedError
	switch {
	case errors.Is(err, pve.ErrWouldStop):
		return errSyncStops
	case errors.As(err, &refused):
		return fmt.Errorf("nothing was written: the result could not work or would lose entries (--force writes it all the same):\n  %s", strings.Join(refused.Problems, "\n  "))
	}
	return err
}

// runSync runs pve.RunSync on a planned split; models are the split's, for the JSON.
func runSync(pl *split.Planned, o pve.SyncOptions, mode pve.SyncMode, models []planModelJSON) (*syncDoc, error) {
	rep, err := pve.RunSync(pl.H, pl.Inv, pl.Plan, pl.Desired, o, mode)
	if rep == nil {
		return nil, err
	}
	return &syncDoc{SyncReport: rep, Models: models}, pveErr(err)
}

// showSync prints a sync's check, with the split's models, or what it wrote (t.Written);
// or JSON.
func showSync(g *globals, pl *split.Planned, doc *syncDoc, t pve.SyncText) error {
	if g.json() {
		return g.writeJSON(doc)
	}
	t.Root, t.Snapshot, t.Backups = pl.H.Root(), !pl.H.Writable(), rootedPath(pl.H, pve.BackupDir)
	doc.WriteText(g.stdout, t)
	if !t.Written {
		writeSplitModels(g.stdout, doc.Models)
	}
	return nil
}

// rootedPath is where p lies as the user sees it: under --root when one is given.
func rootedPath(h interface{ Root() string }, p string) string {
	// The demo's scratch copy is named as the sample host: its files are in the copy.
	if s, ok := h.(interface {
		Simulated() bool
		OSPath(string) (string, error)
	}); ok && s.Simulated() {
		if q, err := s.OSPath(p); err == nil {
			return q
		}
	}
	if r := h.Root(); r != "/" && r != "" {
		return filepath.Join(r, p)
	}
	return p
}
