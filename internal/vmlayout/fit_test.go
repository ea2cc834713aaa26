package vmlayout

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/fit"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// TestGuestNow reads the sample host's guests from their Proxmox configs: container
// 129 passes all eight GPUs through, VM 131 would get the first four of its mapping,
// and container 999 does not exist.
func TestGuestNow(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ct, err := GuestNow(h, inv, fit.Guest{Kind: fit.Container, ID: 129}); err != nil || len(ct.GPUs) != 8 || ct.NoClique {
		t.Errorf("container 129: %d GPUs, %v", len(ct.GPUs), err)
	}
	vm, err := GuestNow(h, inv, fit.Guest{Kind: fit.VM, ID: 131})
	if err != nil || len(vm.GPUs) != 4 || vm.GPUs[0].Address != inv.GPUs[0].Address {
		t.Errorf("VM 131: %d GPUs, %v", len(vm.GPUs), err)
	}
	if _, err := GuestNow(h, inv, fit.Guest{Kind: fit.Container, ID: 999}); err == nil || !strings.Contains(err.Error(), "no container 999 on this node") {
		t.Errorf("container 999: %v", err)
	}
}
