package pve

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/addrspace"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pveprop"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/pveperl"
)

const vm131Path = "etc/pve/nodes/kpro6/qemu-server/131.conf"

// vm131With is the sample host's VM 131 with its cpu option replaced.
func vm131With(t *testing.T, cpu string) string {
	t.Helper()
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	text, err := h.ReadString("/" + vm131Path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Replace(text, "cpu: host\n", "cpu: "+cpu+"\n", 1)
}

// option is the value of a key in a config's main section.
func option(config, key string) string {
	m := regexp.MustCompile(`(?m)^` + key + `: (.*)$`).FindStringSubmatch(config)
	if m == nil {
		return ""
	}
	return m[1]
}

// vmGPUs are the devices VM 131 passes after the reference split (--vfio numa:1): the
// four GPUs of pro6000-vm, whole slots, as hostpci0-3.
func vmGPUs(t *testing.T, h *host.Host, inv *inventory.Inventory) []addrspace.Device {
	t.Helper()
	var out []addrspace.Device
	for _, g := range inv.GPUs {
		if g.NUMANode != 1 {
			continue
		}
		out = append(out, addrspace.DeviceOf(h, fmt.Sprintf("hostpci%d", len(out)), append([]*pci.Device{g.Device}, g.Functions...)...))
	}
	return out
}

// Sync writes what the VM's address space needs: VM 131 with Proxmox's default CPU
// model for new VMs gets phys-bits, +pdpe1gb and OVMF's window, which then place every
// GPU it is given; a second sync changes nothing more. As the sample has it (cpu:
// host) the VM needs neither.
func TestSyncAddressSpace(t *testing.T) {
	d := vfio(t, "numa:1")
	changes, _ := syncWith(t, map[string]string{vm131Path: vm131With(t, "x86-64-v2-AES")}, d, SyncOptions{})
	vm := changes["/etc/pve/qemu-server/131.conf"]
	cpu, args := option(vm.New, "cpu"), option(vm.New, "args")
	if !strings.HasPrefix(cpu, "x86-64-v2-AES,flags=+pdpe1gb,phys-bits=") || !strings.HasPrefix(args, "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=") {
		t.Fatalf("cpu %q, args %q:\n%s", cpu, args, vm.New)
	}
	if len(vm.Refusals) > 0 || !strings.Contains(strings.Join(vm.Notes, "\n"), "OVMF places the 64-bit BARs of all 4 GPUs") {
		t.Errorf("refusals %q, notes %q", vm.Refusals, vm.Notes)
	}
	h, inv := demoWith(t, map[string]string{vm131Path: vm.New})
	cpuInfo, err := addrspace.ReadHostCPU(h)
	if err != nil {
		t.Fatal(err)
	}
	r, err := addrspace.Plan(vm.New, vmGPUs(t, h, inv), cpuInfo)
	if err != nil || r.Outcome != addrspace.OK {
		t.Fatalf("the written config plans as %v, %v", r, err)
	}
	again, _ := syncWith(t, map[string]string{vm131Path: vm.New}, d, SyncOptions{})
	if c, ok := again["/etc/pve/qemu-server/131.conf"]; ok && c.Old != c.New {
		t.Errorf("a second sync changes VM 131:\n%s", c.Diff())
	}

	plain := syncDemo(t, d)["/etc/pve/qemu-server/131.conf"]
	if option(plain.New, "cpu") != "host" || option(plain.New, "args") != "" {
		t.Errorf("VM 131 as the sample has it: cpu %q, args %q", option(plain.New, "cpu"), option(plain.New, "args"))
	}
}

// A host whose CPU cannot give the width is a refusal on the VM, with the way out.
func TestSyncAddressSpaceRefused(t *testing.T) {
	h, _ := demo(t)
	info, err := h.ReadString("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	narrow := strings.ReplaceAll(info, "52 bits physical", "39 bits physical")
	changes, _ := syncWith(t, map[string]string{vm131Path: vm131With(t, "x86-64-v2-AES"), "proc/cpuinfo": narrow}, vfio(t, "numa:1"), SyncOptions{})
	vm := changes["/etc/pve/qemu-server/131.conf"]
	if len(vm.Refusals) != 1 || !strings.Contains(vm.Refusals[0], "VM 131: the host's CPU addresses 39 bits") {
		t.Errorf("refusals %q", vm.Refusals)
	}
	if option(vm.New, "args") != "" || option(vm.New, "cpu") != "x86-64-v2-AES" {
		t.Errorf("a refused plan wrote cpu %q, args %q", option(vm.New, "cpu"), option(vm.New, "args"))
	}
}

// qemu-server reads what sync wrote as meant: its own cpu format parses the value
// with the phys-bits and flag set, get_cpu_options puts them on QEMU's -cpu (with no
// warning that OVMF might limit phys-bits to 40), and split_args gives QEMU the
// -fw_cfg option whole. It runs qemu-server's and pve-common's Perl where pveperl finds
// them (a Proxmox node's perl5, or the checkouts GPUSPLIT_PVE_PERL names).
func TestQemuServerReadsAddressSpace(t *testing.T) {
	libs := pveperl.Need(t)
	// The few cluster modules CPUConfig.pm loads, stood in for: the test needs none.
	stubs := t.TempDir()
	for name, body := range map[string]string{
		"PVE/Cluster.pm":         "package PVE::Cluster; use Exporter qw(import); our @EXPORT_OK = qw(cfs_register_file cfs_lock_file cfs_read_file cfs_write_file); sub cfs_register_file {} sub cfs_lock_file {} sub cfs_read_file { {} } sub cfs_write_file {} sub check_cfs_is_mounted { 0 } 1;\n",
		"PVE/RESTEnvironment.pm": "package PVE::RESTEnvironment; use Exporter qw(import); our @EXPORT_OK = qw(log_warn); sub log_warn { warn \"WARN: $_[0]\\n\" } 1;\n",
		"PVE/INotify.pm":         "package PVE::INotify; sub nodename { 'kpro6' } 1;\n",
	} {
		os.MkdirAll(filepath.Join(stubs, "PVE"), 0o755)
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inc := append([]string{"-I" + stubs}, prefixAll("-I", libs)...)

	changes, _ := syncWith(t, map[string]string{vm131Path: vm131With(t, "x86-64-v2-AES,flags=+aes")}, vfio(t, "numa:1"), SyncOptions{})
	vm := changes["/etc/pve/qemu-server/131.conf"]
	cpu, args := option(vm.New, "cpu"), option(vm.New, "args")
	bits := addrspaceBits(t, cpu)
	const script = `
use strict; use warnings;
use PVE::JSONSchema;
use PVE::Tools;
use PVE::QemuServer::CPUConfig;
my ($cpu, $args) = @ARGV;
my $c = PVE::JSONSchema::parse_property_string('pve-vm-cpu-conf', $cpu);
print "cputype=$c->{cputype}\nphys-bits=$c->{'phys-bits'}\nflags=$c->{flags}\n";
my @opt = PVE::QemuServer::CPUConfig::get_cpu_options({ cpu => $cpu, bios => 'ovmf', ostype => 'l26' }, 'x86_64', 1, 0, sub { 1 }, 0, 1, '10.0.2');
print "qemu=@opt\n";
print "arg=$_\n" for @{PVE::Tools::split_args($args)};
`
	cmd := exec.Command("perl", append(inc, "-e", script, cpu, args)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("perl: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"cputype=x86-64-v2-AES\n", fmt.Sprintf("phys-bits=%d\n", bits), "flags=+aes;+pdpe1gb\n",
		"arg=-fw_cfg\n", "arg=" + strings.Fields(args)[1] + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("qemu-server reads %q without %q:\n%s", cpu+" / "+args, want, got)
		}
	}
	if !regexp.MustCompile(`(?m)^qemu=-cpu qemu64,.*\+pdpe1gb.*,phys-bits=` + fmt.Sprint(bits) + `$`).MatchString(got) {
		t.Errorf("QEMU's -cpu:\n%s", got)
	}
	if strings.Contains(got, "might limit CPU 'phys-bits' to 40") {
		t.Errorf("qemu-server warns:\n%s", got)
	}
}

func addrspaceBits(t *testing.T, cpu string) int {
	t.Helper()
	var bits int
	if _, err := fmt.Sscanf(pveprop.Parse(cpu, "cputype")["phys-bits"], "%d", &bits); err != nil || bits <= 40 {
		t.Fatalf("cpu %q", cpu)
	}
	return bits
}

func prefixAll(p string, s []string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if v != "" {
			out = append(out, p+v)
		}
	}
	return out
}
