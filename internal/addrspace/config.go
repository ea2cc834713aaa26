package addrspace

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/pveprop"
)

// vmConfig is what the plan reads of a qemu-server VM config: the keys of its main
// section (before the first [pending] or [snapshot] header), as text. This package
// cannot use internal/pve's parser (pve calls this package), and needs no more than
// key: value lines.
type vmConfig map[string]string

// parseConfig reads the main section of a VM config. Comment lines and the raw lxc.*
// keys of containers do not occur in what the plan reads; a line that is not key: value
// is skipped, as qemu-server's parser warns and skips it.
func parseConfig(text string) vmConfig {
	c := vmConfig{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.HasPrefix(line, "[") {
			break // [PENDING], [special:cloudinit], snapshots: not what starts
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			continue
		}
		c[k] = strings.TrimSpace(v)
	}
	return c
}

// cpuConfig is the VM's cpu option (qemu-server CPUConfig.pm, $cpu_fmt): the model,
// its flags, and the address widths set for it.
type cpuConfig struct {
	Type          string          // cputype; cpuOption's default when the VM has no cpu option
	Flags         map[string]bool // flags=+a;-b: true for +, false for -
	PhysBits      string          // "", "host" or a number
	GuestPhysBits int             // 0: not set
}

func parseCPU(value string) cpuConfig {
	p := pveprop.Parse(value, "cputype")
	c := cpuConfig{Type: p["cputype"], Flags: map[string]bool{}, PhysBits: p["phys-bits"]}
	if c.Type == "" {
		c.Type = "kvm64"
	}
	for _, f := range strings.Split(p["flags"], ";") {
		if len(f) > 1 && (f[0] == '+' || f[0] == '-') {
			c.Flags[f[1:]] = f[0] == '+'
		}
	}
	c.GuestPhysBits, _ = strconv.Atoi(p["guest-phys-bits"])
	return c
}

// cpuOption is the VM's cpu option, or for a VM without one the model qemu-server
// starts it with (CPUConfig.pm, get_default_cpu_type): kvm64, or qemu64 for a VM with
// kvm: 0, so that a plan for such a VM names the model it already runs.
func cpuOption(c vmConfig) string {
	switch {
	case c["cpu"] != "":
		return c["cpu"]
	case c["kvm"] == "0":
		return "qemu64"
	}
	return "kvm64"
}

// withCPU returns the cpu option value with phys-bits set and, when flag is not "",
// +flag added to its flags (a -flag of the same name replaced): the other parts as
// they were. A VM without a cpu option gets qemu-server's default model, kvm64, named.
func withCPU(value string, physBits int, flag string) string {
	if value == "" {
		value = "kvm64"
	}
	if flag != "" {
		p := pveprop.Parse(value, "cputype")
		var flags []string
		for _, f := range strings.Split(p["flags"], ";") {
			if f != "" && strings.TrimLeft(f, "+-") != flag {
				flags = append(flags, f)
			}
		}
		flags = append(flags, "+"+flag)
		value = pveprop.Set(value, "flags", strings.Join(flags, ";"))
	}
	if physBits > 0 {
		value = pveprop.Set(value, "phys-bits", strconv.Itoa(physBits))
	}
	return value
}

// memoryMB is the VM's memory in MiB: "memory: N" or "memory: current=N"
// (Memory.pm, $memory_fmt); 512 when unset, qemu-server's default.
func memoryMB(c vmConfig) (uint64, error) {
	v, ok := c["memory"]
	if !ok {
		return 512, nil
	}
	n, err := strconv.ParseUint(pveprop.Parse(v, "current")["current"], 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("memory: %q is not a size in MiB", v)
	}
	return n, nil
}

// hotplugMemory says whether the VM's hotplug option holds memory: qemu-server then
// starts it with -m size=1024,slots=255,maxmem=… (Memory.pm, config).
func hotplugMemory(c vmConfig) bool {
	return slices.Contains(strings.Split(c["hotplug"], ","), "memory")
}

// fwCfgKey is the fw_cfg file through which OVMF takes the size of its 64-bit PCI
// window in MiB (edk2 OvmfPkg/Library/PlatformInitLib/MemDetect.c,
// PlatformGetFirstNonAddress).
const fwCfgKey = "opt/ovmf/X-PciMmio64Mb"

// argsWindow finds "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=N" in an args line: the
// size in MiB, and whether there is one.
func argsWindow(args string) (uint64, bool) {
	v, ok := argsValue(args, "-fw_cfg", isWindow)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(pveprop.Parse(v, "")["string"], 10, 64)
	return n, err == nil
}

func isWindow(v string) bool { return pveprop.Parse(v, "")["name"] == fwCfgKey }

// withArgsWindow returns the args line with the OVMF window set to mb MiB: an existing
// -fw_cfg for it changed in place, or one added at the end; everything else in the line
// (other options, gpusplit's own -device entries, their spacing) as it was.
func withArgsWindow(args string, mb uint64) string {
	opt := "name=" + fwCfgKey + ",string=" + strconv.FormatUint(mb, 10)
	return withArgsOption(args, "-fw_cfg", isWindow, opt)
}

// hole64Property is QEMU's property for the size of the 64-bit PCI hole its ACPI
// tables describe, per host bridge type (hw/pci-host/q35.c, hw/pci-host/i440fx.c,
// PCI_HOST_PROP_PCI_HOLE64_SIZE).
func hole64Property(q35 bool) string {
	if q35 {
		return "q35-pcihost.pci-hole64-size"
	}
	return "i440FX-pcihost.pci-hole64-size"
}

// argsHole64 finds "-global <host>.pci-hole64-size=S" in an args line.
func argsHole64(args string, q35 bool) (uint64, bool) {
	prop := hole64Property(q35) + "="
	v, ok := argsValue(args, "-global", func(v string) bool { return strings.HasPrefix(v, prop) })
	if !ok {
		return 0, false
	}
	n, err := parseQEMUSize(strings.TrimPrefix(v, prop))
	return n, err == nil
}

func withArgsHole64(args string, q35 bool, size uint64) string {
	prop := hole64Property(q35)
	opt := fmt.Sprintf("%s=%dG", prop, size>>30)
	return withArgsOption(args, "-global", func(v string) bool { return strings.HasPrefix(v, prop+"=") }, opt)
}

// argsValue is the value of the first "flag value" pair of an args line whose value
// matches.
func argsValue(args, flag string, match func(string) bool) (string, bool) {
	f := strings.Fields(args)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == flag && match(f[i+1]) {
			return f[i+1], true
		}
	}
	return "", false
}

// withArgsOption sets the value of the first "flag value" pair whose value matches,
// in place, or appends "flag value".
func withArgsOption(args, flag string, match func(string) bool, value string) string {
	// Walk the fields by their offsets so that the rest of the line stays byte for byte.
	var starts, ends []int
	in := false
	for i, r := range args {
		switch {
		case !in && r != ' ' && r != '\t':
			starts, in = append(starts, i), true
		case in && (r == ' ' || r == '\t'):
			ends, in = append(ends, i), false
		}
	}
	if in {
		ends = append(ends, len(args))
	}
	for i := 0; i+1 < len(starts); i++ {
		if args[starts[i]:ends[i]] == flag && match(args[starts[i+1]:ends[i+1]]) {
			return args[:starts[i+1]] + value + args[ends[i+1]:]
		}
	}
	if strings.TrimSpace(args) == "" {
		return flag + " " + value
	}
	return strings.TrimRight(args, " \t") + " " + flag + " " + value
}

// parseQEMUSize reads a QEMU size: bytes, or a number with a K, M, G or T suffix.
func parseQEMUSize(s string) (uint64, error) {
	shift := 0
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
	}
	if shift > 0 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > (1<<63)>>shift {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n << shift, nil
}
