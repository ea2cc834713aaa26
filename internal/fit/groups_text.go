package fit

import (
	"fmt"
	"io"
	"strings"
)

// WriteGroupModels prints, after a plan, whether each group's model fits on the GPUs
// the group holds once the split is done.
func WriteGroupModels(w io.Writer, models []GroupModel) {
	for _, j := range models {
		who := "group " + fmt.Sprintf("%q", j.Group)
		if len(j.Containers) > 0 || len(j.VMs) > 0 {
			var guests []string
			for _, id := range j.Containers {
				guests = append(guests, fmt.Sprintf("container %d", id))
			}
			for _, id := range j.VMs {
				guests = append(guests, fmt.Sprintf("VM %d", id))
			}
			who += " (" + strings.Join(guests, ", ") + ")"
		}
		if j.Error != "" {
			fmt.Fprintf(w, "\nmodel of %s: %s: not worked out: %s\n", who, j.Model, j.Error)
			continue
		}
		if j.Recommended == "" {
			fmt.Fprintf(w, "\nmodel of %s after the split: %s on %d GPUs does not fit: %s (gpusplit fit --model %s shows every placement)\n", who, j.Model, len(j.GPUs), j.Why, j.Model)
			continue
		}
		fmt.Fprintf(w, "\nmodel of %s after the split: %s on %d GPUs: %s as %s: %s (gpusplit fit shows every placement)\n", who, j.Model, len(j.GPUs), j.Verdict, j.Recommended, j.Why)
	}
}
