package cli

import (
	"errors"
	"strings"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/doctor"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/split"
)

// The ways out that the command's flags give. A domain package says what went wrong and
// carries a typed reason (an error type, a field, a Way); the words with flag names are
// here. applyContract passes every command's error through flagWays, so an error is worded
// the same whichever command returns it.

// flagWays is err with the ways out its typed reasons have, worded with the flags, each
// in place: the list of what stops an apply holds some among others, and a choice of
// GPUs (--vfio) may name a device that is no GPU (--devices). err as it is when it has
// none, or was worded already.
func flagWays(err error) error {
	if err == nil {
		return nil
	}
	if ee, ok := err.(*ExitError); ok {
		return &ExitError{Code: ee.Code, Err: flagWays(ee.Err)}
	}
	var (
		worded    *wordedError
		untrusted *bind.UntrustedError
		input     *plan.InputError
		notGPU    *plan.NotAGPUError
		shared    *plan.SharedGroupError
		noGPUs    *plan.NoGPUsError
		binary    *persist.BinaryError
		snippet   *pve.BinaryRefusedError
		config    *split.ConfigExistsError
		deadline  *hook.DeadlineError
		check     *doctor.UnknownCheckError
		logFile   *doctor.LogFileError
	)
	if errors.As(err, &worded) {
		return err
	}
	if errors.As(err, &untrusted) {
		return untrustedJournal(err, untrusted)
	}
	msg := err.Error()
	reword := func(inner, words string) { msg = strings.Replace(msg, inner, words, 1) }
	if errors.As(err, &input) {
		reword(input.Error(), "--"+input.Error())
	}
	if errors.As(err, &notGPU) {
		reword(notGPU.Error(), notGPU.Error()+": --devices chooses which devices count as GPUs")
	}
	if errors.As(err, &shared) {
		reword(shared.Error(), shared.Message(" (--allow-shared-groups)"))
	}
	if errors.As(err, &noGPUs) {
		reword(noGPUs.Error(), noGPUs.Error()+" (use --devices to choose which devices count as GPUs)")
	}
	if errors.As(err, &binary) {
		reword(binary.Error(), binary.Message(binaryAdvice))
	}
	if errors.As(err, &snippet) {
		reword(snippet.Error(), snippet.Message(binaryAdvice))
	}
	if errors.As(err, &config) {
		reword(config.Error(), config.Message("--vfio"))
	}
	if errors.As(err, &deadline) {
		reword(deadline.Error(), deadline.Error()+" (gpusplit hook --deadline, or pve hook install --deadline, sets another)")
	}
	if errors.As(err, &check) {
		reword(check.Error(), check.Error()+"; gpusplit doctor --help lists the checks and groups")
	}
	if errors.As(err, &logFile) {
		reword(logFile.Error(), logFile.Message("--kernel-log"))
	}
	if msg == err.Error() {
		return err
	}
	return &wordedError{err: err, msg: msg}
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
