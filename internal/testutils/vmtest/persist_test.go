package vmtest

import (
	"encoding/json"
	"strings"
	"testing"
)

const splitConfig = `cat > /tmp/split.toml <<EOF
devices = "` + E1000E + `"
[[group]]
name = "vms"
select = ["numa:1"]
driver = "vfio-pci"
EOF
`

// The command the boot unit runs brings a freshly booted guest to the desired state.
func TestPersistUnitCommand(t *testing.T) {
	vm := newVM(t)
	script := splitConfig + `
emit install gpusplit persist install --config /tmp/split.toml --binary /bin/gpusplit --yes
start=$(sed -n 's/^ExecStart=//p' /etc/systemd/system/gpusplit.service)
post=$(sed -n 's/^ExecStartPost=//p' /etc/systemd/system/gpusplit.service)
emit start $start
emit post $post
emit inv gpusplit --devices ` + E1000E + ` inventory -o json
emit rules cat /etc/udev/rules.d/70-gpusplit.rules
`
	res := boot(t, vm, TwoSockets(), script)
	install := string(output(t, res, "install"))
	for _, want := range []string{"written", "/etc/udev/rules.d/70-gpusplit.rules", "/etc/systemd/system/gpusplit.service"} {
		if !strings.Contains(install, want) {
			t.Errorf("install said:\n%s", install)
		}
	}
	output(t, res, "start")
	output(t, res, "post") // status: exit 0, in sync
	checkNUMA1OnVFIO(t, res, "inv")
	// Each rule guards the address with the ids.
	rules := 0
	for _, line := range strings.Split(strings.TrimSpace(string(output(t, res, "rules"))), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		rules++
		if !strings.Contains(line, `KERNEL=="0000:`) || !strings.Contains(line, `ATTR{vendor}=="0x8086"`) || !strings.Contains(line, `ATTR{device}=="0x10d3"`) {
			t.Errorf("rule without its guards: %s", line)
		}
	}
	if rules != 2 {
		t.Errorf("%d rules, want one per NUMA-1 NIC", rules)
	}
}

// At boot the pins come before the drivers: with the pin script run first (as modprobe
// runs it before the GPU driver loads), the drivers take only what is theirs.
func TestPersistPinsBeforeDrivers(t *testing.T) {
	vm, err := NewVM(binary, "vfio_iommu_type1")
	if err != nil {
		t.Fatal(err)
	}
	vm.Deferred = []string{"vfio-pci", "e1000e"}
	script := splitConfig + `
gpusplit persist install --config /tmp/split.toml --binary /bin/gpusplit --yes >/dev/null
emit unbound gpusplit --devices ` + E1000E + ` inventory -o json
emit pin sh /usr/lib/gpusplit/pin-overrides
load_deferred
emit inv gpusplit --devices ` + E1000E + ` inventory -o json
emit status gpusplit status --config /tmp/split.toml
`
	res := boot(t, vm, TwoSockets(), script)
	for addr, drv := range driversOf(t, res, "unbound") {
		if drv != "" {
			t.Fatalf("%s is on %s before its driver was loaded", addr, drv)
		}
	}
	output(t, res, "pin")
	checkNUMA1OnVFIO(t, res, "inv")
	output(t, res, "status")
}

// checkNUMA1OnVFIO checks the NICs of NUMA node 1 are on vfio-pci and the others on e1000e.
func checkNUMA1OnVFIO(t *testing.T, res *Result, name string) {
	t.Helper()
	var inv inventoryDoc
	if err := json.Unmarshal(output(t, res, name), &inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 4 {
		t.Fatalf("%d NICs", len(inv.GPUs))
	}
	for _, g := range inv.GPUs {
		want := "e1000e"
		if g.NUMANode == 1 {
			want = "vfio-pci"
		}
		if g.Driver != want {
			t.Errorf("%s (NUMA %d) is on %q, want %s", g.Address, g.NUMANode, g.Driver, want)
		}
	}
}
