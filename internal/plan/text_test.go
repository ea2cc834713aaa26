package plan

import (
	"strings"
	"testing"

	layout "github.com/gpusplit/gpusplit/internal/table"
)

func TestText(t *testing.T) {
	for _, c := range []struct {
		n        int
		not, out string
	}{
		{1, "", "1 device is where it belongs"},
		{1, "not ", "1 device is not where it belongs"},
		{8, "", "all 8 devices are where they belong"},
		{3, "not ", "3 devices are not where they belong"},
	} {
		if got := WhereTheyBelong(c.n, c.not); got != c.out {
			t.Errorf("%d %q: %q", c.n, c.not, got)
		}
	}
	if TargetText(Default) != "(default)" || TargetText("vfio-pci") != "vfio-pci" || cellNone("") != "(none)" {
		t.Error("cells")
	}
	var b strings.Builder
	if err := (&Plan{Warnings: []string{"w"}}).WriteText(&b, "/", layout.Wide); err != nil || b.String() != "/: nothing to do, all 0 devices are where they belong.\nwarning: w\n" {
		t.Errorf("%q %v", b.String(), err)
	}
}
