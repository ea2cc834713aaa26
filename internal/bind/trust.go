package bind

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/drivers"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// Scope is what a rollback may touch, and whether the administrator overrides the
// refusals that can be overridden.
type Scope struct {
	// Movable are the devices apply moves, as the host shows them now: the GPUs (as
	// the selectors choose them), their companion functions and the other endpoints of
	// their IOMMU groups.
	Movable map[pci.Address]bool
	// Force sets aside what says when and where the journal was written: another host
	// name or machine id, another boot, a journal older than those fields, a device
	// that is gone. It never sets aside what the journal says of a device it would
	// touch: a bad driver name, a vendor:device or class that is not the device's now
	// (or cannot be read), or a device that is not movable. A wrong card at a GPU's
	// address, or a NIC listed as a GPU's companion, is a journal of something else,
	// and no flag makes it this host's.
	Force bool
}

// Problem is one reason not to trust a journal: a field whose value in the journal is
// not the host's.
type Problem struct {
	Device  string // the device's address, "" for the journal as a whole
	Field   string
	Journal string
	Host    string
	Why     string // what it means, and what to do besides the command's options
	Final   bool   // forcing does not set it aside
	Way     Way    // what the command's options can do about it
}

// Way is what the rollback's own options can do about a problem. It is a reason, not
// words: the command line words it with its flags.
type Way int

const (
	NoWay Way = iota
	// ForceIfNotRebooted: forcing rolls back, right if the host has not rebooted
	// since the apply (a journal that predates the boot id cannot tell).
	ForceIfNotRebooted
	// ForceIfRenamed: forcing rolls back, right if the host was only renamed.
	ForceIfRenamed
	// ForceTheOthers: forcing rolls back the journal's other devices.
	ForceTheOthers
	// SameDevices: the device may be a GPU under the choice of GPUs the apply had;
	// the rollback is to be given the same.
	SameDevices
)

func (p Problem) String() string {
	return fmt.Sprintf("%s: the journal has %s, the host %s: %s", p.subject(), p.Journal, p.Host, p.Why)
}

// subject is the field the problem is about, with its device.
func (p Problem) subject() string {
	if p.Device != "" {
		return p.Device + " " + p.Field
	}
	return p.Field
}

// UntrustedError refuses a rollback whose journal does not describe this host as it is
// now. Its message is what does not fit, in one line; the command line adds the way out
// (Forcible says whether forcing is one) and each problem under it.
type UntrustedError struct {
	Path     string // the journal's file
	Problems []Problem
	Forced   bool // whether the rollback was forced
}

// Error names the fields that do not fit, at most three: a refusal with every field, the
// journal's value, the host's and why ran to 900 characters, past what a person reads in
// a terminal.
func (e *UntrustedError) Error() string {
	var subjects []string
	for _, p := range e.Problems {
		if s := p.subject(); !slices.Contains(subjects, s) {
			subjects = append(subjects, s)
		}
	}
	if len(subjects) > 3 {
		subjects = append(subjects[:3], fmt.Sprintf("%d more", len(subjects)-3))
	}
	return fmt.Sprintf("nothing was changed: the journal %s does not fit this host (%s)", e.Path, strings.Join(subjects, ", "))
}

// Forcible says whether forcing the rollback would set every problem aside: none is
// final, and it was not forced already.
func (e *UntrustedError) Forcible() bool {
	return !e.Forced && !slices.ContainsFunc(e.Problems, func(p Problem) bool { return p.Final })
}

// CheckJournal compares the journal with the host and refuses it with every problem
// found, changing nothing. With s.Force the problems it can override are returned as
// forced, and only the others refuse.
func CheckJournal(h *host.Host, k Kernel, j *Journal, s Scope) (forced []Problem, err error) {
	var all []Problem
	add := func(p Problem) { all = append(all, p) }
	switch {
	case j.Format < JournalFormat:
		add(Problem{Field: "format", Journal: "none", Host: fmt.Sprint(JournalFormat),
			Why: "the journal was written by an older gpusplit and predates the identity fields (host name, machine id, boot id, device ids), " +
				"so nothing in it says it is of this host and this boot: gpusplit status shows the drivers against the desired split, and gpusplit apply reaches it",
			Way: ForceIfNotRebooted})
	case j.Format > JournalFormat:
		add(Problem{Field: "format", Journal: fmt.Sprint(j.Format), Host: fmt.Sprint(JournalFormat), Final: true,
			Why: "a newer gpusplit wrote the journal; roll back with that version"})
	default:
		checkIdentity(h, j, add)
	}

	seen := map[pci.Address]bool{}
	for _, d := range j.Devices {
		a := d.Device.String()
		if seen[d.Device] {
			add(Problem{Device: a, Field: "entry", Journal: "two entries", Host: "one device", Final: true,
				Why: "apply records each device once, so the journal is damaged; restore the drivers by hand or with gpusplit apply"})
			continue
		}
		seen[d.Device] = true
		present := k.Present(d.Device)
		// bound: it may have a driver now; when that cannot be read, it is taken to.
		bound, cur := false, "absent"
		if present {
			drv, err := k.Driver(d.Device)
			bound, cur = drv != "" || err != nil, "on "+driverName(drv)
			if err != nil {
				cur = "unreadable (" + err.Error() + ")"
			}
		}
		if d.Driver != "" {
			if err := drivers.Check(h, d.Driver); err != nil {
				add(Problem{Device: a, Field: "driver", Journal: fmt.Sprintf("%q", d.Driver), Host: cur, Final: true,
					Why: err.Error() + "; apply records drivers it read from sysfs, so the journal is damaged or forged"})
			}
		}
		if d.Override != "" && d.Override != plan.None {
			if err := drivers.Check(h, d.Override); err != nil {
				add(Problem{Device: a, Field: "driver_override", Journal: fmt.Sprintf("%q", d.Override), Host: cur, Final: true,
					Why: err.Error() + "; apply records the override it read from sysfs, so the journal is damaged or forged"})
			}
		}
		if !present {
			add(Problem{Device: a, Field: "device", Journal: "present", Host: "absent",
				Why: "the device is gone (removed, or its slot emptied): there is nothing to put back", Way: ForceTheOthers})
			continue
		}
		if j.Format >= JournalFormat {
			id, class, err := deviceIDs(h, d.Device)
			switch {
			case err != nil:
				add(Problem{Device: a, Field: "vendor:device", Journal: d.ID, Host: "unreadable (" + err.Error() + ")", Final: true,
					Why: "without its ids there is no telling whether it is the card the journal recorded"})
			default:
				if id != d.ID {
					add(Problem{Device: a, Field: "vendor:device", Journal: d.ID, Host: id, Final: true,
						Why: "another card sits at that address now, and the driver recorded was the other card's; " +
							"gpusplit status shows its driver against the desired split, and gpusplit apply reaches it"})
				}
				if class != d.Class {
					add(Problem{Device: a, Field: "class", Journal: d.Class, Host: class, Final: true,
						Why: "another kind of device sits at that address now, and the driver recorded was the other device's"})
				}
			}
		}
		if !s.Movable[d.Device] {
			why := "apply moves only those, so the entry is damaged or foreign, and rolling it back could take a disk controller or a NIC from the host"
			if d.Driver == "" && bound {
				why += "; the journal would also leave it without a driver: if that is what you want, unbind it by hand (echo " + a +
					" > /sys/bus/pci/devices/" + a + "/driver/unbind)"
			}
			add(Problem{Device: a, Field: "role", Journal: "moved with GPU " + d.GPU.String(), Host: "not a GPU, a GPU's function or an endpoint of a GPU's IOMMU group",
				Final: true, Why: why, Way: SameDevices})
		}
	}
	var refuse []Problem
	for _, p := range all {
		if s.Force && !p.Final {
			forced = append(forced, p)
		} else {
			refuse = append(refuse, p)
		}
	}
	if len(refuse) > 0 {
		return forced, &UntrustedError{Path: j.path(), Problems: refuse, Forced: s.Force}
	}
	return forced, nil
}

// checkIdentity compares the journal's host name, machine id and boot id with the host's.
func checkIdentity(h *host.Host, j *Journal, add func(Problem)) {
	id, err := ReadIdentity(h)
	if err != nil {
		add(Problem{Field: "identity", Journal: fmt.Sprintf("host %q, boot %s", j.Hostname, j.BootID), Host: "unreadable (" + err.Error() + ")",
			Why: "without the host's name and boot id there is no telling whether the journal is of this host and this boot"})
		return
	}
	if id.Hostname != j.Hostname {
		add(Problem{Field: "host name", Journal: fmt.Sprintf("%q", j.Hostname), Host: fmt.Sprintf("%q", id.Hostname),
			Why: "the journal was written on another host (copied with a backup of /var/lib, or a cloned disk) and describes that host's devices",
			Way: ForceIfRenamed})
	}
	if id.MachineID != j.MachineID {
		add(Problem{Field: "machine id", Journal: orNone(j.MachineID), Host: orNone(id.MachineID),
			Why: "the journal was written by another system installation and describes its devices"})
	}
	if id.BootID != j.BootID {
		add(Problem{Field: "boot id", Journal: orNone(j.BootID), Host: orNone(id.BootID),
			Why: "the host has rebooted since that apply: the drivers are what this boot made of them, and putting back those of an earlier boot is not a rollback; " +
				"gpusplit status shows them against the desired split, and gpusplit apply reaches it"})
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
