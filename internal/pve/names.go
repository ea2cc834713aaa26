package pve

import (
	"fmt"

	"github.com/gpusplit/gpusplit/internal/drivers"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// Names answers plan.File.Check from the host: drivers from its sysfs and modules,
// guests from Proxmox's files of this node.
type Names struct {
	h *host.Host
	// Proxmox is false where /etc/pve/nodes is missing: not a Proxmox host, or one whose
	// cluster file system is not mounted yet (a boot-time apply before pve-cluster
	// starts), where guests cannot be looked up and are not needed to move GPUs.
	Proxmox bool
	node    string
	nodeErr error
	// Mappings reads pci.cfg for the mapping: selectors, once and only if one is given.
	Mappings pci.MappingLookup
}

// NewNames looks names up on h.
func NewNames(h *host.Host) Names {
	n := Names{h: h, Proxmox: h.IsDir(pveNodes), Mappings: MappingLookup(h)}
	if n.Proxmox {
		n.node, n.nodeErr = NodeName(h)
	}
	return n
}

const pveNodes = "/etc/pve/nodes"

// Driver checks that the host has or can load a driver.
func (n Names) Driver(name string) error { return drivers.Check(n.h, name) }

// Mapping is the devices of a mapping on this node.
func (n Names) Mapping(name string) ([]string, error) { return n.Mappings(name) }

// guestKind is what a guest id of split.toml names: where its config lives, and the
// key that lists it.
type guestKind struct{ dir, noun, key string }

var (
	containerKind = guestKind{LXC, "container", "containers"}
	vmKind        = guestKind{QEMU, "VM", "vms"}
)

// Container checks that id is a container of this node.
func (n Names) Container(id int) error { return n.guest(containerKind, vmKind, id) }

// VM checks that id is a VM of this node.
func (n Names) VM(id int) error { return n.guest(vmKind, containerKind, id) }

// guest finds the config of guest id of this node, and when it is missing says where
// the id is instead: the other kind of guest, or a guest of another node.
func (n Names) guest(kind, other guestKind, id int) error {
	if !n.Proxmox {
		return nil
	}
	if n.nodeErr != nil {
		return n.nodeErr
	}
	conf := func(node string, k guestKind) string {
		return fmt.Sprintf("%s/%s/%s/%d.conf", pveNodes, node, k.dir, id)
	}
	p := conf(n.node, kind)
	if n.h.Exists(p) {
		return nil
	}
	if n.h.Exists(conf(n.node, other)) {
		return fmt.Errorf("%d is a %s of node %s, not a %s: list it under %s", id, other.noun, n.node, kind.noun, other.key)
	}
	nodes, _ := n.h.ReadDir(pveNodes)
	for _, node := range nodes {
		if node != n.node && (n.h.Exists(conf(node, kind)) || n.h.Exists(conf(node, other))) {
			return fmt.Errorf("guest %d is on node %s, not on this node %s: gpusplit changes only this node's guests; migrate it here first, or remove it from the file", id, node, n.node)
		}
	}
	return fmt.Errorf("no %s %d on this node %s (no %s): correct the id, or create the %s first", kind.noun, id, n.node, p, kind.noun)
}
