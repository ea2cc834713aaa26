package p2p_test

import (
	"errors"
	"testing"

	"github.com/gpusplit/gpusplit/internal/p2p"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/testutils/p2ptest"
)

// odd is the fake driver with one GPU whose address does not parse and one without
// memory, or a driver that cannot list its GPUs.
type odd struct {
	*p2ptest.Fake
	fail bool
}

func (o odd) GPUs() ([]p2p.GPU, error) {
	if o.fail {
		return nil, errors.New("CUDA_ERROR_NOT_INITIALIZED")
	}
	gpus, err := o.Fake.GPUs()
	gpus[1].Address, gpus[2].Memory = "GPU-1", 0
	return gpus, err
}

// Each GPU's memory by address, those with an address and a memory alone; nothing from
// a driver that cannot list them.
func TestMemory(t *testing.T) {
	got := p2p.Memory(p2ptest.New(2))
	if len(got) != 2 || got[pci.Address{Bus: 0x10}] != 141<<30 || got[pci.Address{Bus: 0x20}] != 141<<30 {
		t.Errorf("two GPUs: %v", got)
	}
	got = p2p.Memory(odd{Fake: p2ptest.New(3)})
	if len(got) != 1 || got[pci.Address{Bus: 0x10}] != 141<<30 {
		t.Errorf("a GPU without an address, one without memory: %v", got)
	}
	if got = p2p.Memory(odd{Fake: p2ptest.New(1), fail: true}); got == nil || len(got) != 0 {
		t.Errorf("a driver that fails: %v", got)
	}
}
