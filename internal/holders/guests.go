package holders

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/proc"
)

// Where Proxmox keeps what says a guest runs and what it is given. The configs are read
// here with a reader of their own rather than internal/pve's, which builds on the
// inventory that these holders are part of; the test checks that both read the same keys
// from Proxmox's example files.
const (
	vmRunDir        = "/run/qemu-server"                     // <vmid>.pid while a VM runs
	reservationPath = "/run/qemu-server/pci-id-reservations" // the devices each VM took at start
	vmConfigDir     = "/etc/pve/qemu-server"
	ctConfigDir     = "/etc/pve/lxc"
	mappingPath     = "/etc/pve/mapping/pci.cfg"
)

// ctCgroupDirs hold a directory per running container: cgroup v2 (Proxmox 7 and later),
// and v1's devices controller.
var ctCgroupDirs = []string{"/sys/fs/cgroup/lxc", "/sys/fs/cgroup/devices/lxc"}

// guest is a running VM or container and the main section of its config.
type guest struct {
	id   int
	keys []configKey
}

type configKey struct{ name, value string }

// guestScan reads the running guests and their configs once.
type guestScan struct {
	h        *host.Host
	vms, cts []guest
	// reserved are the devices qemu-server reserved for a running VM at its start;
	// haveReservations says the file exists (qemu-server 8 writes it).
	reserved         map[pci.Address]int
	haveReservations bool
	node             string
	mappings         map[string][]string // mapping → its paths on this node; nil until read
	allVMs           []configuredVM      // every VM of this node, running or not; nil until read
	warnings         []string
}

var (
	pidFile      = lazyre.New(`^(\d+)\.pid$`)
	reservation  = lazyre.New(`^(\S+)\s(\d+)\s(?:time|pid):\d+$`)
	configLine   = lazyre.New(`^([a-z][a-z_\-]*\d*):\s*(.*?)\s*$`)
	rawLXCLine   = lazyre.New(`^(lxc\.[a-z0-9_\-.]+)(?::|\s*=)\s*(.*?)\s*$`)
	sectionStart = lazyre.New(`^\[[^\]]+\]\s*$`)
)

func newGuestScan(h *host.Host) *guestScan {
	g := &guestScan{h: h, reserved: map[pci.Address]int{}}
	names, _ := h.ReadDir(vmRunDir)
	for _, n := range names {
		m := pidFile.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		id, _ := strconv.Atoi(m[1])
		pid, err := h.ReadString(vmRunDir + "/" + n)
		if err != nil || pid == "" || strings.Trim(pid, "0123456789") != "" || !h.IsDir("/proc/"+pid) {
			continue // a pid file left behind by a VM that is gone
		}
		if keys, ok := g.config("VM", id, vmConfigDir); ok {
			g.vms = append(g.vms, guest{id: id, keys: keys})
		}
	}
	seen := map[int]bool{}
	for _, dir := range ctCgroupDirs {
		names, _ := h.ReadDir(dir)
		for _, n := range names {
			id, err := strconv.Atoi(n)
			if err != nil || id <= 0 || seen[id] {
				continue
			}
			seen[id] = true
			if keys, ok := g.config("container", id, ctConfigDir); ok {
				g.cts = append(g.cts, guest{id: id, keys: keys})
			}
		}
	}
	if len(g.vms) == 0 {
		return g
	}
	text, err := h.ReadString(reservationPath)
	if err != nil {
		return g
	}
	g.haveReservations = true
	for _, line := range strings.Split(text, "\n") {
		m := reservation.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a, err := pci.ParseAddress(m[1])
		id, _ := strconv.Atoi(m[2])
		if err == nil {
			g.reserved[a] = id
		}
	}
	return g
}

// config reads the main section of a running guest's config; a config that cannot be
// read is a warning, since the guest may hold any device.
func (g *guestScan) config(kind string, id int, dir string) ([]configKey, bool) {
	file := fmt.Sprintf("%s/%d.conf", dir, id)
	text, err := g.h.ReadString(file)
	if errors.Is(err, fs.ErrNotExist) {
		// A guest of plain LXC or QEMU, not Proxmox's: nothing says what it was given.
		return nil, false
	}
	if err != nil {
		g.warnings = append(g.warnings, fmt.Sprintf("%s %d is running but its config cannot be read (%v): whether it passes a device through is unknown", kind, id, err))
		return nil, false
	}
	return parseConfig(text), true
}

// parseConfig returns the keys of a guest config's main section: those before the first
// [section] (pending changes, snapshots), raw lxc.* keys included.
func parseConfig(text string) []configKey {
	var out []configKey
	for _, line := range strings.Split(text, "\n") {
		if sectionStart.MatchString(line) {
			break
		}
		if m := rawLXCLine.FindStringSubmatch(line); m != nil {
			out = append(out, configKey{m[1], m[2]})
		} else if m := configLine.FindStringSubmatch(line); m != nil {
			out = append(out, configKey{m[1], m[2]})
		}
	}
	return out
}

// holders returns the running guests that pass d through, leaving out those already
// found holding it through a process.
func (g *guestScan) holders(d Device, found []Holder) []Holder {
	byProcess := map[string]bool{}
	for _, h := range found {
		if h.Kind == KindProcess && h.VM > 0 {
			byProcess[fmt.Sprintf("vm %d", h.VM)] = true
		}
		if h.Kind == KindProcess && h.Container > 0 {
			byProcess[fmt.Sprintf("container %d", h.Container)] = true
		}
	}
	var out []Holder
	for _, vm := range g.vms {
		if byProcess[fmt.Sprintf("vm %d", vm.id)] {
			continue
		}
		if key, detail, ok := g.vmPasses(vm, d); ok {
			out = append(out, Holder{Kind: KindVM, Process: proc.Process{VM: vm.id}, Name: key, Detail: detail,
				Release: fmt.Sprintf("stop VM %d (qm stop %d)", vm.id, vm.id)})
		}
	}
	for _, ct := range g.cts {
		if byProcess[fmt.Sprintf("container %d", ct.id)] {
			continue
		}
		if key, node, ok := ctPasses(ct, d); ok {
			out = append(out, Holder{Kind: KindContainer, Process: proc.Process{Container: ct.id}, Name: key, Detail: node,
				Release: fmt.Sprintf("stop container %d (pct stop %d)", ct.id, ct.id)})
		}
	}
	return out
}

// vmPasses reports which hostpciN of a running VM gives it d: one naming d (or d's slot,
// all functions) with host=, one whose mapping offers d on this node when qemu-server's
// reservations say the VM took d (without that file: when d is on vfio-pci, as a device
// a running VM has must be), or the reservations alone.
func (g *guestScan) vmPasses(vm guest, d Device) (key, detail string, ok bool) {
	reserved := g.reserved[d.Address] == vm.id
	for _, k := range vm.keys {
		if n, isPCI := strings.CutPrefix(k.name, "hostpci"); !isPCI || n == "" || strings.Trim(n, "0123456789") != "" {
			continue
		}
		opts := propertyString(k.value, "host")
		if host := opts["host"]; host != "" {
			for _, p := range strings.Split(host, ";") {
				if pathHolds(p, d.Address) {
					return k.name, "", true
				}
			}
		}
		if m := opts["mapping"]; m != "" {
			for _, p := range g.mapping(m) {
				if pathHolds(p, d.Address) && (reserved || !g.haveReservations && d.Driver == "vfio-pci") {
					return k.name, "mapping " + m, true
				}
			}
		}
	}
	if reserved {
		return "reserved", "in " + reservationPath, true
	}
	return "", "", false
}

// ctPasses reports which key of a running container's config gives it one of d's nodes:
// a devN entry, or an lxc.mount.entry of the node or of a directory holding it (/dev/dri).
func ctPasses(ct guest, d Device) (key, node string, ok bool) {
	for _, k := range ct.keys {
		var src string
		switch {
		case k.name == "lxc.mount.entry":
			if f := strings.Fields(k.value); len(f) > 0 {
				src = f[0]
			}
		case strings.HasPrefix(k.name, "dev") && strings.Trim(strings.TrimPrefix(k.name, "dev"), "0123456789") == "" && k.name != "dev":
			first, _, _ := strings.Cut(k.value, ",")
			src = strings.TrimPrefix(first, "path=")
		default:
			continue
		}
		src = path.Clean(src)
		if !strings.HasPrefix(src, "/dev/") {
			continue
		}
		for _, n := range d.Nodes {
			if n == src || strings.HasPrefix(n, src+"/") {
				return k.name, n, true
			}
		}
	}
	return "", "", false
}

// pathHolds reports whether a hostpci or mapping path names a: "0000:81:00.0" or "81:00.0"
// is one function, "0000:81:00" or "81:00" every function of the slot.
func pathHolds(p string, a pci.Address) bool {
	p = strings.TrimSpace(p)
	if x, err := pci.ParseAddress(p); err == nil {
		return x == a
	}
	if x, err := pci.ParseAddress(p + ".0"); err == nil {
		return x == a.Slot()
	}
	return false
}

// mapping returns the paths a PCI mapping offers on this node, from pci.cfg: a section
// starts with the mapping's id alone on a line, its map lines are indented.
func (g *guestScan) mapping(name string) []string {
	if g.mappings == nil {
		g.mappings = map[string][]string{}
		g.node = nodeName(g.h)
		text, err := g.h.ReadString(mappingPath)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			g.warnings = append(g.warnings, fmt.Sprintf("%s: %v; devices running VMs take through a mapping are not known", mappingPath, err))
		}
		section := ""
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimRight(line, "\r")
			switch {
			case line == "" || strings.HasPrefix(line, "#"):
			case line[0] != ' ' && line[0] != '\t':
				section = strings.TrimSpace(line)
			default:
				f := strings.Fields(line)
				if len(f) == 2 && f[0] == "map" {
					opts := propertyString(f[1], "")
					if opts["node"] == g.node {
						g.mappings[section] = append(g.mappings[section], strings.Split(opts["path"], ";")...)
					}
				}
			}
		}
	}
	return g.mappings[name]
}

// nodeName is this Proxmox node's name: where /etc/pve/local leads (nodes/<name>), or the
// host name.
func nodeName(h *host.Host) string {
	if t, err := h.Realpath("/etc/pve/local"); err == nil {
		return path.Base(t)
	}
	for _, p := range []string{"/etc/hostname", "/proc/sys/kernel/hostname"} {
		if n, err := h.ReadString(p); err == nil && n != "" {
			n, _, _ = strings.Cut(n, ".")
			return n
		}
	}
	return ""
}

// propertyString splits a Proxmox property string ("mapping=x,pcie=1"); a part without
// '=' is the default key's value.
func propertyString(value, defaultKey string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(value, ",") {
		if k, v, ok := strings.Cut(part, "="); ok {
			out[k] = v
		} else if part != "" && defaultKey != "" {
			out[defaultKey] = part
		}
	}
	return out
}
