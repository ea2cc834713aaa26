package holders

import (
	"path"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
)

// iffUp is IFF_UP in an interface's flags: the administrator (or networkd, ifupdown)
// brought it up, whether or not it has a carrier.
const iffUp = 0x1

// netScan reads /sys/class/net once, when a device is first checked.
type netScan struct {
	h    *host.Host
	read bool
	ifs  map[string]string // interface name → its directory, links resolved
}

// interfaces returns the device's network interfaces that are up: those whose sysfs
// directory lies under the device's (net/eth0 of a NIC, virtio0/net/eth0, a USB NIC on
// an xHCI function).
func (n *netScan) interfaces(d Device) []Holder {
	if d.Path == "" {
		return nil
	}
	if !n.read {
		n.read = true
		n.ifs = map[string]string{}
		names, _ := n.h.ReadDir("/sys/class/net")
		for _, name := range names {
			if real, err := n.h.Realpath("/sys/class/net/" + name); err == nil {
				n.ifs[name] = real
			}
		}
	}
	var out []Holder
	for _, name := range sortedKeys(n.ifs) {
		dir := n.ifs[name]
		if !under(dir, d.Path) || !up(n.h, dir) {
			continue
		}
		h := Holder{Kind: KindInterface, Name: name, Release: "ip link set " + name + " down"}
		if master, err := n.h.Realpath(dir + "/master"); err == nil {
			h.Detail = "a port of " + path.Base(master)
			h.Release += " (the host's traffic through " + path.Base(master) + " on it stops)"
		}
		out = append(out, h)
	}
	return out
}

// up reports whether an interface is up: IFF_UP in its flags, or an operstate of "up"
// where the flags cannot be read.
func up(h *host.Host, dir string) bool {
	if s, err := h.ReadString(dir + "/flags"); err == nil {
		if f, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32); err == nil {
			return f&iffUp != 0
		}
	}
	s, _ := h.ReadString(dir + "/operstate")
	return s == "up"
}
