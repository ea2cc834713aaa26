package plan

import (
	"errors"
	"fmt"

	"github.com/gpusplit/gpusplit/internal/pci"
)

// ErrNoSelector is a choice of GPUs that names none.
var ErrNoSelector = errors.New("a choice of GPUs needs a selector")

// ParseChoices reads the choices of GPUs to pass through, each a comma-separated list of
// selectors (the values of --vfio), for ForVFIO.
func ParseChoices(values []string) ([][]pci.Selector, error) {
	var choices [][]pci.Selector
	for _, v := range values {
		sels, err := pci.ParseSelectors(v)
		if err != nil {
			return nil, err
		}
		if len(sels) == 0 {
			return nil, ErrNoSelector
		}
		choices = append(choices, sels)
	}
	return choices, nil
}

// ResolveMappings looks up the devices of the mapping: selectors of every choice (see
// pci.ResolveMappings); lookup is asked nothing where there are none.
func (d *Desired) ResolveMappings(lookup pci.MappingLookup) error {
	for i := range d.Targets {
		t := &d.Targets[i]
		for j, c := range t.Choices {
			r, err := pci.ResolveMappings(c, lookup)
			if err != nil {
				return t.fail(err)
			}
			t.Choices[j] = r
		}
	}
	return nil
}

// FromFile reads the desired state file name, whose contents are data: the file, and
// the desired state it gives. holding says which running VM holds which device, for
// the pools: a pool's GPU that a VM holds belongs on vfio-pci until the VM stops. With
// holding nil, the pools are planned as at boot, when no VM holds them.
func FromFile(name string, data []byte, holding func() (map[pci.Address]int, error)) (Desired, *File, error) {
	file, err := ParseFile(name, data)
	if err != nil {
		return Desired{}, nil, err
	}
	desired, err := file.Desired()
	if err != nil {
		return Desired{}, nil, err
	}
	if len(file.Pools) > 0 && holding != nil {
		if desired.Holding, err = holding(); err != nil {
			return Desired{}, nil, fmt.Errorf("which VMs hold the pools' GPUs: %w", err)
		}
	}
	return desired, file, nil
}

// Defaults turns on, for a Proxmox node, the parts of the split that the desired state
// file leaves unset (or that --vfio, which has no file, cannot set): Proxmox's files and
// the boot files. An explicit false in the file keeps a part off. f is nil for --vfio.
func Defaults(d *Desired, f *File, proxmoxNode bool) {
	if f == nil || f.SyncProxmox == nil {
		d.SyncProxmox = proxmoxNode
	}
	if f == nil || f.Persist == nil {
		d.Persist = proxmoxNode
	}
}
