package bind

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// StaleError is a rollback stopped under the lock, before any change, because what the
// user was shown is no longer so: the journal was replaced by another apply (Replaced is
// its time), or, Replaced zero, the drivers of the devices changed.
type StaleError struct {
	Replaced time.Time
}

func (e *StaleError) Error() string {
	if !e.Replaced.IsZero() {
		return fmt.Sprintf("nothing was changed: %s was replaced since it was shown (an apply of %s)", JournalPath, e.Replaced.Local().Format("2006-01-02 15:04:05"))
	}
	return "nothing was changed: the devices' drivers changed since they were shown (another run or a guest's hook moved some)"
}

// RollbackShown puts back the devices todo of journal shown, which the user was shown
// and agreed to, under the lock l. Another apply or a guest's hook may have run while
// the user read them, so first the journal, the drivers and the holders (of the GPUs
// sels select) are read again: a change is a *StaleError, a device held open a
// *HeldError with its holders, and nothing is changed. A run that fails part way says
// what was put back (ExplainFailure).
func RollbackShown(ctx context.Context, l *Lock, h *host.Host, k Kernel, shown *Journal, todo []Prior, sels []pci.Selector, s Scope, opts Options) (*Result, error) {
	now, err := ReadJournal(h)
	if err != nil {
		return nil, fmt.Errorf("nothing was changed: %w", err)
	}
	if !now.Time.Equal(shown.Time) {
		return nil, &StaleError{Replaced: now.Time}
	}
	if !slices.Equal(NotBack(k, shown.Devices), todo) {
		return nil, &StaleError{}
	}
	inv, err := inventory.Build(h, sels)
	if err != nil {
		return nil, err
	}
	if held := HeldDevices(inv, todo); len(held) > 0 {
		return nil, ExplainHeld(&HeldError{Held: held})
	}
	part := *shown
	part.Devices = todo
	res, err := Rollback(ctx, l, k, &part, s, nil, opts)
	if err != nil {
		return res, ExplainFailure(err, res)
	}
	return res, nil
}
