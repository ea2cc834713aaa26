package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Topology is a guest machine: its chipset, IOMMU, NUMA nodes and PCI devices.
type Topology struct {
	Name        string
	MachineType string // "q35" (the default) or "pc" (i440fx): QEMU's -machine
	// IOMMU adds an emulated Intel IOMMU: the kernel makes real IOMMU groups and
	// devices can be bound to vfio-pci.
	IOMMU bool
	// NUMA is the number of guest NUMA nodes, each with one CPU and 256 MiB; 0 for none.
	NUMA    int
	Devices []Device
}

// Device is one QEMU -device: a bridge or an endpoint.
type Device struct {
	ID    string // its id=, named by children's Bus and by the tests
	Model string // "pxb-pcie", "pcie-root-port", "x3130-upstream", "xio3130-downstream", "e1000e", …
	// Bus is what it plugs into: "pcie.0" (q35), "pci.0" (i440fx), or another Device's ID.
	Bus string
	// Addr is slot[.function] on that bus, as QEMU's addr= ("0x10.0"); empty: the next free.
	Addr  string
	Props []string // other properties: "numa_node=1", "bus_nr=0x40", "mac=…", "multifunction=on"
	// Disk gives the device (an nvme, a virtio-blk-pci) a blank raw disk of this many
	// bytes, made for each boot and gone after it; 0 for none.
	Disk int64
}

func (d Device) has(prop string) bool {
	for _, p := range d.Props {
		if strings.HasPrefix(p, prop+"=") {
			return true
		}
	}
	return false
}

// args returns QEMU's command line for the topology, without kernel and initramfs.
func (t Topology) args() []string {
	machine := t.MachineType
	if machine == "" {
		machine = "q35"
	}
	if t.IOMMU {
		// Interrupt remapping needs the split irqchip; without it the kernel finds the
		// timer broken behind the remapped IO-APIC and panics.
		machine += ",kernel-irqchip=split"
	}
	cpus := max(t.NUMA, 1)
	args := []string{
		"-accel", "tcg", "-machine", machine, "-smp", strconv.Itoa(cpus),
		"-nodefaults", "-display", "none", "-vga", "none", "-no-reboot",
		"-serial", "stdio", "-monitor", "none",
	}
	if t.NUMA > 0 {
		for n := range t.NUMA {
			args = append(args,
				"-object", fmt.Sprintf("memory-backend-ram,id=mem%d,size=256M", n),
				"-numa", fmt.Sprintf("node,nodeid=%d,cpus=%d,memdev=mem%d", n, n, n))
		}
		args = append(args, "-m", strconv.Itoa(256*t.NUMA)+"M")
	} else {
		args = append(args, "-m", "512M")
	}
	if t.IOMMU {
		// The IOMMU must come before the devices it translates for.
		args = append(args, "-device", "intel-iommu,intremap=on")
	}
	chassis := 0
	for _, d := range t.Devices {
		props := []string{d.Model, "id=" + d.ID}
		if d.Bus != "" { // none: QEMU places the device itself, at the first free slot
			props = append(props, "bus="+d.Bus)
		}
		if d.Addr != "" {
			props = append(props, "addr="+d.Addr)
		}
		props = append(props, d.Props...)
		if d.Disk > 0 {
			props = append(props, "drive="+diskID(d))
		}
		switch d.Model {
		case "pcie-root-port", "xio3130-downstream":
			// Every slot of a PCIe port needs a distinct chassis/slot pair.
			chassis++
			if !d.has("chassis") {
				props = append(props, fmt.Sprintf("chassis=%d", chassis))
			}
			if !d.has("slot") {
				props = append(props, "slot=0")
			}
		case "e1000e", "e1000", "virtio-net-pci":
			// No option ROM: iPXE's start-up would only slow the boot.
			if !d.has("romfile") {
				props = append(props, "romfile=")
			}
		case "nvme":
			if !d.has("serial") {
				props = append(props, "serial="+d.ID)
			}
		}
		args = append(args, "-device", strings.Join(props, ","))
	}
	return args
}

func diskID(d Device) string { return d.ID + "-disk" }

// disks makes the blank disk images of the topology's devices in dir and returns their
// -drive options.
func (t Topology) disks(dir string) ([]string, error) {
	var args []string
	for _, d := range t.Devices {
		if d.Disk <= 0 {
			continue
		}
		img := filepath.Join(dir, d.ID+".img")
		f, err := os.Create(img)
		if err != nil {
			return nil, err
		}
		err = f.Truncate(d.Disk) // sparse: nothing is written until the guest writes
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("disk image of %s: %w", d.ID, err)
		}
		args = append(args, "-drive", fmt.Sprintf("if=none,id=%s,file=%s,format=raw", diskID(d), img))
	}
	return args, nil
}

// cmdline is the guest kernel's command line. no_timer_check: under TCG on a loaded host
// the emulated timer can miss the few ticks the kernel waits for at boot, and behind an
// interrupt-remapped IO-APIC the kernel then panics ("timer doesn't work through
// Interrupt-remapped IO-APIC") instead of carrying on with a timer that works.
func (t Topology) cmdline() string {
	cmdline := "console=ttyS0 quiet loglevel=1 panic=-1 no_timer_check rdinit=/init"
	if t.IOMMU {
		cmdline += " intel_iommu=on"
	}
	return cmdline
}

// VM boots topologies with one initramfs setup: busybox, gpusplit and kernel modules.
type VM struct {
	Kernel  *Kernel
	Busybox string   // a static busybox
	Binary  string   // the static gpusplit binary, installed as /bin/gpusplit
	Modules []string // modules to load at boot, with their dependencies
	// Deferred modules are in the initramfs but left for the script to load, in order,
	// with load_deferred: as a boot where udev and modprobe come later.
	Deferred []string
	Timeout  time.Duration
}

// Result is what a guest's script brought back.
type Result struct {
	Console string
	Files   map[string][]byte // emitted outputs by name
	Status  map[string]int    // the exit status of the command behind each output
	// Retried is the kernel's panic line of a first boot that failed in start-up and made
	// Run boot the guest a second time; empty when the first boot ran. Callers report it.
	Retried string
}

// startupPanics are the guest kernel panics that come from QEMU's emulation on a busy
// host, before any code under test runs: a boot that ends in one is tried once more.
var startupPanics = []string{
	"timer doesn't work through Interrupt-remapped IO-APIC",
	"IO-APIC + timer doesn't work!",
}

// startupPanic returns the kernel's panic line when the console ends in one of the
// startupPanics before the guest's script started.
func startupPanic(console string) string {
	if strings.Contains(console, "@@READY") {
		return ""
	}
	for _, line := range strings.Split(console, "\n") {
		if !strings.Contains(line, "Kernel panic") {
			continue
		}
		for _, p := range startupPanics {
			if strings.Contains(line, p) {
				return strings.TrimSpace(line)
			}
		}
	}
	return ""
}

// NewVM finds the kernel, busybox and QEMU, and fails with the way to get them.
func NewVM(binary string, modules ...string) (*VM, error) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return nil, fmt.Errorf("qemu-system-x86_64 is not installed: %s", Setup)
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return nil, fmt.Errorf("busybox is not installed: %s", Setup)
	}
	if dynamic(busybox) {
		return nil, fmt.Errorf("%s is dynamically linked, the initramfs needs busybox-static: %s", busybox, Setup)
	}
	k, err := FindKernel()
	if err != nil {
		return nil, err
	}
	return &VM{Kernel: k, Busybox: busybox, Binary: binary, Modules: modules, Timeout: 3 * time.Minute}, nil
}

// initScript runs at boot: it mounts the pseudo file systems, loads the modules, runs the
// test script and powers off. emit NAME CMD… runs a command and sends its output back
// base64-encoded between markers, with its exit status.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /run /var/lib
for m in $(cat /etc/modules); do
	insmod "/lib/modules/$m" || echo "@@INSMOD-FAILED $m"
done
load_deferred() {
	for m in $(cat /etc/modules.deferred); do
		insmod "/lib/modules/$m" || echo "@@INSMOD-FAILED $m"
	done
}
emit() {
	name=$1; shift
	"$@" >/tmp/emit.out 2>/tmp/emit.err
	rc=$?
	echo "@@BEGIN $name"
	base64 /tmp/emit.out
	echo "@@END $name $rc"
	if [ -s /tmp/emit.err ]; then echo "@@STDERR $name"; cat /tmp/emit.err; fi
}
echo "@@READY"
. /test.sh
echo "@@DONE"
poweroff -f
`

// guest is what one boot starts: a name for errors, QEMU's command line without the
// kernel and initramfs, and the kernel's command line.
type guest struct {
	name string
	// args returns QEMU's options; dir is the boot's own temporary directory, for the
	// files (disks, firmware variables) that last only as long as the boot.
	args    func(dir string) ([]string, error)
	cmdline string
}

func (t Topology) guest() guest {
	return guest{
		name: "topology " + t.Name,
		args: func(dir string) ([]string, error) {
			disks, err := t.disks(dir)
			if err != nil {
				return nil, err
			}
			return append(disks, t.args()...), nil
		},
		cmdline: t.cmdline(),
	}
}

// Run boots topo and runs script in the guest (busybox sh, with emit defined). A boot
// that dies in one of the startupPanics is retried once, and Result.Retried says so.
func (v *VM) Run(ctx context.Context, topo Topology, script string) (*Result, error) {
	return v.runRetry(ctx, topo.guest(), script)
}

func (v *VM) runRetry(ctx context.Context, g guest, script string) (*Result, error) {
	res, err := v.run(ctx, g, script)
	if err == nil || res == nil {
		return res, err
	}
	reason := startupPanic(res.Console)
	if reason == "" {
		return res, err
	}
	res, err = v.run(ctx, g, script)
	if res != nil {
		res.Retried = reason
	}
	if err != nil {
		err = fmt.Errorf("%w\n(the first boot had already failed before the test ran: %s)", err, reason)
	}
	return res, err
}

func (v *VM) run(ctx context.Context, g guest, script string) (*Result, error) {
	initrd, err := v.initramfs(script)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gpusplit-vm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	initrdPath := filepath.Join(dir, "initrd")
	if err := os.WriteFile(initrdPath, initrd, 0o644); err != nil {
		return nil, err
	}
	args, err := g.args(dir)
	if err != nil {
		return nil, err
	}
	args = append(args, "-kernel", v.Kernel.Image, "-initrd", initrdPath, "-append", g.cmdline)
	ctx, cancel := context.WithTimeout(ctx, v.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	var console bytes.Buffer
	cmd.Stdout = &console
	cmd.Stderr = &console
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	res, perr := parseConsole(console.String())
	if ctx.Err() != nil {
		return res, fmt.Errorf("%s: the guest did not finish within %s\n%s", g.name, v.Timeout, tail(console.String(), 40))
	}
	if runErr != nil {
		return res, fmt.Errorf("%s: qemu-system-x86_64 %s: %v\n%s", g.name, strings.Join(args, " "), runErr, tail(console.String(), 40))
	}
	if perr != nil {
		return res, fmt.Errorf("%s: %v\n%s", g.name, perr, tail(console.String(), 40))
	}
	return res, nil
}

func (v *VM) initramfs(script string) ([]byte, error) {
	r := newInitramfs()
	for _, d := range []string{"proc", "sys", "dev", "tmp", "etc", "root"} {
		r.dir(d)
	}
	bb, err := os.ReadFile(v.Busybox)
	if err != nil {
		return nil, err
	}
	r.file("bin/busybox", 0o755, bb)
	r.symlink("bin/sh", "busybox")
	bin, err := os.ReadFile(v.Binary)
	if err != nil {
		return nil, err
	}
	r.file("bin/gpusplit", 0o755, bin)
	r.file("init", 0o755, []byte(initScript))
	r.file("test.sh", 0o644, []byte(script))
	loaded := map[string]bool{}
	for _, set := range []struct {
		list    string
		modules []string
	}{{"etc/modules", v.Modules}, {"etc/modules.deferred", v.Deferred}} {
		order, err := v.Kernel.loadOrder(set.modules)
		if err != nil {
			return nil, err
		}
		var list []string
		for _, m := range order {
			if loaded[m.name] {
				continue
			}
			loaded[m.name] = true
			data, err := os.ReadFile(m.path)
			if err != nil {
				return nil, err
			}
			name := filepath.Base(m.path)
			r.file("lib/modules/"+name, 0o644, data)
			list = append(list, name)
		}
		r.file(set.list, 0o644, []byte(strings.Join(list, "\n")+"\n"))
	}
	return r.bytes(), nil
}

// parseConsole collects the outputs the guest emitted between markers.
func parseConsole(console string) (*Result, error) {
	res := &Result{Console: console, Files: map[string][]byte{}, Status: map[string]int{}}
	var name string
	var body strings.Builder
	var failed []string
	done := false
	sc := bufio.NewScanner(strings.NewReader(console))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "@@BEGIN "):
			name = strings.TrimPrefix(line, "@@BEGIN ")
			body.Reset()
		case strings.HasPrefix(line, "@@END ") && name != "":
			f := strings.Fields(strings.TrimPrefix(line, "@@END "))
			if len(f) != 2 || f[0] != name {
				return res, fmt.Errorf("garbled end marker %q for output %s", line, name)
			}
			data, err := base64.StdEncoding.DecodeString(body.String())
			if err != nil {
				return res, fmt.Errorf("output %s: %v", name, err)
			}
			res.Files[name] = data
			res.Status[name], _ = strconv.Atoi(f[1])
			name = ""
		case strings.HasPrefix(line, "@@INSMOD-FAILED "):
			failed = append(failed, strings.TrimPrefix(line, "@@INSMOD-FAILED "))
		case line == "@@DONE":
			done = true
		case name != "" && !strings.HasPrefix(line, "["):
			// Kernel messages ("[    1.234] …") can interleave; base64 lines cannot start so.
			body.WriteString(line)
		}
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("modules failed to load in the guest: %s", strings.Join(failed, ", "))
	}
	if !done {
		return res, errors.New("the guest's script did not run to its end")
	}
	return res, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "--- last lines of the guest console ---\n" + strings.Join(lines, "\n")
}

// dynamic reports whether an executable asks for a program interpreter (ld.so).
func dynamic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}
