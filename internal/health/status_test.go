package health

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

func TestStatusReport(t *testing.T) {
	p := &plan.Plan{}
	if r := NewStatusReport("/", p, nil, nil); !r.InSync || r.Host != "/" {
		t.Errorf("an empty plan and no quarantine: %+v", r)
	}
	a, err := pci.ParseAddress("0000:81:00.0")
	if err != nil {
		t.Fatal(err)
	}
	r := NewStatusReport("/", p, []plan.PoolReport{{Name: "inference"}}, []Record{{Device: a, GPU: a, Damaged: "not JSON"}})
	if r.InSync {
		t.Error("a quarantined GPU is in sync")
	}
	var b strings.Builder
	r.WriteText(&b, p)
	want := "/: NOT IN SYNC, 1 device is quarantined; otherwise all 0 devices are where they belong.\n" +
		"quarantined, kept from every driver and container (gpusplit doctor says what to check):\n" +
		"  0000:81:00.0  its record is damaged: not JSON\n" +
		"    once it works again: gpusplit hook release 0000:81:00.0\n" +
		"pool inference (rests on its vendor's driver):\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
