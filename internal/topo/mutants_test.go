package topo_test

import (
	"testing"

	"github.com/gpusplit/gpusplit/internal/topo"
)

// The bound on a numa_status node is exact: 1 << 16 nodes at most, numbered from 0, so
// 65535 is the highest believed and 65536 is garbage.
func TestParseNUMAStatusBound(t *testing.T) {
	if got, ok := topo.ParseNUMAStatus("Node:      65535\nStatus:    online\n"); got != 65535 || !ok {
		t.Errorf("node 65535 = %d, %v; want 65535, true", got, ok)
	}
	if got, ok := topo.ParseNUMAStatus("Node:      65536\nStatus:    online\n"); got != -1 || ok {
		t.Errorf("node 65536 = %d, %v; want -1, false", got, ok)
	}
}
