package plan

import (
	"errors"
	"testing"

	"github.com/gpusplit/gpusplit/internal/inventory"
)

// A host where no device counts as a GPU has nothing to split: the error says so and
// names the host, and leaves the way out (which devices count) to the caller.
func TestMakeNoGPUs(t *testing.T) {
	_, err := Make(&inventory.Inventory{Root: "kpro6"}, ForVFIO(nil))
	var none *NoGPUsError
	if !errors.As(err, &none) || none.Root != "kpro6" || err.Error() != "no GPUs on kpro6: nothing to split" {
		t.Errorf("no GPUs: %v", err)
	}
}
