package addrspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// The cpu option keeps every part it had, in its order: only phys-bits and the flag
// change, a -pdpe1gb becoming +pdpe1gb rather than both being listed.
func TestWithCPU(t *testing.T) {
	for _, c := range []struct{ in, flag, want string }{
		{"", "pdpe1gb", "kvm64,flags=+pdpe1gb,phys-bits=42"},
		{"host", "", "host,phys-bits=42"},
		{"x86-64-v2-AES", "pdpe1gb", "x86-64-v2-AES,flags=+pdpe1gb,phys-bits=42"},
		{"cputype=kvm64,hidden=1,flags=+aes;-pdpe1gb;+pcid", "pdpe1gb", "cputype=kvm64,hidden=1,flags=+aes;+pcid;+pdpe1gb,phys-bits=42"},
		{"EPYC-Genoa,phys-bits=40,guest-phys-bits=40,flags=+pdpe1gb", "pdpe1gb", "EPYC-Genoa,phys-bits=42,guest-phys-bits=40,flags=+pdpe1gb"},
	} {
		if got := withCPU(c.in, 42, c.flag); got != c.want {
			t.Errorf("withCPU(%q) = %q, want %q", c.in, got, c.want)
		}
		if p := parseCPU(withCPU(c.in, 42, c.flag)); p.PhysBits != "42" || c.flag != "" && !p.Flags["pdpe1gb"] {
			t.Errorf("%q reads back as %+v", c.in, p)
		}
	}
}

// The args line keeps what it holds (gpusplit's own -device entries, other options,
// their spacing): the window is changed in place, or added at the end.
func TestWithArgsWindow(t *testing.T) {
	const layout = "-device pxb-pcie,id=gpusplit-pxb0,bus_nr=32,numa_node=0,bus=pcie.0,addr=0x2  -device pcie-root-port,id=gpusplit-rp0,bus=gpusplit-pxb0,chassis=40"
	for _, c := range []struct{ in, want string }{
		{"", "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=2097152"},
		{layout, layout + " -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=2097152"},
		{"-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=65536  -no-hpet", "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=2097152  -no-hpet"},
		{"-fw_cfg name=opt/other,string=1 -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=1", "-fw_cfg name=opt/other,string=1 -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=2097152"},
	} {
		got := withArgsWindow(c.in, 2097152)
		if got != c.want {
			t.Errorf("withArgsWindow(%q) =\n%q, want\n%q", c.in, got, c.want)
		}
		if mb, ok := argsWindow(got); !ok || mb != 2097152 {
			t.Errorf("%q reads back as %d, %v", got, mb, ok)
		}
	}
	got := withArgsHole64("-no-hpet -global q35-pcihost.pci-hole64-size=64G", true, 2*TiB)
	if got != "-no-hpet -global q35-pcihost.pci-hole64-size=2048G" {
		t.Errorf("hole64: %q", got)
	}
	if s, ok := argsHole64(got, true); !ok || s != 2*TiB {
		t.Errorf("hole64 reads back as %d, %v", s, ok)
	}
	// What is not the option, or not a size, is no setting: the plan takes the default.
	for _, args := range []string{"-fw_cfg name=opt/other,string=1", "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=lots", "-fw_cfg", "name=opt/ovmf/X-PciMmio64Mb,string=1"} {
		if mb, ok := argsWindow(args); ok {
			t.Errorf("argsWindow(%q) = %d", args, mb)
		}
	}
	for _, args := range []string{"-global i440FX-pcihost.pci-hole64-size=1T", "-global q35-pcihost.pci-hole64-size=big", "-global q35-pcihost.pci-hole64-size=99999999T"} {
		if s, ok := argsHole64(args, true); ok {
			t.Errorf("argsHole64(%q) = %d", args, s)
		}
	}
	if s, ok := argsHole64("-global i440FX-pcihost.pci-hole64-size=1T", false); !ok || s != TiB {
		t.Errorf("i440fx's hole64 reads as %d, %v", s, ok)
	}
}

// A plan that changes nothing else leaves the config's other options as they are:
// the existing args keep their devices, the cpu its flags.
func TestPlanKeepsOptions(t *testing.T) {
	_, _, cpu := sample(t)
	const args = "-device pxb-pcie,id=gpusplit-pxb0,bus_nr=32,numa_node=0,bus=pcie.0,addr=0x2"
	config := vm131(t, 8, "x86-64-v2-AES,flags=+aes;-pdpe1gb,hidden=1", "ovmf", "args: "+args)
	r := plan(t, config, gpus(t, 8), cpu)
	if !strings.HasPrefix(r.Args, args+" -fw_cfg ") || !strings.HasPrefix(r.CPU, "x86-64-v2-AES,flags=+aes;+pdpe1gb,hidden=1,phys-bits=") {
		t.Errorf("cpu %q\nargs %q", r.CPU, r.Args)
	}
}

// A VM without a cpu option runs qemu-server's default model, which depends on KVM:
// the plan names that model, so that its settings change nothing but the width.
func TestPlanDefaultModel(t *testing.T) {
	_, _, cpu := sample(t)
	for kvm, model := range map[string]string{"": "kvm64,", "kvm: 1\n": "kvm64,", "kvm: 0\n": "qemu64,"} {
		r := plan(t, vm131(t, 8, "", "ovmf", strings.TrimSuffix(kvm, "\n")), gpus(t, 8), cpu)
		if !strings.HasPrefix(r.CPU, model) {
			t.Errorf("%q: cpu %q, want the model %s", kvm, r.CPU, strings.TrimSuffix(model, ","))
		}
	}
}

// DeviceOf takes a 64-bit BAR at the largest size its Resizable BAR capability
// offers: the sample GPU's BAR1, set to 256 MiB here, counts as the 128 GiB it can be.
func TestDeviceOfResizableBAR(t *testing.T) {
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[0]
	sys := filepath.Join(dir, g.Path)
	res, err := os.ReadFile(filepath.Join(sys, "resource"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(res), "\n")
	lines[1] = "0x0000020000000000 0x000002000fffffff 0x000000000014220c" // BAR1: 256 MiB now
	if err := os.WriteFile(filepath.Join(sys, "resource"), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	h, _ = host.Open(dir)
	inv, err = inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	g = inv.GPUs[0]
	if g.BARs[1].Size != 256<<20 {
		t.Fatalf("BAR1 reads %d", g.BARs[1].Size)
	}
	d := DeviceOf(h, "hostpci0", g.Device)
	var bar1 BAR
	for _, b := range d.Functions[0].BARs {
		if b.Index == 1 {
			bar1 = b
		}
	}
	if bar1.Size != 128<<30 || !bar1.Is64Bit || !bar1.Prefetchable {
		t.Errorf("BAR1 planned as %+v", bar1)
	}
	// Without the config space (a reader without root gets 64 bytes) it is what it is.
	if err := os.WriteFile(filepath.Join(sys, "config"), make([]byte, 64), 0o644); err != nil {
		t.Fatal(err)
	}
	d = DeviceOf(h, "hostpci0", g.Device)
	for _, b := range d.Functions[0].BARs {
		if b.Index == 1 && b.Size != 256<<20 {
			t.Errorf("without the capability BAR1 is planned at %d", b.Size)
		}
	}
}

// A cpuinfo without the width is an error that says so; the first processor's lines
// are the ones read.
func TestReadHostCPUErrors(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "proc"), 0o755)
	os.WriteFile(filepath.Join(dir, "proc/cpuinfo"), []byte("processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu\n\n"), 0o644)
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHostCPU(h); err == nil || !strings.Contains(err.Error(), "address sizes") {
		t.Errorf("err = %v", err)
	}
	os.WriteFile(filepath.Join(dir, "proc/cpuinfo"), []byte("processor\t: 0\naddress sizes\t: 99 bits physical, 57 bits virtual\n"), 0o644)
	if _, err := ReadHostCPU(h); err == nil || !strings.Contains(err.Error(), "99 bits") {
		t.Errorf("err = %v", err)
	}
	os.WriteFile(filepath.Join(dir, "proc/cpuinfo"), []byte("processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu lm\naddress sizes\t: 46 bits physical, 57 bits virtual\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\nflags\t\t: fpu pdpe1gb\naddress sizes\t: 52 bits physical, 57 bits virtual\n\n"), 0o644)
	c, err := ReadHostCPU(h)
	if err != nil || c != (HostCPU{PhysBits: 46, Vendor: "GenuineIntel"}) {
		t.Errorf("%+v, %v", c, err)
	}
}

// Any config text plans without a panic, to one of the outcomes, and a plan that asks
// for settings keeps the cpu and args it was given but for what it sets.
func FuzzPlan(f *testing.F) {
	h, err := samplehost.Open()
	if err != nil {
		f.Fatal(err)
	}
	text, err := h.ReadString("/etc/pve/nodes/kpro6/qemu-server/131.conf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(text)
	f.Add(strings.Replace(text, "cpu: host", "cpu: x86-64-v2-AES,flags=+aes;-pdpe1gb,phys-bits=39", 1))
	f.Add(strings.Replace(text, "bios: ovmf", "args: -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=65536 -global q35-pcihost.pci-hole64-size=1T\nhotplug: memory", 1))
	f.Add("machine: pc\nmemory: current=4096\nhostpci0: 01:00.0,rombar=0\nhostpci7: mapping=x\n")
	gpu := Device{Functions: []Function{{BARs: []BAR{{Index: 0, Size: 64 << 20}, {Index: 1, Size: 128 << 30, Is64Bit: true, Prefetchable: true}, {Index: 3, Size: 32 << 20, Is64Bit: true, Prefetchable: true}, {Index: 6, Size: 512 << 10}}}}}
	var devs []Device
	for i := range 8 {
		d := gpu
		d.Entry = "hostpci" + string(rune('0'+i))
		devs = append(devs, d)
	}
	cpu := HostCPU{PhysBits: 52, Vendor: "AuthenticAMD", PDPE1GB: true}
	f.Fuzz(func(t *testing.T, config string) {
		r, err := Plan(config, devs, cpu)
		if err != nil {
			return
		}
		switch r.Outcome {
		case OK, Refused:
			if r.CPU != "" || r.Args != "" {
				t.Errorf("%s with settings: %q %q", r.Outcome, r.CPU, r.Args)
			}
		case NeedsSettings, NeedsRealloc:
			c := parseConfig(config)
			if r.CPU != "" && parseCPU(r.CPU).Type != parseCPU(cpuOption(c)).Type {
				t.Errorf("cpu %q became %q", c["cpu"], r.CPU)
			}
		default:
			t.Errorf("outcome %q", r.Outcome)
		}
	})
}
