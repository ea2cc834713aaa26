package cli

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/snapshot"
)

func newSnapshot(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot [-o FILE]",
		Short: "Capture what gpusplit reads into a .tar.gz that --root reads back",
		Long: `Capture what gpusplit reads from this host into a snapshot archive: the PCI parts of
sysfs with their links, IOMMU groups, NUMA nodes, the nvidia driver's /proc files, the
processes holding GPUs (name, cgroup, program; never their arguments), the kernel log,
/proc/cmdline, the boot configuration (/etc/default/grub*, /etc/kernel/cmdline,
/etc/modprobe.d) and the Proxmox files gpusplit uses (/etc/pve/mapping, the VM and
container configs). Nothing else: never /etc/pve/priv, never keys.

Every command then runs on it with --root FILE, which makes a snapshot the thing to
attach to a bug report. Run it as root, so that config space, the kernel log and every
process can be read.

-o names the archive (- for standard output); the default is
gpusplit-<hostname>-<date>.tar.gz in the current directory. A summary of what was
captured goes to standard error.`,
		Example: `  sudo gpusplit snapshot
  sudo gpusplit snapshot -o /tmp/kpro6.tar.gz
  gpusplit --demo snapshot -o demo.tar.gz && gpusplit --root demo.tar.gz topo`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{outputIsFile: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.host()
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			sum, err := snapshot.Capture(h, &buf)
			if err != nil {
				return err
			}
			file := g.output
			if file == "table" || file == "json" {
				name, _ := h.ReadString("/proc/sys/kernel/hostname")
				if name == "" {
					name = "host"
				}
				file = fmt.Sprintf("gpusplit-%s-%s.tar.gz", filepath.Base(name), time.Now().Format("20060102-150405"))
			}
			if file == "-" {
				if _, err := g.stdout.Write(buf.Bytes()); err != nil {
					return err
				}
			} else if err := atomicfile.Write(file, buf.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "captured %s: %d files, %d links, %d directories, %s of contents, %s compressed, into %s\n",
				sum.Root, sum.Files, sum.Links, sum.Directories, byteSize(sum.Bytes), byteSize(sum.ArchiveBytes), file)
			if len(sum.Unreadable) > 0 {
				fmt.Fprintf(g.stderr, "warning: %d files could not be read (run as root to capture them): %s\n",
					len(sum.Unreadable), strings.Join(first(sum.Unreadable, 5), ", "))
			}
			return nil
		},
	}
}

func byteSize(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}
