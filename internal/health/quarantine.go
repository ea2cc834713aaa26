package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Dir holds a record per quarantined device, ADDR.json. It is under /run, so the records
// last until the host reboots: a reboot resets every device, which is one of the ways
// out of quarantine.
const Dir = "/run/gpusplit/quarantine"

// maxRecordBytes caps a record: one is a few KB (a dozen lines of evidence). A larger
// file is not one gpusplit wrote.
const maxRecordBytes = 64 << 10

// RecordPath is where the record of device a lies.
func RecordPath(a pci.Address) string { return Dir + "/" + a.String() + ".json" }

// Record says why a device was quarantined: what found it broken, when, and how.
type Record struct {
	Device pci.Address `json:"device"`
	// GPU is the GPU the device belongs to: itself, or the GPU of its slot or IOMMU
	// group for a companion function.
	GPU pci.Address `json:"gpu"`
	// Guest is the VM whose stop found it broken; Phase the hook phase that did.
	Guest int    `json:"guest"`
	Phase string `json:"phase"`
	// Driver is the driver it was to go back to ("" for none).
	Driver   string     `json:"driver"`
	Time     time.Time  `json:"time"`
	Evidence []Evidence `json:"evidence"`
	// Baseline is its link at the VM's start, what a release checks it against again.
	Baseline Baseline `json:"baseline"`
	// Damaged says why the record could not be read, by List: the device, from the
	// file's name, is all that is known of it, and it stays quarantined.
	Damaged string `json:"damaged,omitempty"`
}

// Quarantine writes the record of r.Device, replacing any earlier one, atomically: a
// reader sees the old record or the new one. The directory is made 0700 and the file
// 0600, since the evidence can name guests and devices.
func Quarantine(h *host.Host, r Record) error {
	if r.Damaged != "" {
		return fmt.Errorf("quarantine %s: a damaged record is not written back", r.Device)
	}
	if r.Evidence == nil {
		r.Evidence = []Evidence{}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("quarantine %s: %w", r.Device, err)
	}
	dir, err := recordDir(h)
	if err != nil {
		return fmt.Errorf("quarantine %s: %w", r.Device, err)
	}
	p := filepath.Join(dir, r.Device.String()+".json")
	if err := atomicfile.Write(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("quarantine %s: writing %s: %w", r.Device, RecordPath(r.Device), err)
	}
	return nil
}

// recordDir returns Dir on this machine, made if missing, a directory only root can
// enter (atomicfile.PrivateDir): another user could read or plant records there.
func recordDir(h *host.Host) (string, error) {
	dir, err := h.OSPath(Dir)
	if err != nil {
		return "", err
	}
	if err := atomicfile.PrivateDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// List returns the quarantine records, in address order; none when the directory does
// not exist. A record that cannot be read or parsed is listed with Damaged set, its
// device taken from its file's name: it is still a quarantined device. Files whose
// names are not ADDR.json (atomicfile's temporary files) are passed over. Every read
// is host.Host's: capped, and never of a FIFO.
func List(h *host.Host) ([]Record, error) {
	names, err := h.ReadDir(Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []Record{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the quarantine records: %w", err)
	}
	out := []Record{}
	for _, name := range names {
		base, ok := strings.CutSuffix(name, ".json")
		if !ok {
			continue
		}
		a, err := pci.ParseAddress(base)
		if err != nil || a.String() != base {
			continue
		}
		r, err := read(h, a)
		if err != nil {
			continue // released since the listing
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y Record) int { return x.Device.Compare(y.Device) })
	return out, nil
}

// Read returns the record of device a; an error wrapping fs.ErrNotExist when it has
// none. A damaged record is returned with Damaged set, and no error.
func Read(h *host.Host, a pci.Address) (Record, error) {
	r, err := read(h, a)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, fmt.Errorf("%s is not quarantined: %s does not exist: %w", a, RecordPath(a), fs.ErrNotExist)
	}
	return r, err
}

// read reads the record of a. The only error is fs.ErrNotExist's (a record removed since
// the listing): anything else makes a damaged record.
func read(h *host.Host, a pci.Address) (Record, error) {
	damaged := func(why string) (Record, error) {
		return Record{Device: a, GPU: a, Evidence: []Evidence{}, Damaged: why}, nil
	}
	b, err := h.ReadFile(RecordPath(a))
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, err
	}
	if err != nil {
		return damaged(err.Error())
	}
	if len(b) > maxRecordBytes {
		return damaged(fmt.Sprintf("%s is %d bytes, more than a record gpusplit writes (%d at most)", RecordPath(a), len(b), maxRecordBytes))
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return damaged(fmt.Sprintf("%s is not a record: %v", RecordPath(a), err))
	}
	if r.Device != a {
		return damaged(fmt.Sprintf("%s is the record of %s", RecordPath(a), r.Device))
	}
	if r.Evidence == nil {
		r.Evidence = []Evidence{}
	}
	r.Damaged = ""
	return r, nil
}

// StillBrokenError refuses a release: the device fails its check again.
type StillBrokenError struct {
	Device   pci.Address
	Evidence []Evidence
}

func (e *StillBrokenError) Error() string {
	return fmt.Sprintf("%s stays quarantined: it is still broken:\n  %s\nReset it with no VM using it (echo 1 > /sys/bus/pci/devices/%s/reset) or reboot the host, then release it again; gpusplit doctor says what else to check. Forcing the release hands it back broken",
		e.Device, strings.Join(Lines(e.Evidence), "\n  "), e.Device)
}

// Free ends the quarantine of device a: it checks the device again as a VM's stop does,
// against the link its record kept, and refuses (*StillBrokenError) while it still fails,
// unless force; then it removes the record. It returns the record and what the check
// found now. It moves no device.
func Free(h *host.Host, a pci.Address, force bool) (Record, []Evidence, error) {
	rec, err := Read(h, a)
	if err != nil {
		return rec, nil, err
	}
	ev := CheckReturn(h, a, rec.Baseline)
	if len(ev) > 0 && !force {
		return rec, ev, &StillBrokenError{Device: a, Evidence: ev}
	}
	return rec, ev, Release(h, a)
}

// Release removes the record of device a; an error wrapping fs.ErrNotExist when there
// is none. It does not check the device: Free does. The record's name is removed, never
// what a link there points to.
func Release(h *host.Host, a pci.Address) error {
	dir, err := h.OSPath(Dir)
	if err != nil {
		return fmt.Errorf("release %s: %w", a, err)
	}
	if err := os.Remove(filepath.Join(dir, a.String()+".json")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s is not quarantined: %s does not exist: %w", a, RecordPath(a), fs.ErrNotExist)
		}
		return fmt.Errorf("release %s: removing %s: %w", a, RecordPath(a), err)
	}
	return nil
}
