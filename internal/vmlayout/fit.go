package vmlayout

import (
	"path"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/fit"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// GuestNow reads what a guest has now from its Proxmox config: a container's GPUs are
// those its devN entries and lxc.mount.entry lines pass through, whether it runs or
// not; a VM's those qemu-server will pick at its next start (Predict: fixed
// addresses, the devices it reserved, or the first free ones of a mapping), with
// Predict's notes and whether its gpudirect cliques give the GPUs peer access.
func GuestNow(h *host.Host, inv *inventory.Inventory, guest fit.Guest) (fit.GuestNow, error) {
	if guest.Kind == fit.VM {
		m, err := Predict(h, inv.Tree, guest.ID, time.Now())
		if err != nil {
			return fit.GuestNow{}, err
		}
		var addrs []pci.Address
		for _, d := range m.Devices {
			if d.IsGPU() {
				addrs = append(addrs, d.HostAddress)
			}
		}
		v := m.Verdict()
		return fit.GuestNow{GPUs: fit.GPUsAt(inv, addrs), Notes: m.Notes, NoClique: v.Unsafe || v.Clique < 0}, nil
	}
	ct, err := pve.ReadGuest(h, pve.LXC, guest.ID)
	if err != nil {
		return fit.GuestNow{}, err
	}
	var paths []string
	for _, k := range ct.Keys() {
		switch {
		case k.Name == "lxc.mount.entry":
			if f := strings.Fields(k.Value); len(f) > 0 {
				paths = append(paths, path.Clean(f[0]))
			}
		case strings.HasPrefix(k.Name, "dev") && k.Name != "dev" && strings.Trim(k.Name[3:], "0123456789") == "":
			paths = append(paths, path.Clean(pve.DevPath(k.Value)))
		}
	}
	return fit.GuestNow{GPUs: fit.ContainerGPUs(inv, paths)}, nil
}
