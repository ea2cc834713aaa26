package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
)

// AER is what a device's Advanced Error Reporting counted since the boot: the errors
// the device saw on its link, by severity. The kernel counts them whatever the log's
// rate limit printed (sysfs-bus-pci-devices-aer_stats), so a link that errs quietly
// shows here before it shows anywhere else. Errors an endpoint causes are often counted
// at its link partner, the port above it, instead.
type AER struct {
	// Correctable is TOTAL_ERR_COR of aer_dev_correctable: errors the link recovered
	// from by itself (a replay), which cost bandwidth.
	Correctable uint64 `json:"correctable"`
	// NonFatal is TOTAL_ERR_NONFATAL of aer_dev_nonfatal: uncorrectable errors that lost
	// a transaction but left the link up.
	NonFatal uint64 `json:"nonfatal"`
	// Fatal is TOTAL_ERR_FATAL of aer_dev_fatal: errors that took the link down, and the
	// device with it until a reset.
	Fatal uint64 `json:"fatal"`
}

// aerFiles are the counter files, each with the line that holds its total.
var aerFiles = []struct{ file, total string }{
	{"aer_dev_correctable", "TOTAL_ERR_COR"},
	{"aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"},
	{"aer_dev_fatal", "TOTAL_ERR_FATAL"},
}

// ReadAER reads the AER counters of the device whose sysfs directory is dir (a
// Device's Path). ok is false, with no error, for a device without them: no AER
// capability, AER turned off (pci=noaer), or a kernel before 4.19. A file that is there
// but holds no total is an error.
func ReadAER(h *host.Host, dir string) (a AER, ok bool, err error) {
	counts := []*uint64{&a.Correctable, &a.NonFatal, &a.Fatal}
	for i, f := range aerFiles {
		text, err := h.ReadString(dir + "/" + f.file)
		if errors.Is(err, fs.ErrNotExist) && i == 0 {
			return AER{}, false, nil
		}
		if err != nil {
			return AER{}, false, err
		}
		n, err := aerTotal(text, f.total)
		if err != nil {
			return AER{}, false, fmt.Errorf("%s/%s: %w", dir, f.file, err)
		}
		*counts[i] = n
	}
	return a, true, nil
}

// aerTotal finds the total in a counter file: a line "NAME COUNT" per error the kernel
// names, "dev_cor_errs_bit[N] COUNT" for a bit it does not, and the total last.
func aerTotal(text, total string) (uint64, error) {
	for _, line := range strings.Split(text, "\n") {
		name, count, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || name != total {
			continue
		}
		n, err := strconv.ParseUint(count, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q is not a count", total, count)
		}
		return n, nil
	}
	return 0, fmt.Errorf("no %s line", total)
}
