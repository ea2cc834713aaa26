package cli

import (
	"errors"
	"strings"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// The ways out that the command's flags give. A domain package says what went wrong and
// carries a typed reason (an error type, a field, a Way); the words with flag names are
// here. applyContract passes every command's error through flagWays, so an error is worded
// the same whichever command returns it.

// flagWays is err with the way out its typed reason has, worded with the flags; err as it
// is when it has none, or was worded already.
func flagWays(err error) error {
	if err == nil {
		return nil
	}
	if ee, ok := err.(*ExitError); ok {
		return &ExitError{Code: ee.Code, Err: flagWays(ee.Err)}
	}
	var (
		worded    *wordedError
		noGPUs    *plan.NoGPUsError
		untrusted *bind.UntrustedError
		binary    *persist.BinaryError
	)
	switch {
	case errors.As(err, &worded):
		return err
	case errors.As(err, &untrusted):
		return untrustedJournal(err, untrusted)
	case errors.As(err, &binary):
		return reword(err, binary.Error(), binary.Message(binaryAdvice))
	case errors.As(err, &noGPUs):
		return &wordedError{err: err, msg: err.Error() + " (use --devices to choose which devices count as GPUs)"}
	}
	return err
}

// reword is err with inner, the message of an error in its chain, replaced by worded:
// the list of what stops an apply has it among others, not always last.
func reword(err error, inner, worded string) error {
	return &wordedError{err: err, msg: strings.Replace(err.Error(), inner, worded, 1)}
}

// binaryAdvice is the way out of a refused binary that the command line adds.
const binaryAdvice = ", or name such a file with --binary PATH"

// journalWays words the ways out of a journal's problems with rollback's flags.
var journalWays = map[bind.Way]string{
	bind.ForceIfNotRebooted: "if the host has not rebooted since that apply, --force rolls back anyway",
	bind.ForceIfRenamed:     "if this host was only renamed since, --force rolls back",
	bind.ForceTheOthers:     "--force rolls back the others",
	bind.SameDevices:        "if the apply ran with --devices, run rollback with the same --devices",
}

// journalProblem is a problem of the journal with its way out.
func journalProblem(p bind.Problem) string {
	if w := journalWays[p.Way]; w != "" {
		return p.String() + "; " + w
	}
	return p.String()
}

// untrustedJournal words err, a refused journal e, in two lines: what does not fit, and
// the way out; each problem, and what --force cannot set aside, are its details (-v,
// JSON).
func untrustedJournal(err error, e *bind.UntrustedError) error {
	way := "no flag sets this aside"
	if e.Forcible() {
		way = "if the journal is of this host as it is now, run again with --force"
	}
	w := &wordedError{err: err, msg: err.Error() + "\n" + way + "; else gpusplit status and gpusplit apply reach the split (-v: each field and why)"}
	final := false
	for _, p := range e.Problems {
		w.details = append(w.details, journalProblem(p))
		final = final || p.Final
	}
	if final {
		w.details = append(w.details, "--force sets aside only the host, the boot and a device that is gone; never a bad driver name, a device whose ids changed, or a device that is not a GPU, a GPU's function or a member of a GPU's IOMMU group")
	}
	return w
}
