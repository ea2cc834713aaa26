package vmtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gpuBAR is the BAR that did not fit in the story (docs/vm-topology.md): each RTX PRO 6000
// wants 128 GiB, 64-bit prefetchable, as its BAR 2 in the guest's log.
const gpuBAR = 128 << 30

// gpuStandIn plays one GPU: QEMU's pci-testdev, whose membar is a 64-bit prefetchable
// BAR 2 of any power-of-two size backed by nothing, so 128 GiB costs the host nothing.
var gpuStandIn = testdev(gpuBAR).qemu

// eightGPUs is a VM shaped like the sample host's VM 131 given all eight GPUs by the
// mapping (q35, hostpci0–7 with pcie=1, OVMF with a 4 MiB efidisk without enrolled keys),
// made to run without KVM: kvm: 0 and the qemu64 model qemu-server then uses, one vCPU,
// 1 GiB of memory (the 256 GiB of VM 131 would only move the window's start), no disks or
// NICs. bios is the firmware line; extra holds the cpu:/args: lines being proven.
func eightGPUs(bios, extra string) (PVEVM, error) {
	var b strings.Builder
	switch bios {
	case "ovmf":
		b.WriteString("bios: ovmf\nefidisk0: local-zfs:vm-131-disk-0,efitype=4m,pre-enrolled-keys=0,size=1M\n")
	case "seabios":
		b.WriteString("bios: seabios\n")
	default:
		return PVEVM{}, fmt.Errorf("firmware %q", bios)
	}
	standIns := map[string]string{}
	for i := range 8 {
		key := fmt.Sprintf("hostpci%d", i)
		fmt.Fprintf(&b, "%s: mapping=pro6000,pcie=1\n", key)
		standIns[key] = gpuStandIn
	}
	b.WriteString("kvm: 0\nmachine: q35\nmemory: 1024\nname: train01\nostype: l26\n")
	b.WriteString(extra)
	return PVEVM{Name: "131 (" + bios + ")", Config: b.String(), StandIns: standIns}, nil
}

// The command line for VM 131 given eight GPUs, as qemu-server writes it for these
// options (on QEMU 7.2 without KVM), written out by hand from its source: the pflash
// pair, -smp, -cpu, -m, the S3/S4 globals, pve-q35-4.0.cfg's devices, each hostpci on
// its root port (the ports past the fourth added before their device), the display,
// -machine, and args last.
func TestPVECommandLine(t *testing.T) {
	vm, err := eightGPUs("ovmf", "args: -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=2097152\ncpu: qemu64,flags=+pdpe1gb,phys-bits=42\nsockets: 1\ncores: 2\n")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	got, err := vm.qemuArgs(dir)
	if err != nil {
		t.Fatal(err)
	}
	vars := filepath.Join(dir, "efidisk0.raw")
	want := []string{
		"-nodefaults", "-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot",
		"-drive", "if=pflash,unit=0,format=raw,readonly=on,file=" + filepath.Join(OVMFDir, "OVMF_CODE_4M.secboot.fd"),
		"-drive", "if=pflash,unit=1,id=drive-efidisk0,format=raw,file=" + vars + ",size=540672",
		"-smp", "2,sockets=1,cores=2,maxcpus=2",
		"-cpu", "qemu64,+pdpe1gb,phys-bits=42",
		"-m", "1024",
		"-global", "ICH9-LPC.disable_s3=1", "-global", "ICH9-LPC.disable_s4=1",
	}
	for _, d := range pveQ35Devices {
		want = append(want, "-device", d)
	}
	want = append(want,
		"-device", "pci-testdev,id=hostpci0,bus=ich9-pcie-port-1,addr=0x0,membar=128G",
		"-device", "pci-testdev,id=hostpci1,bus=ich9-pcie-port-2,addr=0x0,membar=128G",
		"-device", "pci-testdev,id=hostpci2,bus=ich9-pcie-port-3,addr=0x0,membar=128G",
		"-device", "pci-testdev,id=hostpci3,bus=ich9-pcie-port-4,addr=0x0,membar=128G",
		// The root port strings as qemu-server's own test expects them
		// (src/test/cfg2cmd/q35-linux-hostpci.conf.cmd has ports 5 and 8).
		"-device", "pcie-root-port,id=ich9-pcie-port-5,addr=10.0,x-speed=16,x-width=32,multifunction=on,bus=pcie.0,port=5,chassis=5",
		"-device", "pci-testdev,id=hostpci4,bus=ich9-pcie-port-5,addr=0x0,membar=128G",
		"-device", "pcie-root-port,id=ich9-pcie-port-6,addr=10.1,x-speed=16,x-width=32,multifunction=on,bus=pcie.0,port=6,chassis=6",
		"-device", "pci-testdev,id=hostpci5,bus=ich9-pcie-port-6,addr=0x0,membar=128G",
		"-device", "pcie-root-port,id=ich9-pcie-port-7,addr=10.2,x-speed=16,x-width=32,multifunction=on,bus=pcie.0,port=7,chassis=7",
		"-device", "pci-testdev,id=hostpci6,bus=ich9-pcie-port-7,addr=0x0,membar=128G",
		"-device", "pcie-root-port,id=ich9-pcie-port-8,addr=10.3,x-speed=16,x-width=32,multifunction=on,bus=pcie.0,port=8,chassis=8",
		"-device", "pci-testdev,id=hostpci7,bus=ich9-pcie-port-8,addr=0x0,membar=128G",
		"-device", "VGA,id=vga,bus=pcie.0,addr=0x1",
		"-machine", "accel=tcg,type=q35",
		"-fw_cfg", "name=opt/ovmf/X-PciMmio64Mb,string=2097152",
	)
	if !slices.Equal(got, want) {
		t.Errorf("command line:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Each boot gets the variables template as a new efidisk would.
	template, err := os.ReadFile(filepath.Join(OVMFDir, "OVMF_VARS_4M.fd"))
	if err != nil {
		t.Fatalf("%v: %s", err, Setup)
	}
	if copied, err := os.ReadFile(vars); err != nil || !bytes.Equal(copied, template) {
		t.Errorf("the efidisk copy differs from OVMF_VARS_4M.fd (%v)", err)
	}
}

// A slot passed whole: each function its own device on the root port, hostpciN.F at
// 0x0.F, the first multifunction=on, as PCI.pm's print_hostpci_devices writes them
// (qemu-server's src/test/cfg2cmd/q35-linux-hostpci-multifunction.conf.cmd).
func TestPVEMultifunction(t *testing.T) {
	vm := PVEVM{Name: "x", Config: "kvm: 0\nmachine: q35\nvga: none\nhostpci5: mapping=gpu,pcie=1\n",
		StandIns: map[string]string{"hostpci5": "pci-testdev,membar=128G;pci-testdev,membar=32M"}}
	got, err := vm.qemuArgs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(got, " ")
	want := "-device pcie-root-port,id=ich9-pcie-port-6,addr=10.1,x-speed=16,x-width=32,multifunction=on,bus=pcie.0,port=6,chassis=6" +
		" -device pci-testdev,id=hostpci5.0,bus=ich9-pcie-port-6,addr=0x0.0,multifunction=on,membar=128G" +
		" -device pci-testdev,id=hostpci5.1,bus=ich9-pcie-port-6,addr=0x0.1,membar=32M "
	if !strings.Contains(line, want) {
		t.Errorf("%q lacks %q", line, want)
	}
}

// qemu-server's root ports past the fourth: hostpci4 to hostpci15 at 10.0–11.3.
func TestPCIeRootPorts(t *testing.T) {
	for i, addr := range map[int]string{4: "10.0", 11: "10.7", 12: "11.0", 15: "11.3"} {
		if got := pcieRootPort(i); !strings.Contains(got, ",addr="+addr+",") {
			t.Errorf("hostpci%d: %s, want addr=%s", i, got, addr)
		}
	}
}

func TestSeaBIOSCommandLine(t *testing.T) {
	vm := PVEVM{Name: "x", Config: "kvm: 0\nmachine: pc-q35-7.2+pve0\nvga: none\nhostpci0: 0000:01:00.0,pcie=1\n", StandIns: map[string]string{"hostpci0": "e1000e"}}
	got, err := vm.qemuArgs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(got, " ")
	// No firmware images (SeaBIOS is QEMU's default), no display, and smm=off, which
	// qemu-server sets for SeaBIOS without a display (should_disable_smm).
	for _, want := range []string{"-cpu qemu64 ", "-m 512 ", "-device e1000e,id=hostpci0,bus=ich9-pcie-port-1,addr=0x0 ", "-machine accel=tcg,smm=off,type=pc-q35-7.2"} {
		if !strings.Contains(line+" ", want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
	for _, unwanted := range []string{"pflash", "VGA"} {
		if strings.Contains(line, unwanted) {
			t.Errorf("%q has %s", line, unwanted)
		}
	}
}

// get_cpu_options without KVM: flags sorted by name whatever their sign, the VM's over
// qemu-server's own, then guest-phys-bits and phys-bits (the order of qemu-server's
// cfg2cmd tests: "host,+kvm_pv_eoi,+kvm_pv_unhalt,guest-phys-bits=39").
func TestCPUOption(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "qemu64",
		"kvm64":                    "kvm64,+lahf_lm,+sep",
		"cputype=kvm64,flags=-sep": "kvm64,+lahf_lm,-sep",
		"qemu64,flags=-x2apic;+pdpe1gb,phys-bits=42,guest-phys-bits=40": "qemu64,+pdpe1gb,-x2apic,guest-phys-bits=40,phys-bits=42",
		"qemu64,phys-bits=host":      "qemu64,host-phys-bits=true",
		"Skylake-Server,level=30":    "Skylake-Server,level=30",
		"qemu64,flags=+pdpe1gb;+aes": "qemu64,+aes,+pdpe1gb",
		// as cpu-level.conf.cmd has "-hv-tlbflush,…,+md-clear,+pdpe1gb"
		"qemu64,flags=+pdpe1gb;-hv-tlbflush;+md-clear": "qemu64,-hv-tlbflush,+md-clear,+pdpe1gb",
		"max,phys-bits=46,flags=+aes":                  "max,+aes,phys-bits=46",
		// the default for new VMs, a built-in model: qemu64 with its flags, the VM's
		// own among them, all sorted by name
		"x86-64-v2-AES,flags=+pdpe1gb,phys-bits=42": "qemu64,+aes,+pdpe1gb,+pni,+popcnt,+sse4.1,+sse4.2,+ssse3,phys-bits=42",
		"x86-64-v2-AES,flags=-aes":                  "qemu64,-aes,+pni,+popcnt,+sse4.1,+sse4.2,+ssse3",
	} {
		got, err := cpuOption(in)
		if err != nil || got != want {
			t.Errorf("cpu: %s → %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"host", "custom-gpu", "qemu64,hidden=1", "qemu64,phys-bits=7", "qemu64,phys-bits=65", "qemu64,flags=pdpe1gb", "qemu64,qemu64"} {
		if got, err := cpuOption(in); err == nil {
			t.Errorf("cpu: %s accepted as %q", in, got)
		}
	}
}

func TestSplitArgs(t *testing.T) {
	got, err := splitArgs(`-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=2097152  -device 'a b' "c\"d" e\ f`)
	want := []string{"-fw_cfg", "name=opt/ovmf/X-PciMmio64Mb,string=2097152", "-device", "a b", `c"d`, "e f"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	if _, err := splitArgs(`-a 'b`); err == nil {
		t.Error("an unterminated quote was accepted")
	}
}

// What the translation does not model is refused, never left out of the command line.
func TestPVEConfigRefused(t *testing.T) {
	base := "kvm: 0\nmachine: q35\nhostpci0: mapping=x,pcie=1\n"
	standIn := map[string]string{"hostpci0": "pci-testdev"}
	for name, tc := range map[string]struct {
		conf     string
		standIns map[string]string
		want     string
	}{
		"a NIC":                   {base + "net0: virtio=BC:24:11:2F:71:0A,bridge=vmbr0\n", standIn, "net0"},
		"KVM":                     {strings.Replace(base, "kvm: 0\n", "", 1), standIn, "kvm: 0"},
		"i440fx":                  {strings.Replace(base, "q35", "pc", 1), standIn, "q35"},
		"viommu":                  {strings.Replace(base, "q35", "q35,viommu=virtio", 1), standIn, "machine options"},
		"hostpci on a PCI bridge": {strings.Replace(base, ",pcie=1", "", 1), standIn, "pcie=1"},
		"no stand-in":             {base, nil, "stand-in"},
		"a stand-in too many":     {base, map[string]string{"hostpci0": "pci-testdev", "hostpci1": "pci-testdev"}, "hostpci1"},
		"NUMA nodes":              {base + "numa: 1\n", standIn, "numa"},
		"another firmware":        {base + "bios: coreboot\n", standIn, "bios"},
		"efidisk under SeaBIOS":   {base + "efidisk0: local:vm-1-disk-0,efitype=4m\n", standIn, "efidisk0"},
		"a key twice":             {base + "memory: 1024\nmemory: 2048\n", standIn, "twice"},
		"another display":         {base + "vga: qxl\n", standIn, "vga"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := PVEVM{Config: tc.conf, StandIns: tc.standIns}.qemuArgs(t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	// Snapshots and pending changes are not the VM's current config.
	vm := PVEVM{Config: base + "[snap1]\nnet0: virtio=x\n", StandIns: standIn}
	if _, err := vm.qemuArgs(t.TempDir()); err != nil {
		t.Errorf("a snapshot section was read as the config: %v", err)
	}
}
