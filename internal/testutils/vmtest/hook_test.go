package vmtest

import (
	"strings"
	"testing"
)

// The hook's phases on a real kernel, the NICs playing the GPUs of two VMs on a node
// "pve1": a start refused while an interface of its device is up (nothing changed), a
// start that moves the VM's devices to vfio-pci, a second start that finds them there, a
// stop that gives them back to e1000e; a start while an apply holds the driver lock
// (its modprobe slow), which waits half its deadline and is refused, naming the apply's
// pid; a start whose modprobe never returns, ended at its deadline with nothing
// changed; the snippet pve hook install writes for a VM with a hookscript of its own,
// which runs that script at post-stop even when gpusplit's part fails; two VMs
// starting at once, which take turns; and a device the kernel lost while its VM ran
// (removed through sysfs, as a surprise link down removes one), which the VM's stop
// quarantines while it gives the other back, doctor names, and release refuses.
const hookScript = `
g="gpusplit --devices ` + E1000E + `"
addr() { basename $(readlink -f /sys/class/net/$1/device); }
lost=$(addr eth3)
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
rmmod vfio_pci
mkdir -p /lib/modules/$(uname -r) /usr/sbin
echo "kernel/drivers/vfio/pci/vfio-pci.ko:" > /lib/modules/$(uname -r)/modules.dep
printf '#!/bin/sh\nsleep 8\nexec insmod /lib/modules/vfio-pci.ko\n' > /usr/sbin/modprobe
chmod 755 /usr/sbin/modprobe
( $g apply --vfio $(addr eth3) --persist=false --yes > /tmp/apply 2>&1; echo "status $?" >> /tmp/apply ) &
sleep 2
emit locked sh -c "$g hook --deadline 4s 131 pre-start 2>&1; echo status \$?"
wait
emit applied cat /tmp/apply
emit rolledback sh -c "$g rollback --yes 2>&1"
rmmod vfio_pci
printf '#!/bin/sh\nexec sleep 600\n' > /usr/sbin/modprobe
emit stuck sh -c "$g hook --deadline 3s 131 pre-start 2>&1; echo status \$?"
emit unstuck $g inventory -o json
rm /usr/sbin/modprobe
insmod /lib/modules/vfio-pci.ko
mkdir -p /var/lib/vz/snippets /var/lock/qemu-server
printf 'dir: local\n\tpath /var/lib/vz\n\tcontent snippets\n' > /etc/pve/storage.cfg
printf '#!/bin/sh\necho "own $*" >> /tmp/own.log\nexit 3\n' > /var/lib/vz/snippets/own.sh
chmod 755 /var/lib/vz/snippets/own.sh
cp /etc/pve/qemu-server/131.conf /tmp/131.conf
echo 'hookscript: local:snippets/own.sh' >> /etc/pve/qemu-server/131.conf
emit install sh -c "gpusplit pve hook install --vm 131 --apply --binary /bin/gpusplit 2>&1"
mkdir -p /run/gpusplit/hooks
echo damaged > /run/gpusplit/hooks/vm-131.json
emit chained sh -c "/var/lib/vz/snippets/gpusplit-hook-131 131 post-stop 2>&1; echo status \$?; cat /tmp/own.log"
rm /run/gpusplit/hooks/vm-131.json
emit chainedok sh -c "/var/lib/vz/snippets/gpusplit-hook-131 131 post-stop 2>&1; echo status \$?"
cp /tmp/131.conf /etc/pve/qemu-server/131.conf
( $g hook 131 pre-start > /tmp/s131 2>&1; echo "status $?" >> /tmp/s131 ) &
( $g hook 132 pre-start > /tmp/s132 2>&1; echo "status $?" >> /tmp/s132 ) &
wait
emit both sh -c 'cat /tmp/s131 /tmp/s132'
emit together $g inventory -o json
echo 1 > /sys/bus/pci/devices/$lost/remove
emit quarantined sh -c "$g hook 132 post-stop 2>&1; echo status \$?"
emit afterq $g inventory -o json
emit qdoctor sh -c "$g doctor 2>&1; echo status \$?"
emit qrelease sh -c "$g hook release $lost 2>&1; echo status \$?"
echo $lost > /tmp/lost
emit lost cat /tmp/lost
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

	locked := string(output(t, res, "locked"))
	if !strings.Contains(locked, "another gpusplit (pid ") || !strings.Contains(locked, "is changing drivers on this host and has not let go for 2s; nothing was changed") || !strings.HasSuffix(strings.TrimSpace(locked), "status 1") {
		t.Errorf("a start while an apply holds the lock:\n%s", locked)
	}
	if applied := string(output(t, res, "applied")); !strings.Contains(applied, "moved 1 device") || !strings.Contains(applied, "status 0") {
		t.Errorf("the apply that held the lock:\n%s", applied)
	}
	stuck := string(output(t, res, "stuck"))
	if !strings.Contains(stuck, "VM 131 start refused") || !strings.Contains(stuck, "/usr/sbin/modprobe vfio_pci did not finish within its time") ||
		!strings.Contains(stuck, "deadline of 3s passed") || !strings.HasSuffix(strings.TrimSpace(stuck), "status 1") {
		t.Errorf("a start whose modprobe hangs:\n%s", stuck)
	}
	all("unstuck", "e1000e")

	// The guest's own script runs at post-stop though gpusplit's part fails, and the
	// statuses are combined: gpusplit's failure wins, else the script's.
	if install := string(output(t, res, "install")); !strings.Contains(install, "gpusplit-hook-131") {
		t.Errorf("pve hook install:\n%s", install)
	}
	chained := string(output(t, res, "chained"))
	if !strings.Contains(chained, "vm-131.json is damaged") || !strings.Contains(chained, "status 1\n") || !strings.Contains(chained, "own 131 post-stop") {
		t.Errorf("a chained script after a failed post-stop:\n%s", chained)
	}
	if ok := string(output(t, res, "chainedok")); !strings.Contains(ok, "nothing to give back") || !strings.HasSuffix(strings.TrimSpace(ok), "status 3") {
		t.Errorf("a chained script after a post-stop that did its part:\n%s", ok)
	}

	both := string(output(t, res, "both"))
	if strings.Count(both, "status 0") != 2 || strings.Count(both, "e1000e → vfio-pci  ok") != 4 {
		t.Errorf("two starts at once:\n%s", both)
	}
	all("together", "vfio-pci")

	lost := strings.TrimSpace(string(output(t, res, "lost")))
	q := string(output(t, res, "quarantined"))
	if !strings.Contains(q, lost+" QUARANTINED: "+lost+" is gone") || !strings.Contains(q, "VM 132's stop quarantined 1 GPU(s)") || !strings.HasSuffix(strings.TrimSpace(q), "status 1") {
		t.Errorf("the stop of a VM whose device was lost:\n%s", q)
	}
	afterq := driversOf(t, res, "afterq")
	if _, ok := afterq[lost]; ok {
		t.Errorf("the lost device %s is still in the inventory", lost)
	}
	back := 0
	for a, d := range afterq {
		if d == "e1000e" {
			back++
		} else if d != "vfio-pci" {
			t.Errorf("after the stop %s is on %s", a, d)
		}
	}
	if back != 1 {
		t.Errorf("the stop gave back %d devices, want VM 132's other one: %v", back, afterq)
	}
	if d := string(output(t, res, "qdoctor")); !strings.Contains(d, lost) || !strings.Contains(d, "quarantined") {
		t.Errorf("doctor:\n%s", d)
	}
	if r := string(output(t, res, "qrelease")); !strings.Contains(r, "still broken") || !strings.HasSuffix(strings.TrimSpace(r), "status 1") {
		t.Errorf("release of a device still gone:\n%s", r)
	}
}
