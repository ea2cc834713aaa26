package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// The one contract of every command that changes anything (README, "Commands that
// change things"; contract_test.go holds each to it):
//
//   - it shows the whole change first;
//   - on a terminal it then asks; --yes goes ahead without a question;
//   - without a terminal and without --yes it writes nothing, and says how to go on;
//   - --dry-run shows the change and exits 0 when the real run would go through, 1 with
//     every reason when it would stop.

// writeFlags are the flags of the contract.
type writeFlags struct {
	dryRun, yes bool
	// apply is --apply, which earlier releases needed to write: now --yes.
	apply bool
}

// writesKey marks, in a command's annotations, a command that changes things.
const writesKey = "writes"

// contractText ends the help, and so the manual page, of every command that changes
// things: the README's table, in words.
const contractText = `

Like every command that changes things, it shows the whole change first, then asks on a
terminal; --yes makes the change unasked; without a terminal and without --yes it
changes nothing and says how to go on (exit status 1); --dry-run shows the change and
exits 0 when the real run would go through, 1 with every reason when it would stop.`

func (w *writeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&w.dryRun, "dry-run", false, "show the change and every reason it would stop; change nothing")
	f.BoolVarP(&w.yes, "yes", "y", false, "make the change without asking (needed without a terminal)")
	// --apply, which earlier releases needed to write, stays for the scripts that use it.
	f.BoolVar(&w.apply, "apply", false, "the same as --yes")
	_ = f.MarkHidden("apply")
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[writesKey] = "true"
	if cmd.Long == "" {
		cmd.Long = cmd.Short + "."
	}
	cmd.Long += contractText
}

// check refuses flags that contradict each other.
func (w *writeFlags) check() error {
	if w.dryRun && (w.yes || w.apply) {
		return errors.New("--dry-run and --yes contradict each other; use one")
	}
	return nil
}

// writing says the run may change things: not a dry run. It is what decides whether a
// command needs root.
func (w *writeFlags) writing() bool { return !w.dryRun }

// confirmed says --yes was given: the change goes ahead unasked, and a JSON document
// shows only its result.
func (w *writeFlags) confirmed() bool { return w.yes || w.apply }

// showsCheck says whether the check a command ran is shown: always, but with --yes and
// -o json when the change goes ahead, where the JSON is the result alone.
func (w *writeFlags) showsCheck(g *globals, stop bool) bool {
	return stop || !g.json() || !w.confirmed()
}

// errNoTerminal ends a run that has shown its change and has no one to ask.
var errNoTerminal = errors.New("nothing was changed: there is no terminal to ask on; run again with --yes to make this change, or --dry-run to only look")

// proceed is asked once the change is shown and nothing stops it: --yes goes ahead, a
// terminal asks, and otherwise nothing is changed. -o json has no question: it needs
// --yes.
func (w *writeFlags) proceed(g *globals, question string) error {
	if w.confirmed() {
		return nil
	}
	if !g.terminal || g.json() {
		return errNoTerminal
	}
	fmt.Fprintf(g.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(g.stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return errors.New("nothing was changed: not confirmed")
	}
	return nil
}

// writeGuest carries one guest config edit through the contract: the check (Proxmox's
// lock, lock:, permissions), the change shown by show (which prints the diff, or the
// JSON document doc), the question, and the write of the edit as shown: pve.Writer
// refuses a file that changed since it was read.
func writeGuest(g *globals, h *host.Host, w *writeFlags, command string, edit pve.Edit, res *pve.GuestWrite, doc any, show func()) error {
	var err error
	res.Files, res.Problems, _, err = pve.WriteGuest(h, command, false, edit)
	stop := err != nil || w.dryRun || edit.Old == edit.New
	if w.showsCheck(g, stop) {
		if g.json() {
			if jerr := g.writeJSON(doc); jerr != nil {
				return jerr
			}
		} else {
			show()
			pve.WriteGuestCheck(g.stdout, res.Problems, w.dryRun)
		}
	}
	if stop {
		return stopped(pveErr(err), res.Problems)
	}
	if err := w.proceed(g, "Write "+edit.Path+"?"); err != nil {
		return err
	}
	res.Files, res.Problems, res.Applied, err = pve.WriteGuest(h, command, true, edit)
	if g.json() {
		if jerr := g.writeJSON(doc); jerr != nil {
			return jerr
		}
	} else if res.Applied {
		fmt.Fprintf(g.stdout, "wrote %s; the previous version is in %s.\n", edit.Path, rootedPath(h, pve.BackupDir))
	}
	return pveErr(err)
}

// stopped is the error of a check that found what would stop the write: nothing was
// written, and the problems, which the output listed too, are in the message.
func stopped(err error, problems []string) error {
	if !errors.Is(err, errSyncStops) || len(problems) == 0 {
		return err
	}
	return fmt.Errorf("nothing was written; %s:\n  %s", plural.S(len(problems), "problem"), strings.Join(problems, "\n  "))
}
