package vmtest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// qemuRefusal starts QEMU on a q35 machine with the given options, paused, and returns
// its error: the host devices do not exist here, so QEMU stops at the first vfio-pci
// device it realises, after it has parsed every option, -set included.
func qemuRefusal(t *testing.T, opts ...string) string {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatalf("qemu-system-x86_64 is not installed: %s", Setup)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"-machine", "q35", "-accel", "tcg", "-nodefaults", "-display", "none", "-S", "-monitor", "none"}, opts...)
	out, err := exec.CommandContext(ctx, "qemu-system-x86_64", args...).CombinedOutput()
	if err == nil {
		t.Fatalf("QEMU started with devices this machine lacks: %s", args)
	}
	return string(out)
}

// QEMU takes pve p2p-clique's -set options after the -device lines qemu-server writes
// for single-function entries (id=hostpciN): what it then refuses is the missing host
// device, not the property or the device id. For a multi-function entry qemu-server's ids
// are hostpciN.0…, and QEMU refuses -set on them: hence p2p-clique's refusal.
func TestCliqueOptionsAccepted(t *testing.T) {
	conf := "hostpci0: 0000:81:00.0,pcie=1\nhostpci1: 0000:91:00.0,pcie=1\nmachine: q35\nmemory: 4096\n"
	g, err := pve.ParseGuest("140.conf", pve.QEMU, 140, conf)
	if err != nil {
		t.Fatal(err)
	}
	one := func(id string) vmlayout.Device {
		return vmlayout.Device{Hostpci: id, Class: "0x030000", Vendor: "10de", Device: "2bb1"}
	}
	m := &vmlayout.Manifest{VMID: 140, Devices: []vmlayout.Device{one("hostpci0"), one("hostpci1")}, P2P: &vmlayout.HostP2P{}}
	if _, err := vmlayout.SetClique(g, m, 3); err != nil {
		t.Fatal(err)
	}
	args, _ := g.Get("args")
	// qemu-server's lines for these entries (print_hostpci_devices), then the args.
	opts := []string{
		"-device", "pcie-root-port,id=ich9-pcie-port-1,addr=0x1c.0,bus=pcie.0,multifunction=on,chassis=1",
		"-device", "pcie-root-port,id=ich9-pcie-port-2,addr=0x1c.1,bus=pcie.0,chassis=2",
		"-device", "vfio-pci,host=0000:81:00.0,id=hostpci0,bus=ich9-pcie-port-1,addr=0x0",
		"-device", "vfio-pci,host=0000:91:00.0,id=hostpci1,bus=ich9-pcie-port-2,addr=0x0",
	}
	opts = append(opts, strings.Fields(args)...)
	if !strings.Contains(args, "-set device.hostpci1.x-nv-gpudirect-clique=3") {
		t.Fatalf("args %q", args)
	}
	if out := qemuRefusal(t, opts...); !strings.Contains(out, "vfio /sys/bus/pci/devices/0000:81:00.0: no such host device") {
		t.Errorf("QEMU refused something else than the missing host device:\n%s", out)
	}
	// The same -set with a clique QEMU does not allow is refused by QEMU as a property
	// value: so the property was reached.
	bad := append(opts[:8:8], "-set", "device.hostpci0.x-nv-gpudirect-clique=16")
	if out := qemuRefusal(t, bad...); !strings.Contains(out, "Property x-nv-gpudirect-clique: valid range 0-15") {
		t.Errorf("QEMU did not reach the property:\n%s", out)
	}
	// A multi-function entry: qemu-server's ids have a dot, which -set cannot name.
	out := qemuRefusal(t, "-device", "vfio-pci,host=0000:81:00.0,id=hostpci0.0,multifunction=on", "-set", "device.hostpci0.0.x-nv-gpudirect-clique=3")
	if !strings.Contains(out, `there is no device "hostpci0" defined`) {
		t.Errorf("QEMU took -set on a dotted id:\n%s", out)
	}
	// vm-layout's own devices take the property directly.
	laid := "args: -device pxb-pcie,id=gpusplit-pxb0,bus_nr=128,numa_node=0,bus=pcie.0,addr=0x2 " +
		"-device pcie-root-port,id=gpusplit-rp0,bus=gpusplit-pxb0,addr=0x0,port=128,chassis=128,slot=0 " +
		"-device vfio-pci,host=0000:81:00.0,id=gpusplit-hostpci0.0,bus=gpusplit-rp0,addr=0x0.0,multifunction=on " +
		"-device vfio-pci,host=0000:81:00.1,id=gpusplit-hostpci0.1,bus=gpusplit-rp0,addr=0x0.1 " +
		"-device pcie-root-port,id=gpusplit-rp1,bus=gpusplit-pxb0,addr=0x1,port=129,chassis=129,slot=0 " +
		"-device vfio-pci,host=0000:91:00.0,id=gpusplit-hostpci1,bus=gpusplit-rp1,addr=0x0\nmachine: q35\nnuma: 1\nnuma0: cpus=0-3,hostnodes=1,memory=4096,policy=bind\n"
	lg, err := pve.ParseGuest("141.conf", pve.QEMU, 141, laid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vmlayout.SetLayoutClique(lg, 3); err != nil {
		t.Fatal(err)
	}
	largs, _ := lg.Get("args")
	if strings.Count(largs, ",x-nv-gpudirect-clique=3") != 2 || strings.Contains(largs, "addr=0x0.1,x-nv") {
		t.Fatalf("layout args %q", largs)
	}
	opts = append([]string{"-m", "512M", "-object", "memory-backend-ram,id=mem0,size=512M", "-numa", "node,nodeid=0,memdev=mem0"}, strings.Fields(largs)...)
	if out := qemuRefusal(t, opts...); !strings.Contains(out, "vfio /sys/bus/pci/devices/0000:81:00.0: no such host device") {
		t.Errorf("QEMU refused the layout's clique:\n%s", out)
	}
}
