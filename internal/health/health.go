// Package health tells whether a PCI device that comes back from a VM still works, and
// keeps the quarantine records of those that do not.
//
// A reset that fails after a VM stops is the most reported passthrough failure: config
// space reads all ones, the PCIe link stays down or comes back narrower, the driver
// does not bind. Proxmox only warns, and a GPU handed back to nvidia in that state takes
// down the containers given it. So the hook reads each device's link at a VM's
// pre-start (Baseline), checks it before giving it back at post-stop (CheckReturn) and
// after the bind (CheckBound), and records a device that fails (Quarantine) so that it
// goes to no container until someone has looked at it and released it (Release).
//
// Everything is read through a host.Host, whose reads are bounded and never block on a
// FIFO; the records are written atomically under /run, so they last until the host
// reboots, which resets every device.
package health

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// devicesDir is where sysfs lists every PCI function by address.
const devicesDir = "/sys/bus/pci/devices/"

// devPath is the sysfs directory of a device.
func devPath(a pci.Address) string { return devicesDir + a.String() }

// The kinds of Evidence, one per check: what a test or a caller can tell them apart by.
const (
	Gone        = "gone"         // the device is no longer in sysfs
	ConfigSpace = "config-space" // config space does not answer (all ones) or names another vendor
	VendorFile  = "vendor"       // the vendor file reads 0xffff
	LinkDown    = "link-down"    // the link has no width or no speed
	LinkWidth   = "link-width"   // the link trained narrower than it was, or than it can
	Driver      = "driver"       // the device is not on the driver it was given to
	DeviceNode  = "device-node"  // nvidia bound it without a minor, or its /dev/nvidiaN is missing
)

// Evidence is one thing a check saw wrong with a device: which check, and a line that
// names the file and the value read.
type Evidence struct {
	Check string `json:"check"`
	Text  string `json:"text"`
}

func (e Evidence) String() string { return e.Text }

// Lines returns the evidence as text, a line each.
func Lines(ev []Evidence) []string {
	out := make([]string, 0, len(ev))
	for _, e := range ev {
		out = append(out, e.Text)
	}
	return out
}

// Baseline is a device's PCIe link as it was at a VM's pre-start, while the device was
// still on the driver it had: what CheckReturn expects back. It is kept in the hook's
// journal. A conventional PCI device has no link files and an empty Baseline.
type Baseline struct {
	// Width is the lanes the link had trained to (current_link_width).
	Width int `json:"width,omitempty"`
	// Speed is the link's speed as sysfs wrote it, "32.0 GT/s PCIe" (current_link_speed).
	// Kept to be shown, never compared: see CheckReturn.
	Speed string `json:"speed,omitempty"`
	// MaxWidth is the most lanes the device can use (max_link_width).
	MaxWidth int `json:"max_width,omitempty"`
	// MaxSpeed is the fastest the device can go (max_link_speed).
	MaxSpeed string `json:"max_speed,omitempty"`
}

// Empty reports whether the baseline knows nothing of a link.
func (b Baseline) Empty() bool { return b == Baseline{} }

// String shows the link as the evidence does: "x16 at 32.0 GT/s PCIe (max x16, 32.0 GT/s PCIe)".
func (b Baseline) String() string {
	if b.Empty() {
		return "no PCIe link (conventional PCI)"
	}
	return fmt.Sprintf("x%d at %s (max x%d, %s)", b.Width, orUnknown(b.Speed), b.MaxWidth, orUnknown(b.MaxSpeed))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown speed"
	}
	return s
}

// ReadBaseline reads the link of the device at a from sysfs. A device without link
// files (conventional PCI) has an empty Baseline and no error; a device that is not
// there, a file that cannot be read or a width that is not a number is an error.
func ReadBaseline(h *host.Host, a pci.Address) (Baseline, error) {
	dir := devPath(a)
	if !h.IsDir(dir) {
		return Baseline{}, fmt.Errorf("%s: no such device in %s", a, devicesDir)
	}
	var b Baseline
	var err error
	if b.Width, err = readWidth(h, dir+"/current_link_width"); err != nil {
		return noLink(err)
	}
	if b.MaxWidth, err = readWidth(h, dir+"/max_link_width"); err != nil {
		return noLink(err)
	}
	if b.Speed, err = h.ReadString(dir + "/current_link_speed"); err != nil {
		return noLink(err)
	}
	if b.MaxSpeed, err = h.ReadString(dir + "/max_link_speed"); err != nil {
		return noLink(err)
	}
	return b, nil
}

// noLink is ReadBaseline's answer to an error: none for a device without link files.
func noLink(err error) (Baseline, error) {
	if errors.Is(err, fs.ErrNotExist) {
		return Baseline{}, nil
	}
	return Baseline{}, err
}

// readWidth reads a link width file: a lane count, 0 for a link that is down.
func readWidth(h *host.Host, p string) (int, error) {
	s, err := h.ReadString(p)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 32 {
		return 0, fmt.Errorf("%s holds %q, not a lane count", p, s)
	}
	return n, nil
}

// CheckReturn checks a device that a VM has let go of, before it is given back to a
// driver: it is still there, its config space answers, and its link is up at the width
// it had at the VM's start (base), or at its full width without a baseline. It returns
// nil for a healthy device. Every read is one of host.Host's, each capped and refused
// for anything but a regular file, so a check cannot hang on a device that does not
// answer: sysfs itself answers for it (all ones from config space, "Unknown" speed).
func CheckReturn(h *host.Host, a pci.Address, base Baseline) []Evidence {
	dir := devPath(a)
	if !h.IsDir(dir) {
		// The kernel removed it: a surprise down, or a hot-plug slot that lost it.
		return []Evidence{{Gone, fmt.Sprintf("%s is gone from %s: the kernel removed it (a link that went down for good, or a hot-plug slot)", a, devicesDir)}}
	}
	var ev []Evidence
	add := func(check, format string, args ...any) {
		ev = append(ev, Evidence{check, a.String() + ": " + fmt.Sprintf(format, args...)})
	}

	// The vendor file is the id the kernel read when it found the device, kept since:
	// it reads 0xffff only for a device found dead (a rescan of one). Config space is
	// read from the device now: all ones when it does not answer.
	file, fileErr := h.ReadString(dir + "/vendor")
	fileID, parseErr := strconv.ParseUint(strings.TrimPrefix(file, "0x"), 16, 16)
	switch {
	case fileErr != nil:
		add(VendorFile, "the vendor file cannot be read: %v", fileErr)
	case parseErr != nil:
		add(VendorFile, "the vendor file holds %q, not a vendor id", file)
	case fileID == 0xffff:
		add(VendorFile, "the vendor file reads 0xffff: the kernel found the device not answering")
	}
	cfg, err := h.ReadFile(dir + "/config")
	switch {
	case err != nil:
		add(ConfigSpace, "config space cannot be read: %v", err)
	case len(cfg) < 2:
		add(ConfigSpace, "config space reads %d bytes, not even a vendor id", len(cfg))
	default:
		switch id := binary.LittleEndian.Uint16(cfg); {
		case id == 0xffff:
			add(ConfigSpace, "config space reads ffff (vendor id 0xffff in the first two bytes of config): the device does not answer, its reset failed or its link is down")
		case id == 0x0000:
			add(ConfigSpace, "config space reads vendor id 0x0000: the device answers with nothing")
		case fileErr == nil && parseErr == nil && fileID != 0xffff && uint64(id) != fileID:
			add(ConfigSpace, "config space names vendor %04x, not %04x as when the kernel found it: it answers as something else", id, fileID)
		}
	}

	ev = append(ev, checkLink(h, a, dir, base)...)
	return ev
}

// checkLink checks that the device's link is up, at its expected width. It does not
// compare the speed with the maximum: NVIDIA GPUs drop their link to 2.5 GT/s when idle
// and train back up under load, so a GPU just released by a VM is often at Gen1 and
// healthy. Only a speed that is no speed at all ("Unknown": the link is down) counts.
func checkLink(h *host.Host, a pci.Address, dir string, base Baseline) []Evidence {
	var ev []Evidence
	add := func(check, format string, args ...any) {
		ev = append(ev, Evidence{check, a.String() + ": " + fmt.Sprintf(format, args...)})
	}
	width, err := readWidth(h, dir+"/current_link_width")
	if errors.Is(err, fs.ErrNotExist) {
		if base.Width > 0 {
			add(LinkDown, "current_link_width is gone, but the link was x%d at the VM's start", base.Width)
		}
		return ev // conventional PCI: no link to check
	}
	if err != nil {
		add(LinkDown, "the link width cannot be read: %v", err)
		return ev
	}
	if width == 0 {
		add(LinkDown, "the PCIe link is down: current_link_width reads 0")
	}
	speed, err := h.ReadString(dir + "/current_link_speed")
	switch {
	case err != nil:
		add(LinkDown, "the link speed cannot be read: %v", err)
	case strings.HasPrefix(speed, "Unknown"):
		add(LinkDown, "the PCIe link is down: current_link_speed reads %q", speed)
	default:
		if _, _, perr := pci.ParseLinkSpeed(speed); perr != nil {
			add(LinkDown, "the PCIe link has no speed: current_link_speed reads %q", speed)
		}
	}
	if width == 0 {
		return ev
	}
	want, from := base.Width, "it had at the VM's start"
	if want == 0 {
		// No baseline (a device the pre-start did not see): the most it can do.
		max, err := readWidth(h, dir+"/max_link_width")
		if err != nil {
			return ev
		}
		want, from = max, "it can use (max_link_width)"
	}
	if want > 0 && width < want {
		add(LinkWidth, "the PCIe link trained to x%d, narrower than the x%d %s (current_link_width)", width, want, from)
	}
	return ev
}

// CheckBound checks a device after it was given to wantDriver: it is on that driver,
// and for nvidia the driver reports a minor for it (/proc/driver/nvidia/gpus/ADDR/
// information, "Device Minor") whose /dev/nvidiaN exists, so that containers can be
// given it. Call it after the device nodes are made (nvidia-modprobe -c N). It returns
// nil when all is well.
func CheckBound(h *host.Host, a pci.Address, wantDriver string) []Evidence {
	dir := devPath(a)
	if !h.IsDir(dir) {
		return []Evidence{{Gone, fmt.Sprintf("%s is gone from %s after its bind", a, devicesDir)}}
	}
	var ev []Evidence
	add := func(check, format string, args ...any) {
		ev = append(ev, Evidence{check, a.String() + ": " + fmt.Sprintf(format, args...)})
	}
	// The driver link names the driver that probed the device: none when the probe
	// failed, which is how a GPU that came back broken fails its bind.
	drv, err := h.LinkBase(dir + "/driver")
	switch {
	case err != nil:
		add(Driver, "its driver cannot be read: %v", err)
		return ev
	case drv != wantDriver:
		add(Driver, "it is on %s, not %s: the driver did not take it (dmesg says why)", driverText(drv), driverText(wantDriver))
		return ev
	}
	if wantDriver != "nvidia" {
		return ev
	}
	minor, err := inventory.NvidiaMinor(h, a)
	if err != nil {
		add(DeviceNode, "nvidia has it, but reports no minor number for it (%v): the driver did not set the GPU up", err)
		return ev
	}
	if node := fmt.Sprintf("/dev/nvidia%d", minor); !h.Exists(node) {
		add(DeviceNode, "nvidia gave it minor %d, but %s does not exist: containers given it cannot start (nvidia-modprobe -c %d makes it)", minor, node, minor)
	}
	return ev
}

func driverText(d string) string {
	if d == "" {
		return "no driver"
	}
	return d
}
