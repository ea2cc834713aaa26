package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/pve"
)

func newPVEBackups(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backups",
		Short: "List the previous versions of the Proxmox files gpusplit replaced; restore or prune them",
		Long: `Every file gpusplit replaces under /etc/pve keeps its previous version in
` + pve.BackupDir + ` (outside /etc/pve), with the time and the command that replaced
it. After each write the oldest backups of each file beyond the last ` + fmt.Sprint(pve.DefaultKeep) + ` are removed.

  pve backups                 list them, oldest first
  pve backups restore ID      put one back, under Proxmox's locks and the checks of any
                              write; what the file holds now is backed up first
  pve backups prune --keep N  keep the last N of each file`,
		Example: `  gpusplit pve backups
  sudo gpusplit pve backups restore etc_pve_mapping_pci.cfg.20261201T101500.123456789Z --dry-run
  sudo gpusplit pve backups prune --keep 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.host()
			if err != nil {
				return err
			}
			doc, err := pve.ReportBackups(h, rootedPath(h, pve.BackupDir))
			if err != nil {
				return err
			}
			if g.json() {
				return g.writeJSON(doc)
			}
			return doc.WriteText(g.stdout, g.width())
		},
	}
	cmd.AddCommand(newPVEBackupsRestore(g), newPVEBackupsPrune(g))
	return cmd
}

func newPVEBackupsRestore(g *globals) *cobra.Command {
	var w writeFlags
	cmd := &cobra.Command{
		Use:   "restore ID",
		Short: "Put a backup back in place, as one checked write with a backup of its own (shows the diff, then asks)",
		Args:  exactArgs(1, "pve backups restore needs the ID of a backup (gpusplit pve backups lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(); err != nil {
				return err
			}
			if w.writing() {
				if err := needRoot(g, "pve backups restore", "it writes /etc/pve and takes Proxmox's locks", pve.WriteDirs...); err != nil {
					return err
				}
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			command := "pve backups restore " + args[0]
			doc, err := pve.RestoreBackup(h, args[0], true, command, nil)
			if doc == nil {
				return err
			}
			stop := err != nil || w.dryRun || doc.Diff == ""
			if w.showsCheck(g, stop) {
				if jerr := showRestore(g, h, doc, w.dryRun, false); jerr != nil {
					return jerr
				}
			}
			if stop {
				return err
			}
			if err := w.proceed(g, "Restore backup "+args[0]+"?"); err != nil {
				return err
			}
			if doc, err = pve.RestoreBackup(h, args[0], false, command, doc); doc == nil {
				return err
			}
			if jerr := showRestore(g, h, doc, false, true); jerr != nil {
				return jerr
			}
			return err
		},
	}
	w.register(cmd)
	return cmd
}

// showRestore prints a restore's check, or what it wrote (written); or JSON.
func showRestore(g *globals, h *host.Host, doc *pve.RestoreReport, dryRun, written bool) error {
	if g.json() {
		return g.writeJSON(doc)
	}
	doc.WriteText(g.stdout, dryRun, written, rootedPath(h, pve.BackupDir))
	return nil
}

func newPVEBackupsPrune(g *globals) *cobra.Command {
	var keep int
	var w writeFlags
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove the oldest backups of each file, keeping the last --keep (shows them, then asks)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.check(); err != nil {
				return err
			}
			if w.writing() {
				if err := needRoot(g, "pve backups prune", "it removes files from "+pve.BackupDir, pve.BackupDir); err != nil {
					return err
				}
			}
			h, err := g.host()
			if err != nil {
				return err
			}
			doc, err := pve.CheckPrune(h, keep)
			if err != nil {
				return err
			}
			stop := w.dryRun || len(doc.Removed) == 0
			if w.showsCheck(g, stop) {
				if jerr := showPrune(g, h, doc); jerr != nil {
					return jerr
				}
			}
			if stop {
				return nil
			}
			if !h.Writable() {
				return fmt.Errorf("cannot prune in %s: %w", h.Root(), errSnapshot)
			}
			if err := w.proceed(g, fmt.Sprintf("Remove %s?", plural.S(len(doc.Removed), "backup"))); err != nil {
				return err
			}
			if doc, err = pve.PruneBackups(h, keep); err != nil {
				return err
			}
			return showPrune(g, h, doc)
		},
	}
	cmd.Flags().IntVar(&keep, "keep", pve.DefaultKeep, "how many backups of each file to keep")
	w.register(cmd)
	return cmd
}

// showPrune prints a prune's check or what it removed; or JSON.
func showPrune(g *globals, h *host.Host, doc *pve.PruneReport) error {
	if g.json() {
		return g.writeJSON(doc)
	}
	doc.WriteText(g.stdout, rootedPath(h, pve.BackupDir))
	return nil
}
