// Package drivers says whether a name is a PCI driver this host has or can load.
//
// A driver is named the way its pci_driver registers itself, which is what
// /sys/bus/pci/drivers lists and what driver_override must match byte for byte: the
// kernel compares them with strcmp. The module behind it often spells it otherwise
// (lsmod shows vfio_pci for the driver vfio-pci, xhci_pci for xhci_hcd), and a
// driver_override of the module's spelling matches no driver: the device is left
// without one, and the functions planned to follow it to that driver do not. So a name
// that is a module's spelling of a driver is refused with the driver's name to use.
package drivers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gpusplit/gpusplit/internal/host"
)

// MaxName bounds a driver name. The kernel's are short (the longest in a distribution
// kernel are about 30 bytes); anything longer came from a damaged or forged file.
const MaxName = 64

// maxModulesList bounds how much of modules.dep or modules.builtin is read: a
// distribution kernel's modules.dep is under 1 MiB.
const maxModulesList = 32 << 20

// Where the host says what it has.
const (
	driversDir = "/sys/bus/pci/drivers"
	osRelease  = "/proc/sys/kernel/osrelease"
	modulesDir = "/lib/modules"
)

// known are PCI driver names that a GPU and its companion functions use, with the
// module that registers each, so that they are accepted on a host that has not loaded
// them yet and the module's spelling can be pointed at the driver's. Each name is the
// .name of the pci_driver in the source named beside it.
var known = []struct{ driver, module string }{
	{"vfio-pci", "vfio_pci"},           // drivers/vfio/pci/vfio_pci.c
	{"pci-stub", "pci_stub"},           // drivers/pci/pci-stub.c (built in on most kernels)
	{"nvidia", "nvidia"},               // NVIDIA's open and proprietary kernel modules
	{"nouveau", "nouveau"},             // drivers/gpu/drm/nouveau (DRIVER_NAME)
	{"amdgpu", "amdgpu"},               // drivers/gpu/drm/amd/amdgpu (DRIVER_NAME)
	{"radeon", "radeon"},               // drivers/gpu/drm/radeon (DRIVER_NAME)
	{"snd_hda_intel", "snd_hda_intel"}, // sound/pci/hda/hda_intel.c (KBUILD_MODNAME): GPU HDMI audio
	{"xhci_hcd", "xhci_pci"},           // drivers/usb/host/xhci-pci.c (hcd_name): GPU USB-C
	{"nvidia-gpu", "i2c_nvidia_gpu"},   // drivers/i2c/busses/i2c-nvidia-gpu.c: GPU USB-C (UCSI)
}

// Known returns the driver names accepted without looking at the host.
func Known() []string {
	out := make([]string, len(known))
	for i, k := range known {
		out[i] = k.driver
	}
	return out
}

// ModuleName is the module that registers a driver, as modprobe names it: the known
// module of a known driver, otherwise the driver's name with '-' written '_' (most
// drivers register under their module's name).
func ModuleName(driver string) string {
	for _, k := range known {
		if k.driver == driver {
			return k.module
		}
	}
	return strings.ReplaceAll(driver, "-", "_")
}

// Valid refuses what cannot be a driver name whatever the host: the empty name, a
// name with '/', white space or control characters, "." and "..", names longer than
// MaxName. A journal or a split.toml could carry any of them, and each would make a
// sysfs path of /sys/bus/pci/drivers/NAME point elsewhere or a driver_override that
// matches nothing.
func Valid(name string) error {
	switch {
	case name == "":
		return errors.New("the driver name is empty: name a driver of /sys/bus/pci/drivers, such as vfio-pci or nvidia")
	case len(name) > MaxName:
		return fmt.Errorf("driver %q is not a driver name: longer than %d bytes", name[:MaxName]+"…", MaxName)
	case name == "." || name == "..":
		return fmt.Errorf("driver %q is not a driver name: name a driver of /sys/bus/pci/drivers, such as vfio-pci or nvidia", name)
	case !utf8.ValidString(name):
		return fmt.Errorf("driver %q is not a driver name: it is not UTF-8 text", name)
	}
	for _, r := range name {
		switch {
		case r == '/':
			return fmt.Errorf("driver %q is not a driver name: it holds a '/'; name the driver alone, as /sys/bus/pci/drivers lists it", name)
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Errorf("driver %q is not a driver name: it holds white space or a control character", name)
		}
	}
	return nil
}

// Check returns nil when name is a PCI driver the host has registered now (it is in
// /sys/bus/pci/drivers), a known PCI driver (Known), or the name of a module of the
// running kernel (modules.dep or modules.builtin under /lib/modules/<release>). A name
// that is another driver's name spelled otherwise ('-' for '_', other capitals, its
// module's name) is an error that names the driver to write; an unknown name is an
// error that says where it was looked for, with the closest driver name when one is
// close.
func Check(h *host.Host, name string) error {
	if err := Valid(name); err != nil {
		return err
	}
	registered, _ := h.ReadDir(driversDir) // a snapshot may lack the directory: known and modules still apply
	for _, d := range registered {
		if d == name {
			return nil
		}
	}
	for _, k := range known {
		if k.driver == name {
			return nil
		}
	}
	if d, module := respelled(h, name, registered); d != "" {
		why := fmt.Sprintf("its driver registers as %s", d)
		switch {
		case strings.EqualFold(name, d):
			why = fmt.Sprintf("driver names are case-sensitive; it registers as %s", d)
		case module != "" && module != d:
			why = fmt.Sprintf("the module is %s, its driver registers as %s", module, d)
		}
		return fmt.Errorf("driver %q is not a driver name: did you mean %s? (%s; driver_override must match that name exactly)", name, d, why)
	}
	release, where := kernelRelease(h)
	if release != "" {
		found, err := hasModule(h, release, name)
		if found {
			return nil
		}
		where = fmt.Sprintf("no module of that name for kernel %s under %s", release, modulesDir)
		if err != nil {
			where += " (" + err.Error() + ")"
		}
	}
	msg := fmt.Sprintf("no driver %q on this host (not in %s, %s)", name, driversDir, where)
	if s := closest(name, append(append([]string{}, registered...), Known()...)); s != "" {
		return fmt.Errorf("%s: did you mean %s?", msg, s)
	}
	return fmt.Errorf("%s: install its module, or name a driver that %s lists (vfio-pci, nvidia, …)", msg, driversDir)
}

// key is how module tools compare names: '-' and '_' are the same. Capitals are
// folded too, for the suggestion only.
func key(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "_")) }

// respelled finds the driver that name is another spelling of: a registered or known
// driver whose name, or whose module's name, equals name but for '-', '_' and case.
// It returns the driver and its module ("" when unknown).
func respelled(h *host.Host, name string, registered []string) (driver, module string) {
	k := key(name)
	for _, d := range registered {
		m := registeredModule(h, d)
		if key(d) == k || (m != "" && key(m) == k) {
			return d, m
		}
	}
	for _, kn := range known {
		if key(kn.driver) == k || key(kn.module) == k {
			return kn.driver, kn.module
		}
	}
	return "", ""
}

// registeredModule is the module behind a registered driver, from its module link;
// "" for a driver built in without one.
func registeredModule(h *host.Host, driver string) string {
	m, err := h.LinkBase(driversDir + "/" + driver + "/module")
	if err != nil {
		return ""
	}
	return m
}

// kernelRelease returns the running kernel's release, or "" and why it is not known.
func kernelRelease(h *host.Host) (string, string) {
	r, err := h.ReadString(osRelease)
	if err != nil {
		return "", fmt.Sprintf("and no %s to say which kernel's modules to search", osRelease)
	}
	// The release becomes a path component: refuse one that would lead elsewhere.
	if r == "" || r == "." || r == ".." || strings.ContainsAny(r, "/\x00\n") || len(r) > 256 {
		return "", fmt.Sprintf("and %s holds %q, not a kernel release to search the modules of", osRelease, r)
	}
	return r, ""
}

// Loadable reports whether the module of a driver (ModuleName) exists for the running
// kernel, loadable or built in, and returns the module's name.
func Loadable(h *host.Host, driver string) (string, bool) {
	module := ModuleName(driver)
	release, _ := kernelRelease(h)
	if release == "" || Valid(driver) != nil {
		return module, false
	}
	found, _ := hasModule(h, release, module)
	return module, found
}

// hasModule reports whether the kernel release has a module named name (with '-' and
// '_' the same), loadable (modules.dep) or built in (modules.builtin).
func hasModule(h *host.Host, release, name string) (bool, error) {
	want := strings.ReplaceAll(name, "-", "_")
	var errs []error
	for _, list := range []string{"modules.dep", "modules.builtin"} {
		p := modulesDir + "/" + release + "/" + list
		found := false
		err := scanLines(h, p, func(line string) bool {
			file, _, _ := strings.Cut(line, ":")
			base := path.Base(strings.TrimSpace(file))
			if i := strings.Index(base, ".ko"); i > 0 && strings.ReplaceAll(base[:i], "-", "_") == want {
				found = true
				return false
			}
			return true
		})
		if found {
			return true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 2 {
		// Neither list could be read: say so, since the name may well be a module.
		return false, errs[0]
	}
	return false, nil
}

// scanLines calls fn for each line of the regular file p of h until fn returns false,
// reading at most maxModulesList bytes. On a directory root it streams the file; a
// snapshot's files are in memory already.
func scanLines(h *host.Host, p string, fn func(string) bool) error {
	var r io.Reader
	if h.Writable() {
		real, err := h.Realpath(p)
		if err != nil {
			return shortErr(p, err)
		}
		kind, _, err := h.Lstat(real)
		if err != nil {
			return shortErr(p, err)
		}
		if kind != host.File {
			return fmt.Errorf("%s is not a regular file", p)
		}
		osPath, err := h.OSPath(real)
		if err != nil {
			return shortErr(p, err)
		}
		f, err := os.Open(osPath)
		if err != nil {
			return shortErr(p, err)
		}
		defer f.Close()
		r = f
	} else {
		b, err := h.ReadFile(p)
		if err != nil {
			return shortErr(p, err)
		}
		r = bytes.NewReader(b)
	}
	lr := &io.LimitedReader{R: r, N: maxModulesList + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if !fn(sc.Text()) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %v", p, err)
	}
	if lr.N <= 0 {
		return fmt.Errorf("%s is larger than %d MiB; not a module list", p, maxModulesList>>20)
	}
	return nil
}

// shortErr says a file is missing in few words, other failures as they are.
func shortErr(p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no %s", p)
	}
	return err
}

// closest is the candidate nearest to name by edit distance (capitals folded), when
// it is near enough to be a slip of the keyboard: at most 2 edits, and fewer edits than
// name has letters.
func closest(name string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if len(c) > MaxName {
			continue
		}
		d := distance(key(name), key(c))
		if d < bestD && d < len(name) {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the optimal string alignment distance: insertions, deletions,
// substitutions and swaps of neighbours ("nvidai" is one swap from "nvidia"). Both
// strings are short (Valid bounds a name), so the full table is cheap.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
