// Package bind carries out a plan on a host: it checks that nothing holds the devices and
// that the target drivers exist, journals the prior state, moves each device by PCI
// address with driver_override, unbind and drivers_probe, verifies the result, and rolls
// back everything it changed when a step fails.
package bind

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/gpusplit/gpusplit/internal/drivers"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/syscmd"
)

// Kernel is what a move needs from the kernel. Sysfs is the real one; tests use a fake
// that follows the same rules.
type Kernel interface {
	// Present reports whether the device exists.
	Present(a pci.Address) bool
	// Driver is the driver bound to the device, "" when none.
	Driver(a pci.Address) (string, error)
	// Override is the device's driver_override, "" when unset.
	Override(a pci.Address) (string, error)
	// SetOverride writes driver_override: a driver name, "none", or "" to clear it.
	SetOverride(a pci.Address, driver string) error
	// Unbind detaches the device from its driver. It may block while something holds it.
	Unbind(a pci.Address, driver string) error
	// Probe asks the PCI core to bind the device (drivers_probe).
	Probe(a pci.Address) error
	// Loaded reports whether a PCI driver is registered.
	Loaded(driver string) bool
	// Loadable reports whether the module of a driver can be loaded, and says which.
	Loadable(driver string) (module string, ok bool)
	// Load loads the module of a driver.
	Load(ctx context.Context, driver string) error
	// VFIOReady reports whether /dev/vfio/<group> exists.
	VFIOReady(group int) bool
}

// Sysfs is the kernel as a host's /sys shows it.
type Sysfs struct {
	H *host.Host
}

func devAttr(a pci.Address, attr string) string {
	return "/sys/bus/pci/devices/" + a.String() + "/" + attr
}

// Present reports whether the device exists.
func (s Sysfs) Present(a pci.Address) bool { return s.H.Exists("/sys/bus/pci/devices/" + a.String()) }

// Driver is the device's bound driver.
func (s Sysfs) Driver(a pci.Address) (string, error) { return s.H.LinkBase(devAttr(a, "driver")) }

// Override reads driver_override; the kernel writes "(null)" when unset.
func (s Sysfs) Override(a pci.Address) (string, error) {
	v, err := s.H.ReadString(devAttr(a, "driver_override"))
	if v == "(null)" {
		v = ""
	}
	return v, err
}

// SetOverride writes driver_override; a lone newline clears it.
func (s Sysfs) SetOverride(a pci.Address, driver string) error {
	return s.write(devAttr(a, "driver_override"), driver+"\n")
}

// Unbind writes the address to the driver's unbind file.
func (s Sysfs) Unbind(a pci.Address, driver string) error {
	return s.write("/sys/bus/pci/drivers/"+driver+"/unbind", a.String())
}

// Probe writes the address to drivers_probe: the PCI core binds the device to the driver
// its driver_override names, or to the first driver that matches it.
func (s Sysfs) Probe(a pci.Address) error {
	return s.write("/sys/bus/pci/drivers_probe", a.String())
}

// Loaded reports whether /sys/bus/pci/drivers/<driver> exists.
func (s Sysfs) Loaded(driver string) bool { return s.H.IsDir("/sys/bus/pci/drivers/" + driver) }

// VFIOReady reports whether the group's character device exists.
func (s Sysfs) VFIOReady(group int) bool { return s.H.Exists(fmt.Sprintf("/dev/vfio/%d", group)) }

func moduleName(driver string) string { return drivers.ModuleName(driver) }

// Loadable looks for the driver's module in modules.dep (or modules.builtin) of the
// running kernel under the host's /lib/modules.
func (s Sysfs) Loadable(driver string) (string, bool) { return drivers.Loadable(s.H, driver) }

// Load runs modprobe for the driver's module, root's own (never one found through
// $PATH), for syscmd.Timeout at most, and not past ctx's deadline (a hook's). Only the
// live host can load modules.
func (s Sysfs) Load(ctx context.Context, driver string) error {
	if s.H.Root() != "/" {
		return fmt.Errorf("cannot load module %s for the host at %s: modules load only into the running kernel", moduleName(driver), s.H.Root())
	}
	return syscmd.Run(ctx, 0, "modprobe", moduleName(driver))
}

// write writes one value to a sysfs attribute in a single write, as sysfs expects: a
// store callback sees each write on its own. O_TRUNC means nothing to sysfs, but a
// regular file standing in for an attribute would otherwise keep the tail of a longer
// value ("vfio-pci" overwritten by "nvidia" reads "nvidia\ni").
func (s Sysfs) write(p, value string) error {
	osPath, err := s.H.OSPath(p)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(osPath, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return explainWrite(p, err)
	}
	_, werr := f.Write([]byte(value))
	cerr := f.Close()
	if werr != nil {
		return explainWrite(p, werr)
	}
	if cerr != nil {
		return explainWrite(p, cerr)
	}
	return nil
}

func explainWrite(p string, err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("writing %s: permission denied; moving drivers needs root (run with sudo)", p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("writing %s: %w", p, err)
}
