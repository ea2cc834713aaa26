package vmtest

import (
	"strings"
	"testing"
)

// The hook's phases on a real kernel, the NICs playing the GPUs of two VMs on a node
// "pve1": a start refused while an interface of its device is up (nothing changed), a
// start that moves the VM's devices to vfio-pci, a second start that finds them there, a
// stop that gives them back to e1000e, and two VMs starting at once, which take turns.
const hookScript = `
g="gpusplit --devices ` + E1000E + `"
addr() { basename $(readlink -f /sys/class/net/$1/device); }
mkdir -p /etc/pve/nodes/pve1/qemu-server /etc/pve/nodes/pve1/lxc
echo pve1 > /etc/hostname
ln -s nodes/pve1/qemu-server /etc/pve/qemu-server
ln -s nodes/pve1/lxc /etc/pve/lxc
printf 'hostpci0: %s,pcie=1\nhostpci1: %s,pcie=1\nmachine: q35\nmemory: 512\n' $(addr eth0) $(addr eth1) > /etc/pve/qemu-server/131.conf
printf 'hostpci0: %s,pcie=1\nhostpci1: %s,pcie=1\nmachine: q35\nmemory: 512\n' $(addr eth2) $(addr eth3) > /etc/pve/qemu-server/132.conf
emit before $g inventory -o json
ip link set eth0 up
emit refused sh -c "$g hook 131 pre-start 2>&1; echo status \$?"
emit unchanged $g inventory -o json
ip link set eth0 down
emit start sh -c "$g hook 131 pre-start 2>&1"
emit started $g inventory -o json
emit again sh -c "$g hook 131 pre-start 2>&1"
emit stop sh -c "$g hook 131 post-stop 2>&1"
emit stopped $g inventory -o json
( $g hook 131 pre-start > /tmp/s131 2>&1; echo "status $?" >> /tmp/s131 ) &
( $g hook 132 pre-start > /tmp/s132 2>&1; echo "status $?" >> /tmp/s132 ) &
wait
emit both sh -c 'cat /tmp/s131 /tmp/s132'
emit together $g inventory -o json
`

func TestHookPhases(t *testing.T) {
	vm := newVM(t)
	res := boot(t, vm, TwoSockets(), hookScript)
	all := func(name, want string) {
		t.Helper()
		for a, d := range driversOf(t, res, name) {
			if d != want {
				t.Errorf("%s: %s is on %s, want %s", name, a, d, want)
			}
		}
	}
	all("before", "e1000e")
	refused := string(output(t, res, "refused"))
	if !strings.Contains(refused, "VM 131 start refused") || !strings.Contains(refused, "interface eth0 (up)") || !strings.HasSuffix(strings.TrimSpace(refused), "status 1") {
		t.Errorf("the start with eth0 up:\n%s", refused)
	}
	all("unchanged", "e1000e")

	before := driversOf(t, res, "before")
	started := driversOf(t, res, "started")
	start := string(output(t, res, "start"))
	moved := 0
	for a := range before {
		if strings.Contains(start, "gpusplit hook 131: "+a+"  e1000e → vfio-pci  ok") {
			moved++
			if started[a] != "vfio-pci" {
				t.Errorf("after the start %s is on %s", a, started[a])
			}
		} else if started[a] != "e1000e" {
			t.Errorf("a device of no VM moved: %s is on %s", a, started[a])
		}
	}
	if moved != 2 {
		t.Errorf("the start moved %d devices, want VM 131's 2:\n%s", moved, start)
	}
	if again := string(output(t, res, "again")); !strings.Contains(again, "already on vfio-pci") {
		t.Errorf("a second start:\n%s", again)
	}
	if stop := string(output(t, res, "stop")); strings.Count(stop, "restored to e1000e") != 2 {
		t.Errorf("the stop:\n%s", stop)
	}
	all("stopped", "e1000e")

	both := string(output(t, res, "both"))
	if strings.Count(both, "status 0") != 2 || strings.Count(both, "e1000e → vfio-pci  ok") != 4 {
		t.Errorf("two starts at once:\n%s", both)
	}
	all("together", "vfio-pci")
}
