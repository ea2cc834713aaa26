package vmtest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The split on a real kernel: the NICs play the GPUs (--devices 8086:10d3) on the
// two-socket topology, and the NUMA-1 half goes to vfio-pci.
const splitScript = `
g="gpusplit --devices ` + E1000E + `"
emit before $g inventory -o json
emit plan $g plan --vfio numa:1 -o json
emit apply $g apply --vfio numa:1 --yes -o json
emit status $g status --vfio numa:1 -o json
emit moved $g inventory -o json
emit journal cat /var/lib/gpusplit/journal.json
emit again $g apply --vfio numa:1 --yes
emit rollback $g rollback --yes
emit drift $g status --vfio numa:1
emit after $g inventory -o json
`

type drivers map[string]string // address → driver

func driversOf(t *testing.T, res *Result, name string) drivers {
	t.Helper()
	var inv inventoryDoc
	if err := json.Unmarshal(output(t, res, name), &inv); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out := drivers{}
	for _, g := range inv.GPUs {
		out[g.Address] = g.Driver
	}
	return out
}

func TestSplitApplyStatusRollback(t *testing.T) {
	vm := newVM(t)
	res := boot(t, vm, TwoSockets(), splitScript)

	before := driversOf(t, res, "before")
	var numa1 []string
	var inv inventoryDoc
	json.Unmarshal(output(t, res, "before"), &inv)
	for _, g := range inv.GPUs {
		if g.NUMANode == 1 {
			numa1 = append(numa1, g.Address)
		}
	}
	if len(numa1) != 2 || len(before) != 4 {
		t.Fatalf("NUMA 1 holds %v of %v", numa1, before)
	}

	var p struct {
		Actions []struct {
			Device, From, To string
		} `json:"actions"`
	}
	if err := json.Unmarshal(output(t, res, "plan"), &p); err != nil {
		t.Fatal(err)
	}
	var planned []string
	for _, a := range p.Actions {
		planned = append(planned, a.Device)
		if a.From != "e1000e" || a.To != "vfio-pci" {
			t.Errorf("plan moves %s from %s to %s", a.Device, a.From, a.To)
		}
	}
	if !slices.Equal(planned, numa1) {
		t.Errorf("plan moves %v, want the NUMA-1 devices %v", planned, numa1)
	}

	output(t, res, "apply") // exit status 0
	var st struct {
		InSync bool `json:"in_sync"`
	}
	if err := json.Unmarshal(output(t, res, "status"), &st); err != nil || !st.InSync {
		t.Errorf("status after apply: in sync %v (%v)", st.InSync, err)
	}
	moved := driversOf(t, res, "moved")
	for addr, drv := range moved {
		want := "e1000e"
		if slices.Contains(numa1, addr) {
			want = "vfio-pci"
		}
		if drv != want {
			t.Errorf("after apply %s is on %q, want %s", addr, drv, want)
		}
	}
	if j := string(output(t, res, "journal")); !strings.Contains(j, numa1[0]) || !strings.Contains(j, `"driver": "e1000e"`) {
		t.Errorf("journal:\n%s", j)
	}
	if again := string(output(t, res, "again")); !strings.Contains(again, "nothing to do") {
		t.Errorf("a second apply:\n%s", again)
	}
	output(t, res, "rollback")
	if res.Status["drift"] != 3 {
		t.Errorf("status after rollback exited %d, want 3 (drift)", res.Status["drift"])
	}
	after := driversOf(t, res, "after")
	for addr, drv := range before {
		if after[addr] != drv {
			t.Errorf("after rollback %s is on %q, was on %q", addr, after[addr], drv)
		}
	}
}

// A device held open makes apply refuse and change nothing; a bind that fails half-way
// puts back the devices already moved.
func TestSplitRefusalsAndFailure(t *testing.T) {
	vm := newVM(t)
	script := `
g="gpusplit --devices ` + E1000E + `"
emit before $g inventory -o json
# Pass one NIC through, and hold its VFIO group open as a VM would.
a=$($g inventory -o json | grep '"address"' | head -1 | cut -d'"' -f4)
$g apply --vfio $a --yes >/dev/null 2>&1
grp=$(basename $(readlink /sys/bus/pci/devices/$a/iommu_group))
sleep 600 < /dev/vfio/$grp &
holder=$!
emit held $g apply --vfio numa:1 --yes
emit heldstate $g inventory -o json
kill $holder
# Half-way failure: the last group's device is sent to a driver that refuses it.
b=$($g inventory -o json | grep '"address"' | tail -1 | cut -d'"' -f4)
cat > /tmp/split.toml <<EOF
[[group]]
name = "vms"
select = ["numa:0"]
driver = "vfio-pci"
[[group]]
name = "broken"
select = ["$b"]
driver = "shpchp"
EOF
emit failed $g apply --config /tmp/split.toml --yes --parallel 1
emit failstate $g inventory -o json
`
	res := boot(t, vm, TwoSockets(), script)
	before := driversOf(t, res, "before")

	if res.Status["held"] == 0 {
		t.Fatalf("apply with a held device succeeded:\n%s", output(t, res, "held"))
	}
	held := string(res.Files["held"])
	if !strings.Contains(res.Console, "in use: ") || !strings.Contains(res.Console, "sleep[") || !strings.Contains(res.Console, "nothing was changed") {
		t.Errorf("refusal does not name the holder:\n%s\n%s", held, tail(res.Console, 30))
	}
	heldState := driversOf(t, res, "heldstate")
	changed := 0
	for addr, drv := range heldState {
		if drv != before[addr] {
			changed++
		}
	}
	if changed != 1 { // only the NIC passed through on purpose
		t.Errorf("after the refusal %d devices differ from the start, want 1: %v vs %v", changed, heldState, before)
	}

	if res.Status["failed"] == 0 {
		t.Fatalf("apply with a broken group succeeded:\n%s", output(t, res, "failed"))
	}
	if !strings.Contains(res.Console, "restored") {
		t.Errorf("the failure does not say what was restored:\n%s", tail(res.Console, 40))
	}
	failState := driversOf(t, res, "failstate")
	for addr, drv := range failState {
		if drv != heldState[addr] {
			t.Errorf("after the failed apply %s is on %q, was on %q", addr, drv, heldState[addr])
		}
	}
}
