package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// topo fills GPU NUMA ID from the nvidia driver's numa_status, in the matrix and in JSON,
// and only for the GPU that has the file. The file's shape is the driver's
// (nv_procfs_read_numa_status), as on a coherent system where GPU memory is a node.
func TestTopoGPUNUMAID(t *testing.T) {
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	status := filepath.Join(root, "proc/driver/nvidia/gpus/0000:81:00.0/numa_status")
	if err := os.WriteFile(status, []byte("Node:      9\nStatus:    online\nAddress:   40000000000\nSize:      3f0000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "--root", root, "topo")
	rows := strings.Split(out, "\n")
	for i, want := range map[int]string{1: "\t0\t\tN/A", 5: "\t1\t\t9", 6: "\t1\t\tN/A"} {
		if !strings.HasSuffix(rows[i], want) {
			t.Errorf("row %q, want it to end %q", rows[i], want)
		}
	}
	var doc struct {
		GPUNUMAID []int `json:"gpu_numa_id"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--root", root, "topo", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if want := []int{-1, -1, -1, -1, 9, -1, -1, -1}; !slices.Equal(doc.GPUNUMAID, want) {
		t.Errorf("gpu_numa_id %v, want %v", doc.GPUNUMAID, want)
	}
}
