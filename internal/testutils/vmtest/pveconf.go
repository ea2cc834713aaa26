package vmtest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// PVEVM is a Proxmox VE VM to boot: its config as /etc/pve/qemu-server/ID.conf holds it,
// started as qemu-server starts it (below), with a QEMU device standing in for each
// hostpciN, since there is no host device to pass through here.
//
// The translation follows qemu-server (github.com/proxmox/qemu-server, src/PVE/…) for the
// options it knows, on a QEMU 7.2 machine without KVM:
//
//   - bios, efidisk0: QemuServer/OVMF.pm, get_ovmf_files and print_ovmf_drive_commandlines
//     (the -drive form, used before machine version 10.0): the code image read-only as
//     pflash unit 0, a fresh copy of the variables template as unit 1 (a new efidisk);
//     Debian's OVMF (OVMFDir) in place of pve-edk2-firmware, whose files have the same
//     names;
//   - cpu: QemuServer/CPUConfig.pm, get_cpu_options: the model (qemu64 without KVM; the
//     built-in x86-64-v2…v4 as qemu64 with their flags), its level, the flags sorted by
//     name (get_pve_cpu_flags's for kvm64 and kvm32 included), then guest-phys-bits and
//     phys-bits ("host": host-phys-bits=true);
//   - sockets, cores, vcpus: -smp as config_to_command writes it; memory: -m (no hotplug);
//   - machine: q35 only, with -readconfig pve-q35-4.0.cfg's devices (pveQ35Devices), the
//     S3/S4 globals of Machine.pm's get_power_state_flags for a machine before 9.2.1, and
//     -machine accel=tcg (kvm: 0), smm=off (should_disable_smm), type=;
//   - hostpciN with pcie=1: PCI.pm's get_pcie_addr_map (bus ich9-pcie-port-N+1, addr 0)
//     and print_pcie_root_port for the ports past the four of pve-q35-4.0.cfg; a slot's
//     functions as print_hostpci_devices puts them;
//   - vga: std (VGA at 00:01.0, get_pcie_addr_map) or none;
//   - args: split as PVE::Tools::split_args (shell words) and put last.
//
// Everything else that adds a device (disks, NICs, the agent, balloon, USB, NUMA nodes)
// is refused rather than left out silently; keys that add nothing the firmware sees
// (name, ostype, smbios1, …) are ignored. The harness adds its own console (-serial
// stdio, -display none, -monitor none, -no-reboot) and boots its kernel directly.
type PVEVM struct {
	Name   string
	Config string
	// StandIns gives each hostpciN entry the QEMU device that plays it: a model and its
	// properties ("pci-testdev,membar=128G"), placed where qemu-server puts vfio-pci; or
	// several, separated by ";", that play the functions of a slot passed whole.
	StandIns map[string]string
}

// OVMFDir holds Debian's OVMF images (package ovmf), which stand in for
// /usr/share/pve-edk2-firmware.
var OVMFDir = "/usr/share/OVMF"

// RunPVE boots vm as qemu-server would start it and runs script in the guest, as Run does.
func (v *VM) RunPVE(ctx context.Context, vm PVEVM, script string) (*Result, error) {
	return v.runRetry(ctx, guest{
		name:    "VM " + vm.Name,
		args:    vm.qemuArgs,
		cmdline: Topology{}.cmdline(),
	}, script)
}

// pveIgnored are config keys that change nothing the guest's firmware or PCI layout shows.
var pveIgnored = map[string]bool{
	"name": true, "ostype": true, "meta": true, "smbios1": true, "vmgenid": true,
	"boot": true, "description": true, "onboot": true, "tags": true,
}

// parsePVEConfig reads the current section of a VM config: "key: value" lines, comments
// (the description) skipped, up to the first snapshot or pending section.
func parsePVEConfig(text string) (map[string]string, error) {
	conf := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("config line %q is not key: value", line)
		}
		if _, dup := conf[k]; dup {
			return nil, fmt.Errorf("config key %s is given twice", k)
		}
		conf[k] = strings.TrimSpace(v)
	}
	return conf, nil
}

// propertyString splits a Proxmox property string ("host,phys-bits=46,flags=+a;-b"); an
// element without '=' is the value of defaultKey.
func propertyString(s, defaultKey string) (map[string]string, error) {
	props := map[string]string{}
	for _, el := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(el, "=")
		if !ok {
			k, v = defaultKey, el
		}
		if _, dup := props[k]; dup || k == "" {
			return nil, fmt.Errorf("property %q in %q", k, s)
		}
		props[k] = v
	}
	return props, nil
}

// ovmfFiles returns the code and variables images qemu-server picks (get_ovmf_files, for
// x86_64 without confidential computing): the 4 MiB images for efitype=4m, the
// secure-boot build with SMM (which q35 has), the Microsoft keys with pre-enrolled-keys.
func ovmfFiles(efidisk map[string]string) (code, vars string) {
	if efidisk["efitype"] != "4m" {
		return "OVMF_CODE.fd", "OVMF_VARS.fd"
	}
	code, vars = "OVMF_CODE_4M.secboot.fd", "OVMF_VARS_4M.fd"
	if efidisk["pre-enrolled-keys"] == "1" {
		vars = "OVMF_VARS_4M.ms.fd"
	}
	return code, vars
}

// pveQ35Devices are the devices of qemu-server's src/usr/pve-q35-4.0.cfg, which it passes
// with -readconfig for every q35 machine: the USB controllers, the sound card (the cfg
// keeps it for old guests), the four root ports at 1c.0–1c.3, and the DMI-to-PCI bridge
// with the four PCI bridges behind it.
var pveQ35Devices = []string{
	"ich9-usb-ehci1,id=ehci,multifunction=on,bus=pcie.0,addr=1d.7",
	"ich9-usb-uhci1,id=uhci-1,multifunction=on,bus=pcie.0,addr=1d.0,masterbus=ehci.0,firstport=0",
	"ich9-usb-uhci2,id=uhci-2,multifunction=on,bus=pcie.0,addr=1d.1,masterbus=ehci.0,firstport=2",
	"ich9-usb-uhci3,id=uhci-3,multifunction=on,bus=pcie.0,addr=1d.2,masterbus=ehci.0,firstport=4",
	"ich9-usb-ehci2,id=ehci-2,multifunction=on,bus=pcie.0,addr=1a.7",
	"ich9-usb-uhci4,id=uhci-4,multifunction=on,bus=pcie.0,addr=1a.0,masterbus=ehci-2.0,firstport=0",
	"ich9-usb-uhci5,id=uhci-5,multifunction=on,bus=pcie.0,addr=1a.1,masterbus=ehci-2.0,firstport=2",
	"ich9-usb-uhci6,id=uhci-6,multifunction=on,bus=pcie.0,addr=1a.2,masterbus=ehci-2.0,firstport=4",
	"ich9-intel-hda,id=audio0,bus=pcie.0,addr=1b.0",
	"pcie-root-port,id=ich9-pcie-port-1,x-speed=16,x-width=32,multifunction=on,bus=pcie.0,addr=1c.0,port=1,chassis=1",
	"pcie-root-port,id=ich9-pcie-port-2,x-speed=16,x-width=32,multifunction=on,bus=pcie.0,addr=1c.1,port=2,chassis=2",
	"pcie-root-port,id=ich9-pcie-port-3,x-speed=16,x-width=32,multifunction=on,bus=pcie.0,addr=1c.2,port=3,chassis=3",
	"pcie-root-port,id=ich9-pcie-port-4,x-speed=16,x-width=32,multifunction=on,bus=pcie.0,addr=1c.3,port=4,chassis=4",
	"i82801b11-bridge,id=pcidmi,bus=pcie.0,addr=1e.0",
	"pci-bridge,id=pci.0,bus=pcidmi,addr=1.0,chassis_nr=1",
	"pci-bridge,id=pci.1,bus=pcidmi,addr=2.0,chassis_nr=2",
	"pci-bridge,id=pci.2,bus=pcidmi,addr=3.0,chassis_nr=3",
	"pci-bridge,id=pci.3,bus=pcidmi,addr=4.0,chassis_nr=4",
}

// pcieRootPort is PCI.pm's print_pcie_root_port: the root port qemu-server adds for
// hostpci4 to hostpci15 (i), on pcie.0 at 10.0–11.3.
func pcieRootPort(i int) string {
	id := i + 1
	return fmt.Sprintf("pcie-root-port,id=ich9-pcie-port-%d,addr=%s,x-speed=16,x-width=32,multifunction=on,bus=pcie.0,port=%d,chassis=%d", id, rootPortSlot(i), id, id)
}

// rootPortSlot is where on pcie.0 the root port of hostpciN (i) with pcie=1 sits:
// 1c.0–1c.3 from pve-q35-4.0.cfg, then 10.0–11.3 (get_pcie_addr_map).
func rootPortSlot(i int) string {
	if i < 4 {
		return fmt.Sprintf("1c.%d", i)
	}
	return fmt.Sprintf("%x.%d", 0x10+(i-4)/8, (i-4)%8)
}

// pveBuiltinModels are qemu-server's own CPU models (CPUConfig.pm, $builtin_models):
// QEMU's qemu64 with these flags. x86-64-v2-AES is the default for new VMs.
var pveBuiltinModels = map[string]string{
	"x86-64-v2":     "+popcnt;+pni;+sse4.1;+sse4.2;+ssse3",
	"x86-64-v2-AES": "+aes;+popcnt;+pni;+sse4.1;+sse4.2;+ssse3",
	"x86-64-v3":     "+aes;+popcnt;+pni;+sse4.1;+sse4.2;+ssse3;+avx;+avx2;+bmi1;+bmi2;+f16c;+fma;+abm;+movbe;+xsave",
	"x86-64-v4":     "+aes;+popcnt;+pni;+sse4.1;+sse4.2;+ssse3;+avx;+avx2;+bmi1;+bmi2;+f16c;+fma;+abm;+movbe;+xsave;+avx512f;+avx512bw;+avx512cd;+avx512dq;+avx512vl",
}

// cpuOption is get_cpu_options's -cpu value for the config's cpu entry, without KVM.
func cpuOption(value string) (string, error) {
	cpu := map[string]string{"cputype": "qemu64"}
	if value != "" {
		var err error
		if cpu, err = propertyString(value, "cputype"); err != nil {
			return "", err
		}
	}
	for k := range cpu {
		switch k {
		case "cputype", "flags", "level", "phys-bits", "guest-phys-bits":
		default:
			return "", fmt.Errorf("cpu option %s is not modelled", k)
		}
	}
	model := cpu["cputype"]
	if model == "host" || strings.HasPrefix(model, "custom-") {
		return "", fmt.Errorf("cpu %s needs KVM or a custom model file; the harness runs TCG (use qemu64 or another QEMU model)", model)
	}
	var builtin string
	if b, ok := pveBuiltinModels[model]; ok {
		model, builtin = "qemu64", b
	}
	out := model
	if l := cpu["level"]; l != "" {
		out += ",level=" + l
	}
	// get_pve_cpu_flags's flags for the kvm64 and kvm32 models, a built-in model's, then
	// the VM's own, each winning over those before; printed sorted by name.
	flags := map[string]string{}
	if model == "kvm64" {
		flags["lahf_lm"] = "+"
	}
	if model == "kvm64" || model == "kvm32" {
		flags["sep"] = "+"
	}
	for _, list := range []string{builtin, cpu["flags"]} {
		if list == "" {
			continue
		}
		for _, fl := range strings.Split(list, ";") {
			if len(fl) < 2 || (fl[0] != '+' && fl[0] != '-') {
				return "", fmt.Errorf("cpu flag %q is not +FLAG or -FLAG", fl)
			}
			flags[fl[1:]] = fl[:1]
		}
	}
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		out += "," + flags[name] + name
	}
	if g := cpu["guest-phys-bits"]; g != "" {
		out += ",guest-phys-bits=" + g
	}
	switch p := cpu["phys-bits"]; p {
	case "":
	case "host":
		out += ",host-phys-bits=true"
	default:
		if n, err := strconv.Atoi(p); err != nil || n < 8 || n > 64 {
			return "", fmt.Errorf("phys-bits %q is not 8 to 64 or host", p)
		}
		out += ",phys-bits=" + p
	}
	return out, nil
}

// splitArgs splits an args line into words as the shell does (Text::ParseWords's
// shellwords, which PVE::Tools::split_args calls): quotes group, a backslash escapes.
func splitArgs(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\\' && i+1 < len(s) && (quote == 0 || s[i+1] == '"' || s[i+1] == '\\'):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote = c
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("args: unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// qemuArgs translates the config into QEMU's options; dir receives the boot's copy of
// the OVMF variables.
func (vm PVEVM) qemuArgs(dir string) ([]string, error) {
	conf, err := parsePVEConfig(vm.Config)
	if err != nil {
		return nil, err
	}
	var hostpci []int
	for k := range conf {
		switch k {
		case "bios", "efidisk0", "cpu", "machine", "memory", "sockets", "cores", "vcpus", "vga", "args", "kvm":
			continue
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(k, "hostpci")); err == nil && strings.HasPrefix(k, "hostpci") && n >= 0 && n <= 15 {
			hostpci = append(hostpci, n)
			continue
		}
		if !pveIgnored[k] {
			return nil, fmt.Errorf("config key %s is not modelled by the harness", k)
		}
	}
	slices.Sort(hostpci)
	if conf["kvm"] != "0" {
		return nil, fmt.Errorf("the harness runs QEMU without KVM: the config needs kvm: 0")
	}
	machine, _, _ := strings.Cut(conf["machine"], ",")
	machine = strings.Split(machine, "+pve")[0]
	if machine != "q35" && !strings.HasPrefix(machine, "pc-q35-") {
		return nil, fmt.Errorf("machine %q: only q35 is modelled", conf["machine"])
	}
	if strings.Contains(conf["machine"], ",") {
		return nil, fmt.Errorf("machine options in %q are not modelled", conf["machine"])
	}

	args := []string{"-nodefaults", "-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot"}

	switch bios := conf["bios"]; bios {
	case "", "seabios":
		if conf["efidisk0"] != "" {
			return nil, fmt.Errorf("efidisk0 without bios: ovmf")
		}
	case "ovmf":
		efidisk := map[string]string{}
		if s := conf["efidisk0"]; s != "" {
			if efidisk, err = propertyString(s, "file"); err != nil {
				return nil, err
			}
		}
		code, vars := ovmfFiles(efidisk)
		code, vars = filepath.Join(OVMFDir, code), filepath.Join(OVMFDir, vars)
		template, err := os.ReadFile(vars)
		if err != nil {
			return nil, fmt.Errorf("OVMF variables template: %v: %s (package ovmf)", err, Setup)
		}
		if _, err := os.Stat(code); err != nil {
			return nil, fmt.Errorf("OVMF code image: %v: %s (package ovmf)", err, Setup)
		}
		efivars := filepath.Join(dir, "efidisk0.raw")
		if err := os.WriteFile(efivars, template, 0o644); err != nil {
			return nil, err
		}
		args = append(args,
			"-drive", "if=pflash,unit=0,format=raw,readonly=on,file="+code,
			"-drive", fmt.Sprintf("if=pflash,unit=1,id=drive-efidisk0,format=raw,file=%s,size=%d", efivars, len(template)))
	default:
		return nil, fmt.Errorf("bios %q is neither seabios nor ovmf", bios)
	}

	count := func(key string) (int, error) {
		if conf[key] == "" {
			return 1, nil
		}
		n, err := strconv.Atoi(conf[key])
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%s %q is not a positive number", key, conf[key])
		}
		return n, nil
	}
	sockets, err := count("sockets")
	if err != nil {
		return nil, err
	}
	cores, err := count("cores")
	if err != nil {
		return nil, err
	}
	vcpus := sockets * cores
	if conf["vcpus"] != "" {
		if vcpus, err = count("vcpus"); err != nil {
			return nil, err
		}
	}
	args = append(args, "-smp", fmt.Sprintf("%d,sockets=%d,cores=%d,maxcpus=%d", vcpus, sockets, cores, sockets*cores))

	cpu, err := cpuOption(conf["cpu"])
	if err != nil {
		return nil, err
	}
	args = append(args, "-cpu", cpu)

	memory := "512" // qemu-server's default
	if m := conf["memory"]; m != "" {
		if n, err := strconv.Atoi(m); err != nil || n < 16 {
			return nil, fmt.Errorf("memory %q is not a size in MiB", m)
		}
		memory = m
	}
	args = append(args, "-m", memory)
	args = append(args, "-global", "ICH9-LPC.disable_s3=1", "-global", "ICH9-LPC.disable_s4=1")
	for _, d := range pveQ35Devices {
		args = append(args, "-device", d)
	}

	for _, n := range hostpci {
		key := fmt.Sprintf("hostpci%d", n)
		props, err := propertyString(conf[key], "host")
		if err != nil {
			return nil, err
		}
		if props["pcie"] != "1" {
			return nil, fmt.Errorf("%s: only pcie=1 (behind a root port) is modelled", key)
		}
		standIn := vm.StandIns[key]
		if standIn == "" {
			return nil, fmt.Errorf("%s has no stand-in device", key)
		}
		if n >= 4 {
			args = append(args, "-device", pcieRootPort(n))
		}
		// Several functions, as a whole slot passed: PCI.pm's print_hostpci_devices
		// gives each the id hostpciN.F and the address 0x0.F, the first multifunction=on.
		fns := strings.Split(standIn, ";")
		for f, fn := range fns {
			model, extra, _ := strings.Cut(fn, ",")
			id, addr := key, "0x0"
			if len(fns) > 1 {
				id, addr = fmt.Sprintf("%s.%d", key, f), fmt.Sprintf("0x0.%d", f)
			}
			dev := fmt.Sprintf("%s,id=%s,bus=ich9-pcie-port-%d,addr=%s", model, id, n+1, addr)
			if f == 0 && len(fns) > 1 {
				dev += ",multifunction=on"
			}
			if extra != "" {
				dev += "," + extra
			}
			args = append(args, "-device", dev)
		}
	}
	for key := range vm.StandIns {
		if conf[key] == "" {
			return nil, fmt.Errorf("stand-in for %s, which the config does not have", key)
		}
	}

	vga := conf["vga"]
	switch vga {
	case "", "std":
		args = append(args, "-device", "VGA,id=vga,bus=pcie.0,addr=0x1")
	case "none":
	default:
		return nil, fmt.Errorf("vga %q is not modelled (std or none)", vga)
	}

	flags := []string{"accel=tcg"}
	if (conf["bios"] == "" || conf["bios"] == "seabios") && vga == "none" {
		flags = append(flags, "smm=off")
	}
	flags = append(flags, "type="+machine)
	args = append(args, "-machine", strings.Join(flags, ","))

	extra, err := splitArgs(conf["args"])
	if err != nil {
		return nil, err
	}
	return append(args, extra...), nil
}
