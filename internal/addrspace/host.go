package addrspace

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// ReadHostCPU reads the host's CPU from /proc/cpuinfo: the first processor's "address
// sizes", vendor_id and flags (every processor of a host has the same). QEMU takes the
// host's width from CPUID 0x80000008 (target/i386/host-cpu.c, host_cpu_phys_bits), the
// value that line prints.
func ReadHostCPU(h *host.Host) (HostCPU, error) {
	text, err := h.ReadString("/proc/cpuinfo")
	if err != nil {
		return HostCPU{}, err
	}
	var c HostCPU
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			if strings.TrimSpace(line) == "" && c.PhysBits > 0 {
				break // the end of the first processor's block
			}
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "vendor_id":
			c.Vendor = v
		case "flags":
			for _, f := range strings.Fields(v) {
				if f == "pdpe1gb" {
					c.PDPE1GB = true
				}
			}
		case "address sizes":
			// "52 bits physical, 57 bits virtual"
			n, _, _ := strings.Cut(v, " ")
			c.PhysBits, _ = strconv.Atoi(n)
		}
	}
	if c.PhysBits == 0 {
		return c, fmt.Errorf("/proc/cpuinfo has no \"address sizes\" line: the host's physical address width is unknown")
	}
	if c.PhysBits < 32 || c.PhysBits > 64 {
		return c, fmt.Errorf("/proc/cpuinfo says the CPU addresses %d bits, which no x86-64 CPU does", c.PhysBits)
	}
	return c, nil
}

// DeviceOf describes what a hostpci entry passes: the functions given, with their
// memory BARs as sysfs "resource" has them, each 64-bit BAR at the largest size the
// Resizable BAR capability offers when that is larger (the host's firmware or driver
// can grow it before the VM starts, and QEMU passes the size the BAR has then). The
// capability needs the whole config space, which only root reads; without it the
// sizes are those of now.
func DeviceOf(h *host.Host, entry string, functions ...*pci.Device) Device {
	d := Device{Entry: entry}
	for _, fn := range functions {
		largest := map[int]uint64{}
		if raw, err := h.ReadFile(fn.Path + "/config"); err == nil {
			for _, r := range pci.Config(raw).ResizableBARs() {
				largest[r.Index] = r.Largest
			}
		}
		f := Function{Address: fn.Address.String()}
		for _, b := range fn.BARs {
			if b.IO || b.Size == 0 {
				continue
			}
			bar := BAR{Index: b.Index, Size: b.Size, Is64Bit: b.Is64Bit, Prefetchable: b.Prefetchable}
			if l := largest[b.Index]; l > bar.Size && b.Is64Bit {
				bar.Size = l
			}
			f.BARs = append(f.BARs, bar)
		}
		d.Functions = append(d.Functions, f)
	}
	return d
}
