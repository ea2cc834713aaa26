package bind

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gpusplit/gpusplit/internal/lazyre"
)

// RollbackReport is what rollback found and did, and its JSON form (docs/json.md).
type RollbackReport struct {
	Host string `json:"host"`
	// Applied is when the apply of the journal ran; nil without a journal, where
	// nothing was applied and there is nothing to roll back.
	Applied *time.Time `json:"applied"`
	DryRun  bool       `json:"dry_run"`
	// Journal is how many devices the apply moved; Devices those not back yet.
	Journal  int              `json:"journal_devices"`
	Devices  []RollbackDevice `json:"devices"`
	Forced   []string         `json:"forced"`
	Problems []string         `json:"problems"`
	Restored []string         `json:"restored"`
}

// RollbackDevice is a device not back on its prior driver: how it is bound now, and
// how it was before the apply.
type RollbackDevice struct {
	Device        string `json:"device"`
	Driver        string `json:"driver"`
	Override      string `json:"driver_override"`
	PriorDriver   string `json:"prior_driver"`
	PriorOverride string `json:"prior_driver_override"`
	// Unreadable says why the device's binding now could not be read; "" when it was.
	Unreadable string `json:"unreadable"`
}

// NewRollbackReport is the report of rolling back todo, the devices of journal j of the
// host root that are not back (NotBack), with the problems forcing set aside, as the
// command line words them.
func NewRollbackReport(root string, j *Journal, k Kernel, todo []Prior, forced []string, dryRun bool) *RollbackReport {
	doc := &RollbackReport{Host: root, Applied: &j.Time, DryRun: dryRun, Journal: len(j.Devices), Devices: []RollbackDevice{},
		Forced: append([]string{}, forced...), Problems: []string{}, Restored: []string{}}
	for _, d := range todo {
		drv, derr := k.Driver(d.Device)
		ov, oerr := k.Override(d.Device)
		r := RollbackDevice{Device: d.Device.String(), Driver: drv, Override: ov, PriorDriver: d.Driver, PriorOverride: d.Override}
		if err := errors.Join(derr, oerr); err != nil {
			r.Unreadable = err.Error()
		}
		doc.Devices = append(doc.Devices, r)
	}
	return doc
}

// NoRollbackReport is the report of a host without a journal: nothing to roll back.
func NoRollbackReport(root string, dryRun bool) *RollbackReport {
	return &RollbackReport{Host: root, DryRun: dryRun, Devices: []RollbackDevice{}, Forced: []string{}, Problems: []string{}, Restored: []string{}}
}

// plainName is what a driver name looks like; anything else is quoted, so that a
// newline or an escape in a journal or a damaged driver_override shows as what it is.
var plainName = lazyre.New(`^[A-Za-z0-9_.-]+$`)

// binding says how a device is bound: its driver and its driver_override.
func binding(driver, override string) string {
	q := func(s string) string {
		if plainName.MatchString(s) {
			return s
		}
		return fmt.Sprintf("%q", s)
	}
	s := "no driver"
	if driver != "" {
		s = q(driver)
	}
	if override != "" {
		s += " (driver_override " + q(override) + ")"
	}
	return s
}

// WriteDevices lists the devices not back for a person: each one's binding now, and
// before the apply.
func (r *RollbackReport) WriteDevices(w io.Writer) {
	for _, d := range r.Devices {
		now := binding(d.Driver, d.Override)
		if d.Unreadable != "" {
			now = "unreadable"
		}
		fmt.Fprintf(w, "  %s  %s → %s\n", d.Device, now, binding(d.PriorDriver, d.PriorOverride))
	}
}
