package doctor

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// NewEnv gathers what the checks read. log is the kernel log to scan (nil: none could be
// read, with logErr saying why). The configured split, when the host has one, is planned
// so that gpu-held and split-drift can compare it with the host.
func NewEnv(h *host.Host, inv *inventory.Inventory, log io.Reader, logErr error) (*Env, error) {
	e := &Env{H: h, Inv: inv, LogErr: logErr}
	if log != nil {
		facts, err := CollectLog(log)
		if err != nil {
			return nil, err
		}
		e.Log = facts
		e.logHost = logFromHost(facts, inv.Tree)
	}
	e.Guest, e.Hypervisor = guest(h)
	e.Root = h.Root() != "/" || os.Geteuid() == 0
	if data, err := h.ReadFile(plan.DefaultConfig); err == nil {
		f, err := plan.ParseFile(plan.DefaultConfig, data)
		if err != nil {
			return nil, err
		}
		d, err := f.Desired()
		if err != nil {
			return nil, err
		}
		if p, err := plan.Make(inv, d); err == nil {
			e.Desired, e.Plan = &d, p
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if !e.Root {
		e.partial("gpu-held", "other users' processes can only be seen by root")
		e.partial("driver-mismatch", "containers' libraries can only be read by root")
	}
	why := ""
	switch {
	case e.Log == nil && logErr != nil:
		why = "the kernel log could not be read: " + logErr.Error()
	case e.Log == nil:
		why = "no kernel log"
	case e.Log.Cut != "":
		why = e.Log.Cut
	}
	if why != "" {
		for _, id := range logChecks {
			e.partial(id, why)
		}
	}
	return e, nil
}

// logChecks are the checks that read the kernel log.
var logChecks = []string{"bar-unassigned", "gpu-lost", "gpu-init-failed", "aer-errors", "vfio-reset", "vfio-bar-reserve", "vfio-group-not-viable", "boot-cmdline", "iommu-page-faults", "sev-snp", "driver-mismatch"}

// guest tells whether the host is a VM: the CPU's hypervisor flag, or the firmware's
// vendor and product names (QEMU, KVM, VMware, …).
func guest(h *host.Host) (bool, string) {
	for _, p := range []string{"/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name"} {
		v, err := h.ReadString(p)
		if err != nil {
			continue
		}
		for _, vm := range []string{"QEMU", "KVM", "VMware", "Xen", "Microsoft Corporation", "Amazon EC2", "Google Compute Engine", "OpenStack", "KubeVirt", "Bochs"} {
			if strings.HasPrefix(v, vm) {
				return true, v
			}
		}
	}
	if b, err := h.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
				for _, f := range strings.Fields(v) {
					if f == "hypervisor" {
						return true, "a hypervisor (CPU flag)"
					}
				}
				break
			}
		}
	}
	return false, ""
}
