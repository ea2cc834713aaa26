package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// vmLayoutDoc is pve vm-layout -o json (docs/json.md).
type vmLayoutDoc struct {
	VMID int    `json:"vmid"`
	Path string `json:"path"`
	// LaidOut: the VM already has gpusplit's layout, and nothing changes.
	LaidOut  bool             `json:"laid_out"`
	Diff     string           `json:"diff"`
	Layout   *vmlayout.Layout `json:"layout"`
	Notes    []string         `json:"notes"`
	Applied  bool             `json:"applied"`
	Problems []string         `json:"problems"`
	Files    []pve.FileResult `json:"files"`
}

func newPVEVMLayout(g *globals) *cobra.Command {
	var vmid int
	var apply, dryRun bool
	cmd := &cobra.Command{
		Use:   "vm-layout",
		Short: "Give a VM a PCIe layout that carries the host's NUMA nodes (diff; --apply writes)",
		Long: `Move a VM's GPUs out of its hostpciN entries into an args line that rebuilds the host's
layout inside the guest: a pxb-pcie expander bridge for each host bridge holding its GPUs,
on the guest NUMA node bound to that host node, with a PCIe root port per GPU behind it.
The guest kernel then puts each GPU on its NUMA node, and nvidia-smi topo -m and NCCL see
NODE and SYS where they saw PHB everywhere. The VM gets numa: 1 and a guest node bound to
each host node of its GPUs (numaN: …,hostnodes=,policy=bind) unless it has them.

Without --apply it changes nothing and prints the diff of the VM's config; --apply writes
it under Proxmox's lock, with a backup, replacing the file atomically.

Trade-offs: the GPUs leave Proxmox's hostpci handling. Proxmox no longer binds them to
vfio-pci or reserves them at start (gpusplit apply and persist must keep them on
vfio-pci), the VM's PCI mapping no longer applies (the args name host addresses), the
VM cannot be live-migrated, and the args line uses QEMU options that a Proxmox upgrade
can change: after an upgrade start the VM and check gpusplit topo inside.
docs/vm-topology.md has the details.`,
		Example: `  gpusplit --demo pve vm-layout --vm 131
  sudo gpusplit pve vm-layout --vm 131 --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if vmid == 0 {
				h, err := g.host()
				if err != nil {
					return err
				}
				return fmt.Errorf("--vm names the VM to lay out; %s", pve.GuestChoice(h, pve.QEMU))
			}
			if apply && dryRun {
				return errors.New("--apply and --dry-run contradict each other; use one")
			}
			if apply {
				if err := needRoot(g, "pve vm-layout --apply", "it writes /etc/pve and takes Proxmox's locks", pve.WriteDirs...); err != nil {
					return err
				}
			}
			h, inv, err := g.inventory()
			if err != nil {
				return err
			}
			m, err := vmlayout.Predict(h, inv.Tree, vmid, time.Now())
			if errors.Is(err, vmlayout.ErrLaidOut) {
				if g.json() {
					return g.writeJSON(vmLayoutDoc{VMID: vmid, Path: pve.GuestPath(pve.QEMU, vmid), LaidOut: true, Notes: []string{}, Problems: []string{}, Files: []pve.FileResult{}})
				}
				fmt.Fprintf(g.stdout, "VM %d already has gpusplit's layout: nothing to change.\n", vmid)
				return nil
			}
			if err != nil {
				return err
			}
			guest, err := pve.ReadGuest(h, pve.QEMU, vmid)
			if err != nil {
				return err
			}
			old := guest.String()
			l, err := vmlayout.Apply(guest, inv.Tree, m)
			if err != nil {
				return err
			}
			path := pve.GuestPath(pve.QEMU, vmid)
			notes := append([]string{}, l.Notes...)
			if pve.Running(h, pve.QEMU, vmid) {
				notes = append(notes, fmt.Sprintf("VM %d is running: the layout takes effect when it is stopped and started again", vmid))
			}
			doc := vmLayoutDoc{VMID: vmid, Path: path, Diff: pve.Diff(path, old, guest.String()), Layout: l, Notes: notes}
			var werr error
			doc.Files, doc.Problems, doc.Applied, werr = pve.WriteGuest(h, "pve vm-layout --apply", apply, pve.Edit{Path: path, Old: old, New: guest.String()})
			if g.json() {
				if err := g.writeJSON(doc); err != nil {
					return err
				}
				return pveErr(werr)
			}
			fmt.Fprint(g.stdout, doc.Diff)
			for _, n := range notes {
				fmt.Fprintf(g.stdout, "# %s\n", n)
			}
			printGuestWrite(g, h, path, apply, doc.Applied, doc.Problems)
			return pveErr(werr)
		},
	}
	f := cmd.Flags()
	f.IntVar(&vmid, "vm", 0, "the VM to lay out")
	f.BoolVar(&apply, "apply", false, "write the change")
	f.BoolVar(&dryRun, "dry-run", false, "print the diff and change nothing (the default)")
	return cmd
}

// printGuestWrite ends the output of a guest config edit: what was written, or what a
// dry run found.
func printGuestWrite(g *globals, h *host.Host, path string, apply, applied bool, problems []string) {
	switch {
	case apply && applied:
		fmt.Fprintf(g.stdout, "wrote %s; the previous version is in %s.\n", path, rootedPath(h, pve.BackupDir))
	case !apply && len(problems) > 0:
		fmt.Fprintf(g.stdout, "dry run: nothing was written; --apply would stop:\n  %s\n", strings.Join(problems, "\n  "))
	case !apply:
		fmt.Fprintln(g.stdout, "dry run: nothing was written; --apply writes this change.")
	}
}
