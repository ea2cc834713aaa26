package hook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/host"
)

// HandOffDir keeps, per guest, the record of its last hand-off, ID.json: what the
// metrics report of the hooks. It is under /run with the hooks' journals, so the records
// last until the next boot, as the counts they keep do.
const HandOffDir = bind.LockDir + "/handoffs"

// The results a hand-off ends with.
const (
	ResultOK     = "ok"
	ResultFailed = "failed" // refused or failed: the phase returned an error
	// ResultDeadline is a failure after the phase's deadline passed: it stopped moving
	// devices and put back what it had moved.
	ResultDeadline = "deadline"
)

// Results are the results, in the order the metrics list them.
var Results = []string{ResultOK, ResultFailed, ResultDeadline}

// maxHandOffBytes caps a record: one is a few hundred bytes. A larger file is not one
// gpusplit wrote.
const maxHandOffBytes = 64 << 10

// maxErrorBytes caps the error kept in a record: its first line says what stopped the
// phase; the rest is in the task log and the system journal.
const maxErrorBytes = 512

// HandOff is the record of the last phase of a guest's hookscript that had work to do:
// a VM's pre-start and post-stop, which move its GPUs, and a container's pre-start,
// which checks them. Proxmox runs a guest's phases one at a time, under the guest's
// lock, so the record of one guest has one writer at a time.
type HandOff struct {
	Guest int    `json:"guest"`
	Kind  string `json:"kind"` // "vm" or "container"
	Phase string `json:"phase"`
	// Result is ResultOK, ResultFailed or ResultDeadline.
	Result string `json:"result"`
	// Error is the first line of what stopped the phase; "" when it ended well.
	Error string `json:"error,omitempty"`
	// Start is when the phase began, Seconds how long it took to its end.
	Start   time.Time `json:"start"`
	Seconds float64   `json:"seconds"`
	// Counts are how many phases of the guest ended with each result since the host
	// booted: phase, then result.
	Counts map[string]map[string]int `json:"counts"`
}

// handOffPath is where the record of a guest lies.
func handOffPath(guest int) string { return fmt.Sprintf("%s/%d.json", HandOffDir, guest) }

// recordHandOff writes the record of the phase that just ended, with the guest's counts
// carried on from its earlier record. Only the live host and a simulated one (the
// demo's scratch copy) keep records: a copy of a host (--root) is never written to.
func recordHandOff(h *host.Host, rec HandOff) error {
	if h.Root() != "/" && !h.Simulated() {
		return nil
	}
	rec.Counts = map[string]map[string]int{}
	if before, err := readHandOff(h, rec.Guest); err == nil && before.Guest == rec.Guest {
		rec.Counts = before.Counts
	}
	if rec.Counts[rec.Phase] == nil {
		rec.Counts[rec.Phase] = map[string]int{}
	}
	rec.Counts[rec.Phase][rec.Result]++
	if len(rec.Error) > maxErrorBytes {
		rec.Error = rec.Error[:maxErrorBytes]
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	dir, err := h.OSPath(HandOffDir)
	if err != nil {
		return err
	}
	if err := atomicfile.PrivateDir(dir); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, strconv.Itoa(rec.Guest)+".json"), append(b, '\n'), 0o600)
}

// readHandOff reads the record of a guest.
func readHandOff(h *host.Host, guest int) (HandOff, error) {
	var rec HandOff
	b, err := h.ReadFile(handOffPath(guest))
	if err != nil {
		return rec, err
	}
	if len(b) > maxHandOffBytes {
		return rec, fmt.Errorf("%s is %d bytes, more than a record gpusplit writes (%d at most)", handOffPath(guest), len(b), maxHandOffBytes)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s is not a hand-off record: %v", handOffPath(guest), err)
	}
	if rec.Guest != guest || !slices.Contains(Results, rec.Result) {
		return rec, fmt.Errorf("%s is not the record of guest %d", handOffPath(guest), guest)
	}
	if rec.Counts == nil {
		rec.Counts = map[string]map[string]int{}
	}
	return rec, nil
}

// HandOffs returns the record of each guest's last hand-off, by guest id; none when no
// hook has run since the boot. Records that cannot be read are left out and counted in
// damaged. The directory is root's: for another user the error wraps fs.ErrPermission.
func HandOffs(h *host.Host) (recs []HandOff, damaged int, err error) {
	names, err := h.ReadDir(HandOffDir)
	if errors.Is(err, fs.ErrNotExist) {
		return []HandOff{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("the hand-off records: %w", err)
	}
	recs = []HandOff{}
	for _, name := range names {
		id, ok := strings.CutSuffix(name, ".json")
		guest, err := strconv.Atoi(id)
		if !ok || err != nil || strconv.Itoa(guest) != id {
			continue // atomicfile's temporary files
		}
		rec, err := readHandOff(h, guest)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // gone since the listing
		case err != nil:
			damaged++
			continue
		}
		recs = append(recs, rec)
	}
	slices.SortFunc(recs, func(a, b HandOff) int { return a.Guest - b.Guest })
	return recs, damaged, nil
}
