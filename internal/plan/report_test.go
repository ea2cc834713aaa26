package plan

import (
	"os"
	"testing"
)

// TestReport: a plan's JSON form lists its moves and what is in place, [] when none; a
// pool lists its GPUs in address order, each with its driver and whether it is in place.
func TestReport(t *testing.T) {
	inv := demo(t)
	p, err := Make(inv, ForVFIO(choices(t, "numa:1")))
	if err != nil {
		t.Fatal(err)
	}
	r := p.Report("/x")
	if r.Host != "/x" || r.Empty || len(r.Actions) != len(p.Moves) || len(r.InPlace) != len(p.InPlace) || r.Warnings == nil {
		t.Fatalf("%+v", r)
	}
	a := r.Actions[0]
	if a.Device != p.Moves[0].Device.String() || a.To != VFIO || a.Holders == nil {
		t.Errorf("action %+v", a)
	}
	if empty := (&Plan{}).Report("/"); !empty.Empty || empty.Actions == nil || empty.InPlace == nil {
		t.Errorf("empty %+v", empty)
	}

	data, err := os.ReadFile("../../docs/split-pool.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, d := desiredOf(t, string(data))
	p, err = Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	pools := p.Pools(d)
	if len(pools) != 1 || pools[0].Name != "shared" || len(pools[0].GPUs) != 4 {
		t.Fatalf("%+v", pools)
	}
	for i, g := range pools[0].GPUs {
		if i > 0 && g.Device < pools[0].GPUs[i-1].Device || g.Driver != "nvidia" || !g.InPlace || g.HeldBy != 0 {
			t.Errorf("GPU %+v", g)
		}
	}
	if none := p.Pools(Desired{}); none == nil || len(none) != 0 {
		t.Errorf("no pools: %v", none)
	}
}
