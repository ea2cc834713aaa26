package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/table"
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
			list, err := pve.ListBackups(h)
			if err != nil {
				return err
			}
			if g.json() {
				return g.writeJSON(struct {
					Dir     string       `json:"dir"`
					Backups []pve.Backup `json:"backups"`
				}{rootedPath(h, pve.BackupDir), list})
			}
			if len(list) == 0 {
				fmt.Fprintf(g.stdout, "No backups in %s: gpusplit has not replaced a Proxmox file here.\n", rootedPath(h, pve.BackupDir))
				return nil
			}
			fmt.Fprintf(g.stdout, "%s in %s:\n\n", plural.S(len(list), "backup"), rootedPath(h, pve.BackupDir))
			// SIZE goes first, then FILE, which the ID names too; the command wraps.
			t := table.New(
				table.Column{Header: "ID"},
				table.Column{Header: "FILE", Drop: 2},
				table.Column{Header: "REPLACED"},
				table.Column{Header: "SIZE", Drop: 1},
				table.Column{Header: "BY", Fit: table.Wrap},
			)
			for _, b := range list {
				t.Add(b.ID, b.Path, b.Time.Local().Format("2006-01-02 15:04:05"), strconv.FormatInt(b.Size, 10), orDash(b.Command))
			}
			return t.Write(g.stdout, g.width())
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
				if jerr := showRestore(g, doc, w.dryRun); jerr != nil {
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
			if g.json() {
				if jerr := g.writeJSON(doc); jerr != nil {
					return jerr
				}
				return err
			}
			for _, f := range doc.Files {
				fmt.Fprintf(g.stdout, "%-13s %s\n", f.Outcome, f.Path)
			}
			if err == nil {
				fmt.Fprintf(g.stdout, "restored %s; the version it replaced is in %s.\n", args[0], rootedPath(h, pve.BackupDir))
			}
			return err
		},
	}
	w.register(cmd)
	return cmd
}

// showRestore prints the check of a restore: the diff, and what would stop it.
func showRestore(g *globals, doc *pve.RestoreReport, dryRun bool) error {
	if g.json() {
		return g.writeJSON(doc)
	}
	switch {
	case doc.Diff == "":
		fmt.Fprintf(g.stdout, "the file already holds backup %s: nothing to restore.\n", doc.ID)
	case len(doc.Problems) > 0:
		fmt.Fprint(g.stdout, doc.Diff)
		fmt.Fprintf(g.stdout, "nothing was written; the restore would stop:\n  %s\n", strings.Join(doc.Problems, "\n  "))
	default:
		fmt.Fprint(g.stdout, doc.Diff)
		if dryRun {
			fmt.Fprintln(g.stdout, "dry run: nothing was written; without --dry-run the backup is put back.")
		}
	}
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
			gone, err := pve.Prunable(h, keep)
			if err != nil {
				return err
			}
			if gone == nil {
				gone = []string{}
			}
			doc := struct {
				Keep    int      `json:"keep"`
				DryRun  bool     `json:"dry_run"`
				Removed []string `json:"removed"`
			}{keep, true, gone}
			stop := w.dryRun || len(gone) == 0
			if w.showsCheck(g, stop) {
				if g.json() {
					if err := g.writeJSON(doc); err != nil {
						return err
					}
				} else {
					for _, id := range gone {
						fmt.Fprintf(g.stdout, "remove %s\n", id)
					}
					fmt.Fprintf(g.stdout, "%s to remove; the last %d of each file stay in %s.\n", plural.S(len(gone), "backup"), keep, rootedPath(h, pve.BackupDir))
				}
			}
			if stop {
				return nil
			}
			if !h.Writable() {
				return fmt.Errorf("cannot prune in %s: %w", h.Root(), errSnapshot)
			}
			if err := w.proceed(g, fmt.Sprintf("Remove %s?", plural.S(len(gone), "backup"))); err != nil {
				return err
			}
			if doc.Removed, err = pve.Prune(h, keep); err != nil {
				return err
			}
			if doc.Removed == nil {
				doc.Removed = []string{}
			}
			doc.DryRun = false
			if g.json() {
				return g.writeJSON(doc)
			}
			fmt.Fprintf(g.stdout, "removed %s.\n", plural.S(len(doc.Removed), "backup"))
			return nil
		},
	}
	cmd.Flags().IntVar(&keep, "keep", pve.DefaultKeep, "how many backups of each file to keep")
	w.register(cmd)
	return cmd
}
