package hook

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
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

// Simulated are the services of a simulated host (host.Host.Simulated, the demo's
// scratch copy): nothing is run. systemd runs a unit while a process of the copy's /proc
// is in the unit's cgroup; a stop or start changes nothing and says, through say, what
// it would have run; a device node is a regular file of the copy, as nvidia-modprobe
// -c N would make a character device.
func Simulated(h *host.Host, say func(string)) Services {
	note := func(cmd string) {
		if say != nil {
			say("simulated: " + cmd + " (nothing was run)")
		}
	}
	return Services{
		Active: func(_ context.Context, unit string) (bool, error) {
			pids, err := h.ReadDir("/proc")
			if err != nil {
				return false, nil // no processes: nothing runs it
			}
			for _, pid := range pids {
				if _, err := strconv.Atoi(pid); err != nil {
					continue
				}
				cg, err := h.ReadString("/proc/" + pid + "/cgroup")
				if err != nil {
					continue
				}
				// hierarchy:controllers:path; a container's own units lie below /lxc.
				for _, l := range strings.Split(cg, "\n") {
					if _, rest, ok := strings.Cut(l, ":"); ok {
						if _, p, ok := strings.Cut(rest, ":"); ok && p == "/system.slice/"+unit+".service" {
							return true, nil
						}
					}
				}
			}
			return false, nil
		},
		Stop: func(_ context.Context, unit string) error {
			note("systemctl stop " + unit + ".service")
			return nil
		},
		Start: func(_ context.Context, unit string) error {
			note("systemctl start " + unit + ".service")
			return nil
		},
		DeviceNode: func(_ context.Context, minor int) error {
			p, err := h.OSPath("/dev/nvidia" + strconv.Itoa(minor))
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			return os.WriteFile(p, nil, 0o666)
		},
	}
}
