package pve

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pci"
)

// Check does what Proxmox checks of a map entry of this node when a VM starts (the
// mapping's assert_valid): each device of the path exists, and its id, subsystem-id and
// IOMMU group are exactly what sysfs says (a string comparison: upper case fails). It
// returns the problems, in Proxmox's words where it has them; none means the check passes.
func Check(t *pci.Tree, e MapEntry) []string {
	var out []string
	for i, p := range e.Paths() {
		if !strings.Contains(p, ".") {
			p += ".0"
		}
		a, err := pci.ParseAddress(p)
		d := t.Lookup(a)
		if err != nil || d == nil {
			out = append(out, fmt.Sprintf("pci device '%s' not found", p))
			continue
		}
		if e.ID != d.ID() {
			out = append(out, fmt.Sprintf("'id' does not match for %s (%s != %s)", p, d.ID(), e.ID))
		}
		switch {
		case e.SubsystemID == "":
			out = append(out, fmt.Sprintf("missing expected property 'subsystem-id' for device '%s'", p))
		case e.SubsystemID != d.SubsystemID():
			out = append(out, fmt.Sprintf("'subsystem-id' does not match for %s (%s != %s)", p, d.SubsystemID(), e.SubsystemID))
		}
		if i > 0 {
			continue // Proxmox compares the group of the first device only
		}
		switch {
		case d.IOMMUGroup < 0 && e.IOMMUGroup != "":
			out = append(out, fmt.Sprintf("unexpected property 'iommugroup' configured for device '%s'", p))
		case d.IOMMUGroup >= 0 && e.IOMMUGroup == "":
			out = append(out, fmt.Sprintf("missing expected property 'iommugroup' for device '%s'", p))
		case d.IOMMUGroup >= 0 && e.IOMMUGroup != strconv.Itoa(d.IOMMUGroup):
			out = append(out, fmt.Sprintf("'iommugroup' does not match for %s (%d != %s)", p, d.IOMMUGroup, e.IOMMUGroup))
		}
	}
	return out
}
