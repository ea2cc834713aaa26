package nccl

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

// NCCL finds a GPU by its bus id, domain included, so a GPU of PCI domain 0001 is
// written as 0001:01:00.0, under the CPU of its own NUMA node; and the file reads back.
func TestHostTopologySecondDomain(t *testing.T) {
	h, err := fakehost.SecondDomain().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, warnings, _, err := HostTopology(h, inv, Options{})
	if err != nil || len(warnings) > 0 {
		t.Fatalf("%v %v", err, warnings)
	}
	xml := string(Marshal(x))
	i := strings.Index(xml, `<cpu numaid="1"`)
	gpu := strings.Index(xml, `<pci busid="0001:01:00.0" class="0x030000"`)
	if i < 0 || gpu < i || strings.Contains(xml[i:gpu], `busid="0000:`) || !strings.Contains(xml, `<pci busid="0000:01:00.0"`) {
		t.Errorf("0001:01:00.0 is not under node 1's CPU:\n%s", xml)
	}
	if _, err := Parse([]byte(xml)); err != nil {
		t.Errorf("the file does not read back: %v", err)
	}
}
