package persist

import (
	"errors"
	"fmt"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// Step is one thing install or remove does, told to the caller as it is done so that a
// person can follow it; one field is set.
type Step struct {
	// Warnings are said before the first write: what is worth knowing of the binary.
	Warnings []string
	// Change is a file written, left as it was or removed.
	Change *Change
	// Runs is the binary the unit runs, once every file is in place.
	Runs string
	// Command is a system command run, failed, or not run under another root.
	Command *Command
}

// The system commands that make systemd and udev read the files.
var (
	enableCommands  = [][]string{{"systemctl", "daemon-reload"}, {"systemctl", "enable", "gpusplit.service"}, {"udevadm", "control", "--reload"}}
	disableCommands = [][]string{{"systemctl", "disable", "gpusplit.service"}}
	reloadCommands  = [][]string{{"systemctl", "daemon-reload"}, {"udevadm", "control", "--reload"}}
)

// InstallBoot is persist install: unless dryRun, it writes files (bf's, and the desired
// state file where install writes one) as one change, then enables the unit and has
// systemd and udev read them. Every reason to stop (InstallStops) is known before the
// first write: then nothing is written, dry run or not, and the error holds them all.
// progress is told each step as it is done.
func (bf *Boot) InstallBoot(h *host.Host, files []File, dryRun bool, progress func(Step)) (ChangeReport, error) {
	stops := bf.InstallStops(h)
	doc := bf.InstallReport(h, files, dryRun, stops)
	switch {
	case len(stops) > 0 && dryRun:
		return doc, fmt.Errorf("dry run: nothing was written, and install would stop: %w", errors.Join(stops...))
	case len(stops) > 0:
		return doc, fmt.Errorf("nothing was written: %w", errors.Join(stops...))
	case dryRun:
		return doc, nil
	}
	progress(Step{Warnings: bf.Binary.Notes})
	changes, err := Install(h, files)
	doc.Changes = append(doc.Changes, changes...)
	tellChanges(changes, progress)
	if err != nil {
		return doc, err
	}
	progress(Step{Runs: bf.Binary.Path})
	doc.Commands = runTelling(h, enableCommands, progress)
	doc.Notes = append(doc.Notes, InitramfsAdvice(h)...)
	return doc, nil
}

// RemoveCheck is what Uninstall would do, changing nothing: the files it removes, and
// what stops it (a root that cannot be written).
func RemoveCheck(h *host.Host) ChangeReport {
	doc := ChangeReport{DryRun: true, Files: FileStates(h, Installed(h)), Problems: []string{}, Changes: []Change{}, Commands: []Command{}, Notes: []string{}}
	if !h.Writable() {
		doc.Problems = append(doc.Problems, fmt.Sprintf("cannot remove from %s: %v", h.Root(), host.ErrReadOnly))
	}
	return doc
}

// Uninstall is persist remove: it disables the unit, removes the files, all of them or
// none, and has systemd and udev forget them. The desired state file stays, and so do
// the drivers bound now. progress is told each step as it is done.
func Uninstall(h *host.Host, progress func(Step)) (ChangeReport, error) {
	doc := ChangeReport{Files: []FileReport{}, Problems: []string{}, Notes: []string{}}
	doc.Commands = runTelling(h, disableCommands, progress)
	changes, err := Remove(h)
	doc.Changes = append([]Change{}, changes...)
	tellChanges(changes, progress)
	if err != nil {
		return doc, err
	}
	doc.Commands = append(doc.Commands, runTelling(h, reloadCommands, progress)...)
	doc.Notes = append(doc.Notes, fmt.Sprintf("The desired state %s is kept; the drivers bound now stay as they are.", plan.DefaultConfig))
	doc.Notes = append(doc.Notes, InitramfsAdvice(h)...)
	return doc, nil
}

func tellChanges(changes []Change, progress func(Step)) {
	for i := range changes {
		progress(Step{Change: &changes[i]})
	}
}

// runTelling runs cmds (Run) and tells progress of each.
func runTelling(h *host.Host, cmds [][]string, progress func(Step)) []Command {
	out := Run(h, cmds)
	for i := range out {
		progress(Step{Command: &out[i]})
	}
	return out
}
