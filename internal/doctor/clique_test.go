package doctor

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// VM 131 of the sample host passes whole slots through hostpci, which the clique cannot
// reach; laid out by gpusplit, its GPUs get the clique, with a note and the check to
// run in the guest; a saved p2p result that found corruption between them refuses it,
// and one that cannot be read is an input error.
func TestPlanClique(t *testing.T) {
	h := sample(t, nil)
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1764500000, 0)
	if _, err := PlanClique(h, inv, 131, 0, "", now); err == nil || !strings.Contains(err.Error(), "pass several functions each") {
		t.Fatalf("hostpci entries of whole slots: %v", err)
	}
	layout, err := vmlayout.PlanLayout(h, inv.Tree, 131, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := pve.WriteGuest(h, "test", true, layout.Edit); err != nil {
		t.Fatal(err)
	}

	r, err := PlanClique(h, inv, 131, 3, "", now)
	if err != nil {
		t.Fatal(err)
	}
	if r.VMID != 131 || r.Clique != 3 || r.Path != "/etc/pve/qemu-server/131.conf" || r.Verdict.Unsafe || r.Edit.Path != r.Path ||
		!strings.Contains(r.Diff, ",x-nv-gpudirect-clique=3 ") || !strings.Contains(r.Edit.New, ",x-nv-gpudirect-clique=3 ") || len(r.Notes) != 1 {
		t.Fatalf("the clique: %+v", r)
	}
	var b strings.Builder
	r.WriteText(&b)
	if want := r.Diff + "# " + r.Notes[0] + "\n# in the guest, after its next start: nvidia-smi topo -p2p r shows OK between these GPUs, and gpusplit p2p measures them\n"; b.String() != want {
		t.Errorf("the text:\n%s\nwant:\n%s", b.String(), want)
	}

	var pairs []map[string]string
	for _, a := range inv.GPUs {
		for _, b := range inv.GPUs {
			if a.Address != b.Address {
				pairs = append(pairs, map[string]string{"src": a.Address.String(), "dst": b.Address.String(), "verdict": "corrupt", "why": "bytes wrong"})
			}
		}
	}
	data, _ := json.Marshal(map[string]any{"pairs": pairs})
	saved := filepath.Join(t.TempDir(), "p2p.json")
	if err := os.WriteFile(saved, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var unsafe vmlayout.UnsafeError
	if _, err := PlanClique(h, inv, 131, 0, saved, now); !errors.As(err, &unsafe) || unsafe.VMID != 131 {
		t.Errorf("a corrupt pair: %v", err)
	}
	var input *InputError
	if _, err := PlanClique(h, inv, 131, 0, saved+".none", now); !errors.As(err, &input) || input.Path != saved+".none" {
		t.Errorf("a missing p2p result: %v", err)
	}
}
