package hook

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"time"

	"github.com/gpusplit/gpusplit/internal/syscmd"
)

// Services are the host's daemons and device nodes, as a phase changes them. Each call
// is bounded by its context; tests give stand-ins.
type Services struct {
	// Active says whether systemd runs the unit: a process that calls itself
	// nvidia-persistenced is not the daemon the administrator started.
	Active func(ctx context.Context, unit string) (bool, error)
	Stop   func(ctx context.Context, unit string) error
	Start  func(ctx context.Context, unit string) error
	// DeviceNode makes /dev/nvidiaN for a GPU the driver gave minor N: the driver makes
	// no nodes itself, and pve-container refuses a devN entry whose node is missing.
	DeviceNode func(ctx context.Context, minor int) error
}

// unitTimeout bounds one systemctl call: stopping nvidia-persistenced takes a second or
// two; more means it is stuck.
const unitTimeout = 30 * time.Second

// System is the host's own: systemctl and nvidia-modprobe by absolute path (package
// syscmd), each with a timeout.
func System() Services {
	return Services{
		Active: func(ctx context.Context, unit string) (bool, error) {
			err := syscmd.Run(ctx, unitTimeout, "systemctl", "is-active", "--quiet", unit+".service")
			var exit *exec.ExitError
			switch {
			case err == nil:
				return true, nil
			case errors.As(err, &exit):
				return false, nil // inactive, failed or unknown: not running
			case errors.Is(err, syscmd.ErrNotInstalled):
				return false, nil // no systemd (an initramfs): nothing runs it
			}
			return false, err
		},
		Stop: func(ctx context.Context, unit string) error {
			return syscmd.Run(ctx, unitTimeout, "systemctl", "stop", unit+".service")
		},
		Start: func(ctx context.Context, unit string) error {
			return syscmd.Run(ctx, unitTimeout, "systemctl", "start", unit+".service")
		},
		DeviceNode: func(ctx context.Context, minor int) error {
			return syscmd.Run(ctx, unitTimeout, "nvidia-modprobe", "-c", strconv.Itoa(minor))
		},
	}
}
