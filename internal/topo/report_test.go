package topo_test

import (
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// TestReport: the JSON form of the sample host's matrix has a row per GPU and NIC, the
// GPUs' affinities in row order, and -1 for a GPU NUMA id the driver does not state.
func TestReport(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	r := matrixOfHost(t, h).Report()
	if len(r.GPUs) != 8 || len(r.NICs) != 2 || len(r.Matrix) != 10 || len(r.Matrix[0]) != 10 || r.Flat {
		t.Fatalf("%d GPUs, %d NICs, %d rows", len(r.GPUs), len(r.NICs), len(r.Matrix))
	}
	if r.Matrix[0][0] != "X" || r.NUMAAffinity[0] != 0 || r.NUMAAffinity[7] != 1 || r.NICs[0].Name != "mlx5_0" || len(r.GPUNUMAID) != 8 || r.GPUNUMAID[0] != -1 {
		t.Errorf("%+v", r)
	}
}
