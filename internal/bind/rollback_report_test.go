package bind

import (
	"strings"
	"testing"
	"time"
)

func TestRollbackReport(t *testing.T) {
	k := newFake()
	a := k.add("0000:81:00.0", "vfio-pci", 1)
	k.devs[a].override = "vfio-pci"
	gone := k.add("0000:91:00.0", "vfio-pci", 2)
	delete(k.devs, gone)
	j := &Journal{Time: time.Unix(0, 0), Devices: []Prior{{Device: a, Driver: "nvidia"}, {Device: gone, Driver: "bad\nname"}, {Device: a}}}
	r := NewRollbackReport("/", j, k, j.Devices[:2], nil, true)
	if r.Journal != 3 || len(r.Devices) != 2 || r.Devices[0].Unreadable != "" || r.Devices[1].Unreadable == "" || r.Forced == nil || r.Problems == nil || r.Restored == nil {
		t.Fatalf("%+v", r)
	}
	var b strings.Builder
	r.WriteDevices(&b)
	want := "  0000:81:00.0  vfio-pci (driver_override vfio-pci) → nvidia\n" +
		"  0000:91:00.0  unreadable → \"bad\\nname\"\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	if binding("", "") != "no driver" {
		t.Error(binding("", ""))
	}
}
