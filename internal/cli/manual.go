package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// This file holds the exit statuses each command can end with, the one table that the
// man pages (go run ./internal/cmd/manpages), "gpusplit help exit-status" and the
// README's table are made from or checked against, so that none of them can drift from
// the others. A test makes sure every command has its entry. The files each command
// reads and writes are the man pages' own (internal/cmd/manpages/files.go).

// ExitStatus is one exit status of the command line and what it means.
type ExitStatus struct {
	Code int
	// Command is the path of the one command ("gpusplit doctor") the meaning is
	// particular to; "" for every command. A particular meaning takes the place of the
	// general one of the same code in that command.
	Command string
	Meaning string
}

const (
	exitDone   = 0
	exitFailed = 1
)

// ExitStatuses is the one table of exit statuses: a code means the same in every
// command that can end with it.
var ExitStatuses = []ExitStatus{
	{exitDone, "", "the command did what was asked, or found nothing to do"},
	{exitDone, "gpusplit status", "in sync: every device is on the driver the desired state gives it"},
	{exitDone, "gpusplit doctor", "no finding above info"},
	{exitDone, "gpusplit p2p", "every copy arrived intact"},
	{exitFailed, "", "an error: bad input, an unknown command or flag, a refusal (a dry run ends so when the real run would refuse), or a failure; standard error says what and how to go on"},
	{ExitWarnings, "gpusplit doctor", "warnings and no errors, or an error as for every command"},
	{exitFailed, "gpusplit pve cluster", "problems in the cluster's configuration (the output lists them), or an error as for every command"},
	{ExitErrors, "gpusplit doctor", "errors were found"},
	{ExitCorrupt, "gpusplit p2p", "a copy between two GPUs delivered wrong bytes"},
	{ExitDrift, "gpusplit status", "drift: a device is not on the driver the desired state gives it"},
	{ExitNoCUDA, "gpusplit p2p", "no CUDA driver (libcuda.so.1) to run on, or no gpusplit-cuda to hand over to"},
}

// ExitStatusesOf returns the exit statuses of the command at path, by code. The man
// page generator (internal/cmd/manpages) is its user; the binary is not.
func ExitStatusesOf(path string) []ExitStatus {
	var out []ExitStatus
	for _, e := range ExitStatuses {
		if e.Command == path {
			out = append(out, e)
		}
	}
	for _, e := range ExitStatuses {
		if e.Command == "" && !slices.ContainsFunc(out, func(o ExitStatus) bool { return o.Code == e.Code }) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b ExitStatus) int { return a.Code - b.Code })
	return out
}

// newExitStatusTopic is a help topic, not a command: gpusplit help exit-status.
func newExitStatusTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "exit-status",
		Short: "What each exit status means, in every command",
		Long:  exitStatusText(),
	}
}

func exitStatusText() string {
	var b strings.Builder
	b.WriteString("A code means the same in every command that can end with it; scripts can trust it.\n\n")
	for _, e := range ExitStatuses {
		who := "every command"
		if e.Command != "" {
			who = strings.TrimPrefix(e.Command, "gpusplit ")
		}
		// Wrapped as the other help texts are, under the meaning's first column.
		line := fmt.Sprintf("  %d  %-13s ", e.Code, who)
		indent := strings.Repeat(" ", len(line))
		for _, w := range strings.Fields(e.Meaning) {
			if len(line)+1+len(w) > 90 && len(line) > len(indent) {
				b.WriteString(line + "\n")
				line = indent
			}
			line += " " + w
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
