// Package persist makes a split survive reboots: a udev rule that pins each device's
// driver_override by PCI address (guarded by its vendor and device ids, so a card moved
// to another slot is not captured), a modprobe.d hook that pins them before the GPU driver
// binds, and a systemd unit that applies the desired state early in boot, before Proxmox
// starts guests, and fails loudly on drift.
package persist

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// Where the boot-time files go.
const (
	UdevRule  = "/etc/udev/rules.d/70-gpusplit.rules"
	Modprobe  = "/etc/modprobe.d/gpusplit.conf"
	PinScript = "/usr/lib/gpusplit/pin-overrides"
	Unit      = "/etc/systemd/system/gpusplit.service"
)

// Pin is one device held to a driver at boot.
type Pin struct {
	Device   pci.Address
	Vendor   uint16
	DeviceID uint16
	Driver   string // the driver_override to write: a driver name or "none"
	Role     plan.Role
	GPU      pci.Address
}

// File is one boot-time file with its contents.
type File struct {
	Path    string
	Mode    uint32
	Content string
}

// Pins are the devices a plan's end state holds to a driver. Devices that return to the
// kernel's own choice need no pin; GPUs returning to their vendor's driver are pinned to
// it, so that a vfio-pci override left from before cannot keep them.
func Pins(p *plan.Plan, ids map[pci.Address][2]uint16) []Pin {
	var out []Pin
	for _, m := range append(slices.Clone(p.Moves), p.InPlace...) {
		if m.To == plan.Default {
			continue
		}
		id := ids[m.Device]
		out = append(out, Pin{Device: m.Device, Vendor: id[0], DeviceID: id[1], Driver: m.To, Role: m.Role, GPU: m.GPU})
	}
	slices.SortFunc(out, func(a, b Pin) int { return a.Device.Compare(b.Device) })
	return out
}

// Options are what the files mention besides the pins.
type Options struct {
	Binary string // the gpusplit executable the unit runs (CheckBinary says whether it may)
	Config string // the desired state file
	// SyncProxmox says apply rewrites Proxmox's files in /etc/pve at boot too, which
	// pve-cluster.service mounts: the unit waits for it.
	SyncProxmox bool
	// GPUDrivers are the modules whose loading the modprobe.d hook precedes with the pins.
	GPUDrivers []string
}

// Files returns the boot-time files for the pins.
func Files(pins []Pin, o Options) ([]File, error) {
	if o.Binary == "" || o.Config == "" {
		return nil, fmt.Errorf("the boot unit needs the binary and the desired state file it runs with")
	}
	if err := unitSafe("binary", o.Binary); err != nil {
		return nil, err
	}
	if err := unitSafe("desired state", o.Config); err != nil {
		return nil, err
	}
	drivers := o.GPUDrivers
	if len(drivers) == 0 {
		drivers = []string{"nvidia", "amdgpu"}
	}
	data := struct {
		Pins []Pin
		Options
		Drivers   []string
		PinScript string
		Vfio      bool
	}{pins, o, drivers, PinScript, slices.ContainsFunc(pins, func(p Pin) bool { return p.Driver == plan.VFIO })}
	// The templates' functions, made here rather than in a package-level map, which the
	// package would build at every start of the program.
	funcs := template.FuncMap{
		"hex4":    func(v uint16) string { return fmt.Sprintf("0x%04x", v) },
		"join":    strings.Join,
		"modname": func(s string) string { return strings.ReplaceAll(s, "-", "_") },
	}
	var out []File
	for _, f := range []struct {
		path string
		mode uint32
		text string
	}{
		{UdevRule, 0o644, udevText},
		{Modprobe, 0o644, modprobeText},
		{PinScript, 0o755, scriptText},
		{Unit, 0o644, unitText},
	} {
		tmpl, err := template.New(f.path).Funcs(funcs).Parse(f.text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		var b bytes.Buffer
		if err := tmpl.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		out = append(out, File{Path: f.path, Mode: f.mode, Content: b.String()})
	}
	return out, nil
}

const header = `# Written by gpusplit persist install{{if .Config}} from {{.Config}}{{end}}.
# Do not edit: change the desired state and run gpusplit persist install again;
# gpusplit persist remove takes this away.
`

const udevText = header + `#
# Pin each device of the split to its driver by PCI address, when the kernel adds it.
# The vendor and device ids must match too: a card moved to another slot, or another
# card in this slot, is not captured.
{{range .Pins}}ACTION=="add", SUBSYSTEM=="pci", KERNEL=="{{.Device}}", ATTR{vendor}=="{{hex4 .Vendor}}", ATTR{device}=="{{hex4 .DeviceID}}", ATTR{driver_override}="{{.Driver}}"
{{end}}`

const modprobeText = header + `#
# The GPU drivers bind every matching device they find the moment they load, which can
# be before udev has handled the devices of the split. Loading them through the pin
# script sets every driver_override first.
{{range .Drivers}}install {{.}} {{$.PinScript}} && /sbin/modprobe --ignore-install {{.}} $CMDLINE_OPTS
{{end}}{{if .Vfio}}# vfio-pci must be there to take the devices pinned to it.
{{range .Drivers}}softdep {{.}} pre: vfio-pci
{{end}}# Idle passed-through GPUs are kept out of D3cold, from which some do not come back.
options vfio_pci disable_idle_d3=1
{{end}}`

const scriptText = `#!/bin/sh
` + header + `#
# Sets driver_override of each device of the split, if the device in that slot is the
# one the split was made for. Run by modprobe before the GPU drivers load.
pin() {
	dev=/sys/bus/pci/devices/$1
	[ -e "$dev/driver_override" ] || return 0
	[ "$(cat "$dev/vendor")" = "$2" ] && [ "$(cat "$dev/device")" = "$3" ] || {
		echo "gpusplit: $1 is not $2:$3 any more; not pinned to $4" >&2
		return 0
	}
	echo "$4" > "$dev/driver_override"
}
{{range .Pins}}pin {{.Device}} {{hex4 .Vendor}} {{hex4 .DeviceID}} {{.Driver}}
{{end}}exit 0
`

const unitText = header + `
[Unit]
Description=GPU driver split (gpusplit) as {{.Config}} says
DefaultDependencies=no
After=systemd-modules-load.service systemd-udev-trigger.service local-fs.target
Wants=systemd-modules-load.service
{{- if .SyncProxmox}}
# apply also rewrites Proxmox's files (sync_proxmox): /etc/pve is there once the
# cluster file system is mounted. Wants, not Requires: the GPUs move even without it.
Wants=pve-cluster.service
After=pve-cluster.service
{{- end}}
# Before the guests start and before anything holds the GPUs.
Before=pve-guests.service pve-ha-lrm.service lxc.service nvidia-persistenced.service nvidia-fabricmanager.service multi-user.target
ConditionPathExists={{.Config}}

[Service]
Type=oneshot
RemainAfterExit=yes
# --persist=false: these files are in place, since they started it.
ExecStart={{.Binary}} apply --config {{.Config}} --persist=false --yes
# Fails the unit, loudly, when the host is not in the desired state after all.
ExecStartPost={{.Binary}} status --config {{.Config}} --persist=false

[Install]
WantedBy=multi-user.target pve-guests.service
`
