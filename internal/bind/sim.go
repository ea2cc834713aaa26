package bind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Sim is the kernel of a simulated host (host.Host.Simulated: the demo's scratch copy of
// the sample host). It changes the copy's files as the kernel would change what /sys,
// /proc and /dev show, so that every command that reads the copy afterwards sees the
// move: the device's driver link and the driver's entry for it, driver_override (the
// kernel shows "(null)" when unset), the nvidia driver's information file with the
// lowest free minor, and /dev/vfio/GROUP (a regular file) while a device of the group is
// on vfio-pci. Probe binds the override, else the driver the device had when the copy
// was made (SimRecord). It never runs a program and never writes outside the copy.
type Sim struct {
	h   *host.Host
	mu  sync.Mutex // the copy's files change one step at a time, as the kernel's locks make them
	rec SimRecord
}

// SimRecord is host.SimulationRecord: the copy's devices as the kernel had them when the
// copy was made.
type SimRecord struct {
	Format int `json:"format"`
	// Drivers is each device's driver (its natural one, which Probe binds when no
	// override says otherwise), by PCI address; devices without one are absent.
	Drivers map[string]string `json:"drivers"`
	// Information is the nvidia driver's /proc/driver/nvidia/gpus/ADDR/information of
	// each GPU it had, written again (with the minor it is given) when the GPU comes
	// back to nvidia.
	Information map[string]string `json:"information"`
}

const simFormat = 1

// RecordSim makes h, a directory copy of a host, a simulated host: it records each
// device's driver and the nvidia driver's information files in host.SimulationRecord.
// It refuses the live host.
func RecordSim(h *host.Host) error {
	if err := notLive(h); err != nil {
		return err
	}
	rec := SimRecord{Format: simFormat, Drivers: map[string]string{}, Information: map[string]string{}}
	names, err := h.ReadDir(devicesDir)
	if err != nil {
		return err
	}
	s := Sysfs{H: h}
	for _, n := range names {
		a, err := pci.ParseAddress(n)
		if err != nil {
			continue
		}
		d, err := s.Driver(a)
		if err != nil {
			return err
		}
		if d != "" {
			rec.Drivers[a.String()] = d
		}
		if text, err := h.ReadFile(infoPath(a)); err == nil {
			rec.Information[a.String()] = string(text)
		}
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	p, err := h.OSPath(host.SimulationRecord)
	if err != nil {
		return err
	}
	return os.WriteFile(p, append(b, '\n'), 0o600)
}

// OpenSim returns the kernel of a simulated host. It refuses any other, the live host
// above all: whatever a directory holds, drivers on a real kernel move only through
// Live.
func OpenSim(h *host.Host) (*Sim, error) {
	if !h.Simulated() {
		return nil, fmt.Errorf("%s is not a simulated host: it has no %s", h.Root(), host.SimulationRecord)
	}
	if err := notLive(h); err != nil {
		return nil, err
	}
	b, err := h.ReadFile(host.SimulationRecord)
	if err != nil {
		return nil, err
	}
	var rec SimRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Format != simFormat {
		return nil, fmt.Errorf("%s of %s is damaged or of another version (%v); start the demo over with gpusplit demo reset", host.SimulationRecord, h.Root(), err)
	}
	return &Sim{h: h, rec: rec}, nil
}

// notLive refuses a root whose /sys is a sysfs mount: a running kernel's.
func notLive(h *host.Host) error {
	p, err := h.OSPath("/sys")
	if err != nil {
		return err
	}
	if m, err := fsMagic(p); err == nil && m == sysfsMagic {
		return fmt.Errorf("%s is a running kernel's root (its /sys is sysfs): it is never simulated", h.Root())
	}
	return nil
}

const (
	devicesDir = "/sys/bus/pci/devices"
	driversDir = "/sys/bus/pci/drivers"
	nvidiaGPUs = "/proc/driver/nvidia/gpus"
)

func infoPath(a pci.Address) string { return nvidiaGPUs + "/" + a.String() + "/information" }

func vfioNode(group int) string { return "/dev/vfio/" + strconv.Itoa(group) }

// Present reports whether the device exists.
func (s *Sim) Present(a pci.Address) bool { return Sysfs{H: s.h}.Present(a) }

// Driver is the device's driver, from its driver link.
func (s *Sim) Driver(a pci.Address) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Sysfs{H: s.h}.Driver(a)
}

// Override is driver_override, "" for the kernel's "(null)".
func (s *Sim) Override(a pci.Address) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Sysfs{H: s.h}.Override(a)
}

// SetOverride writes driver_override as the kernel shows it: "(null)" once cleared.
func (s *Sim) SetOverride(a pci.Address, driver string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if driver == "" {
		driver = "(null)"
	}
	return s.write(devAttr(a, "driver_override"), driver+"\n")
}

// Unbind detaches the device from driver, which must be the one it is on (the kernel's
// unbind of another driver fails with ENODEV): its links go, with the nvidia driver's
// information file, and /dev/vfio/GROUP once no device of the group is on vfio-pci.
func (s *Sim) Unbind(a pci.Address, driver string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := Sysfs{H: s.h}.Driver(a)
	if err != nil {
		return err
	}
	if cur != driver {
		return fmt.Errorf("writing %s/%s/unbind: %w", driversDir, driver, errors.New("no such device"))
	}
	for _, p := range []string{devAttr(a, "driver"), driversDir + "/" + driver + "/" + a.String()} {
		if err := s.remove(p); err != nil {
			return err
		}
	}
	switch driver {
	case "nvidia":
		return s.remove(nvidiaGPUs + "/" + a.String())
	case "vfio-pci":
		group, err := s.group(a)
		if err != nil || group < 0 {
			return err
		}
		if s.groupOnVFIO(group) {
			return nil
		}
		return s.remove(vfioNode(group))
	}
	return nil
}

// Probe binds an unbound device to its driver_override, else to the driver it had when
// the copy was made; "none", or a driver the copy does not have, leaves it unbound, as
// the kernel's drivers_probe does.
func (s *Sim) Probe(a pci.Address) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sys := Sysfs{H: s.h}
	if cur, err := sys.Driver(a); err != nil || cur != "" {
		return err
	}
	want, err := sys.Override(a)
	if err != nil {
		return err
	}
	if want == "" {
		want = s.rec.Drivers[a.String()]
	}
	if want == "" || want == "none" || !s.h.IsDir(driversDir+"/"+want) {
		return nil
	}
	return s.bind(a, want)
}

// bind links the device and the driver both ways, as the driver core does, and makes
// what the driver makes: nvidia's information file, vfio-pci's group node.
func (s *Sim) bind(a pci.Address, driver string) error {
	dev, err := s.h.Realpath("/sys/bus/pci/devices/" + a.String())
	if err != nil {
		return err
	}
	devOS, err := s.h.OSPath(dev)
	if err != nil {
		return err
	}
	drvOS, err := s.h.OSPath(driversDir + "/" + driver)
	if err != nil {
		return err
	}
	toDriver, err := filepath.Rel(devOS, drvOS)
	if err != nil {
		return err
	}
	toDevice, err := filepath.Rel(drvOS, devOS)
	if err != nil {
		return err
	}
	if err := os.Symlink(toDriver, filepath.Join(devOS, "driver")); err != nil {
		return err
	}
	if err := os.Symlink(toDevice, filepath.Join(drvOS, a.String())); err != nil {
		return err
	}
	switch driver {
	case "nvidia":
		text, ok := s.rec.Information[a.String()]
		if !ok {
			return nil // not a GPU the driver knew: it makes no file of it
		}
		return s.writeNew(infoPath(a), withMinor(text, s.freeMinor()), 0o444)
	case "vfio-pci":
		group, err := s.group(a)
		if err != nil || group < 0 {
			return err
		}
		return s.writeNew(vfioNode(group), "", 0o600)
	}
	return nil
}

// withMinor is an information file with its Device Minor line set to minor.
func withMinor(text string, minor int) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "Device Minor:") {
			lines[i] = fmt.Sprintf("Device Minor: \t %d", minor)
		}
	}
	return strings.Join(lines, "\n")
}

// freeMinor is the lowest minor no GPU on nvidia has: the one the driver gives.
func (s *Sim) freeMinor() int {
	used := map[int]bool{}
	names, _ := s.h.ReadDir(nvidiaGPUs)
	for _, n := range names {
		text, _ := s.h.ReadString(nvidiaGPUs + "/" + n + "/information")
		for _, l := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(l, "Device Minor:"); ok {
				if m, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
					used[m] = true
				}
			}
		}
	}
	n := 0
	for used[n] {
		n++
	}
	return n
}

// group is the device's IOMMU group, -1 for none.
func (s *Sim) group(a pci.Address) (int, error) {
	g, err := s.h.LinkBase(devAttr(a, "iommu_group"))
	if err != nil || g == "" {
		return -1, err
	}
	return strconv.Atoi(g)
}

// groupOnVFIO reports whether a device of the group is on vfio-pci.
func (s *Sim) groupOnVFIO(group int) bool {
	names, _ := s.h.ReadDir(fmt.Sprintf("/sys/kernel/iommu_groups/%d/devices", group))
	for _, n := range names {
		if a, err := pci.ParseAddress(n); err == nil {
			if d, _ := (Sysfs{H: s.h}).Driver(a); d == "vfio-pci" {
				return true
			}
		}
	}
	return false
}

// Loaded reports whether the copy has the driver's directory.
func (s *Sim) Loaded(driver string) bool { return s.h.IsDir(driversDir + "/" + driver) }

// Loadable says yes for the drivers the copy has, which are all it can bind.
func (s *Sim) Loadable(driver string) (string, bool) { return moduleName(driver), s.Loaded(driver) }

// Load succeeds for a driver the copy has; no module is ever loaded.
func (s *Sim) Load(_ context.Context, driver string) error {
	if s.Loaded(driver) {
		return nil
	}
	return fmt.Errorf("the simulated host %s has no driver %s, and loads no module", s.h.Root(), driver)
}

// VFIOReady reports whether /dev/vfio/GROUP exists in the copy.
func (s *Sim) VFIOReady(group int) bool { return s.h.Exists(vfioNode(group)) }

// write replaces the value of a file of the copy that exists, as a sysfs store does.
func (s *Sim) write(p, value string) error {
	osPath, err := s.h.OSPath(p)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(osPath); err != nil {
		return explainWrite(p, err)
	}
	if err := os.WriteFile(osPath, []byte(value), 0o644); err != nil {
		return explainWrite(p, err)
	}
	return nil
}

// writeNew makes a file of the copy, and its directory.
func (s *Sim) writeNew(p, body string, mode os.FileMode) error {
	osPath, err := s.h.OSPath(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(osPath), 0o755); err != nil {
		return err
	}
	return os.WriteFile(osPath, []byte(body), mode)
}

// remove takes a path of the copy away: a link itself, never what it leads to; a
// directory with what it holds. One already gone is no error.
func (s *Sim) remove(p string) error {
	dir, err := s.h.OSPath(path.Dir(p))
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(dir, path.Base(p))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
