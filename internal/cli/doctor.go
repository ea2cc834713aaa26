package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/doctor"
)

// Exit codes of doctor: no finding above info, warnings, errors.
const (
	ExitWarnings = 1
	ExitErrors   = 2
)

func newDoctor(g *globals) *cobra.Command {
	var only, kernelLog string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Find the known failure modes of multi-GPU hosts and VMs, with evidence and the fix",
		Long: `Run every check on the host (sysfs, procfs, boot configuration, the kernel log) and print
what it found, the most severe first: each finding with the evidence it saw (the exact lines,
files and values) and what to do about it, and why. docs/doctor.md explains every check.

The kernel log is read from /dev/kmsg on the live host, from --kernel-log FILE (dmesg,
journalctl -k or /dev/kmsg format), or from the snapshot. Without root some checks see
less (config space past 64 bytes, other users' processes); the output says which.

Checks: ` + strings.Join(doctor.IDs(), ", ") + `.
Groups (for --only): firmware (the firmware-* checks: what the firmware set, as Linux sees it).

Exit status: 0 with nothing above info, 1 with warnings, 2 with errors.`,
		Example: `  gpusplit --demo doctor
  sudo gpusplit doctor
  gpusplit doctor --kernel-log dmesg.txt --only bar-unassigned,iommu-page-faults -o json
  sudo gpusplit doctor --only firmware`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ids []string
			for _, id := range strings.Split(only, ",") {
				if id = strings.TrimSpace(id); id != "" {
					ids = append(ids, id)
				}
			}
			h, inv, err := g.inventory()
			if err != nil {
				return err
			}
			var log io.Reader
			var logErr error
			if kernelLog != "" {
				f, err := os.Open(kernelLog)
				if err != nil {
					return fmt.Errorf("--kernel-log: %w", err)
				}
				defer f.Close()
				log = f
			} else if r, err := h.OpenKernelLog(); err == nil {
				// Streamed: the kernel log can be tens of MiB.
				defer r.Close()
				log = r
			} else {
				logErr = err
			}
			env, err := doctor.NewEnv(h, inv, log, logErr)
			if err != nil {
				return err
			}
			if kernelLog != "" {
				if err := doctor.CheckLogFile(kernelLog, env.Log); err != nil {
					return err
				}
			}
			report, err := doctor.Run(env, ids)
			if err != nil {
				return err
			}
			if g.json() {
				if err := g.writeJSON(report); err != nil {
					return err
				}
			} else {
				report.WriteText(g.stdout, h.Root())
			}
			switch report.Worst() {
			case doctor.Error:
				return &ExitError{Code: ExitErrors}
			case doctor.Warning:
				return &ExitError{Code: ExitWarnings}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&only, "only", "", "run only these checks (comma-separated ids or groups)")
	cmd.Flags().StringVar(&kernelLog, "kernel-log", "", "read the kernel log from this file (dmesg, journalctl -k or /dev/kmsg format) instead of the host's")
	return cmd
}
