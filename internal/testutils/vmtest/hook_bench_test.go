package vmtest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// eightNICs: eight e1000e on root ports of their own, each its own IOMMU group: the
// eight devices of a VM with four GPUs and their audio functions.
func eightNICs() Topology {
	t := Topology{Name: "eight-nics", IOMMU: true}
	for i := range 8 {
		id := string(rune('a' + i))
		t.Devices = append(t.Devices, rootPort("rp"+id, "pcie.0", fmt.Sprintf("0x%x.0", 0x10+i)), nic("nic"+id, "rp"+id, "0x0"))
	}
	return t
}

// BenchmarkHookInGuest times the hook's pre-start and post-stop of a VM with eight
// devices on a real kernel: the process's wall, user and system time as busybox's
// time -p gives them (to 10 ms), the median of five rounds. User time is gpusplit's
// own work; system time is the kernel's, the binds included; the wall time adds the
// waits for the devices to bind. Under TCG every figure is slower than on hardware.
// One boot serves every round: run it with -benchtime=1x.
func BenchmarkHookInGuest(b *testing.B) {
	vm, err := NewVM(binary, "e1000e", "vfio-pci", "vfio_iommu_type1")
	if err != nil {
		b.Fatal(err)
	}
	const rounds = 5
	var script strings.Builder
	script.WriteString(`g="gpusplit --devices ` + E1000E + `"
mkdir -p /etc/pve/nodes/pve1/qemu-server /etc/pve/nodes/pve1/lxc
echo pve1 > /etc/hostname
ln -s nodes/pve1/qemu-server /etc/pve/qemu-server
ln -s nodes/pve1/lxc /etc/pve/lxc
i=0
for d in /sys/bus/pci/devices/*; do
	if [ "$(cat $d/vendor):$(cat $d/device)" = "0x8086:0x10d3" ]; then
		echo "hostpci$i: $(basename $d),pcie=1" >> /etc/pve/qemu-server/131.conf
		i=$((i+1))
	fi
done
printf 'machine: q35\nmemory: 512\n' >> /etc/pve/qemu-server/131.conf
`)
	for i := range rounds {
		fmt.Fprintf(&script, "emit pre-%d sh -c 'busybox time -p $0 hook 131 pre-start 2>&1 >/dev/null' \"$g\"\n", i)
		fmt.Fprintf(&script, "emit post-%d sh -c 'busybox time -p $0 hook 131 post-stop 2>&1 >/dev/null' \"$g\"\n", i)
	}
	for b.Loop() {
		res, err := vm.Run(b.Context(), eightNICs(), script.String())
		if res != nil && res.Retried != "" {
			b.Logf("booted a second time, the first boot failed before the benchmark ran: %s", res.Retried)
		}
		if err != nil {
			b.Fatal(err)
		}
		for _, phase := range []string{"pre", "post"} {
			times := map[string][]float64{}
			for i := range rounds {
				name := fmt.Sprintf("%s-%d", phase, i)
				out := string(res.Files[name])
				if res.Status[name] != 0 || !strings.Contains(out, "real ") {
					b.Fatalf("%s: status %d\n%s", name, res.Status[name], out)
				}
				for _, l := range strings.Split(out, "\n") {
					f := strings.Fields(l)
					if len(f) == 2 && (f[0] == "real" || f[0] == "user" || f[0] == "sys") {
						s, err := strconv.ParseFloat(f[1], 64)
						if err != nil {
							b.Fatalf("%s: %q", name, l)
						}
						times[f[0]] = append(times[f[0]], s)
					}
				}
			}
			for _, k := range []string{"real", "user", "sys"} {
				v := times[k]
				if len(v) != rounds {
					b.Fatalf("%s: %d %s times", phase, len(v), k)
				}
				slices.Sort(v)
				b.ReportMetric(v[rounds/2]*1000, fmt.Sprintf("%s-ms/%s-%s", k, phase, map[string]string{"pre": "start", "post": "stop"}[phase]))
			}
		}
	}
}
