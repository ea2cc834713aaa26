package pci

import "encoding/binary"

// Config is a function's PCI configuration space as its sysfs "config" file gives it:
// 64 bytes unless the reader has CAP_SYS_ADMIN, 256 for conventional PCI, 4096 for PCIe.
// Offsets and bits are the PCI and PCIe specifications', as Linux's pci_regs.h names
// them.
type Config []byte

// Full reports whether the config space holds more than its first 64 bytes, which only
// root can read.
func (c Config) Full() bool { return len(c) > 64 }

// U16 and U32 read a little-endian register; 0 past the end.
func (c Config) U16(off int) uint16 {
	if off < 0 || off+2 > len(c) {
		return 0
	}
	return binary.LittleEndian.Uint16(c[off:])
}

func (c Config) U32(off int) uint32 {
	if off < 0 || off+4 > len(c) {
		return 0
	}
	return binary.LittleEndian.Uint32(c[off:])
}

// Capability returns the offset of the standard capability id (PCI_CAP_ID_EXP is 0x10),
// or 0: the list starts at 0x34 when the status register says there is one.
func (c Config) Capability(id byte) int {
	if c.U16(0x06)&0x10 == 0 {
		return 0
	}
	off := int(c[0x34]) &^ 3
	for range 48 { // a list cannot be longer; a loop in a broken one ends here
		if off < 0x40 || off+2 > len(c) {
			return 0
		}
		if c[off] == id {
			return off
		}
		off = int(c[off+1]) &^ 3
	}
	return 0
}

// ExtCapability returns the offset of the extended capability id (ACS 0x0d, Resizable
// BAR 0x15, SR-IOV 0x10), or 0: the list starts at 0x100, each header holding its id in
// bits 15:0 and the next offset in bits 31:20.
func (c Config) ExtCapability(id uint16) int {
	off := 0x100
	for range 960 {
		if off < 0x100 || off+4 > len(c) {
			return 0
		}
		hdr := c.U32(off)
		if hdr == 0 || hdr == 0xffffffff {
			return 0
		}
		if uint16(hdr) == id {
			return off
		}
		off = int(hdr>>20) &^ 3
	}
	return 0
}

// PCIe is what the PCI Express capability says of a function's settings.
type PCIe struct {
	MaxPayload, MaxPayloadSupported int // bytes: DevCtl bits 7:5, DevCap bits 2:0
	MaxReadRequest                  int // bytes: DevCtl bits 14:12
	RelaxedOrdering                 bool
	TenBitTagRequester              bool   // DevCtl2 bit 12
	TenBitTagCompleter              bool   // DevCap2 bit 16
	ASPM                            string // LnkCtl bits 1:0: "disabled", "L0s", "L1", "L0s L1"
}

// PCIeSettings reads the PCI Express capability; false when there is none (or it lies
// past what could be read).
func (c Config) PCIeSettings() (PCIe, bool) {
	off := c.Capability(0x10)
	if off == 0 || off+0x2c > len(c) {
		return PCIe{}, false
	}
	devcap, devctl := c.U32(off+0x04), c.U16(off+0x08)
	devcap2, devctl2 := c.U32(off+0x24), c.U16(off+0x28)
	aspm := [...]string{"disabled", "L0s", "L1", "L0s L1"}[c.U16(off+0x10)&3]
	return PCIe{
		MaxPayload:          128 << (devctl >> 5 & 7),
		MaxPayloadSupported: 128 << (devcap & 7),
		MaxReadRequest:      128 << (devctl >> 12 & 7),
		RelaxedOrdering:     devctl&0x10 != 0,
		TenBitTagRequester:  devctl2&0x1000 != 0,
		TenBitTagCompleter:  devcap2&0x10000 != 0,
		ASPM:                aspm,
	}, true
}

// ResizableBAR is one BAR's entry of the Resizable BAR capability.
type ResizableBAR struct {
	Index   int
	Current uint64 // bytes, as programmed now
	Largest uint64 // the largest size the function supports
}

// ResizableBARs reads the Resizable BAR capability (0x15): for each BAR it covers, the
// size programmed and the largest supported.
func (c Config) ResizableBARs() []ResizableBAR {
	off := c.ExtCapability(0x15)
	if off == 0 {
		return nil
	}
	n := int(c.U32(off+8) >> 5 & 7) // NBAR, in the first entry's control register
	var out []ResizableBAR
	for i := range max(n, 1) {
		capReg, ctl := c.U32(off+4+8*i), c.U32(off+8+8*i)
		var largest uint64
		// Capability bits 31:4 say 1 MB (bit 4) to 128 TB (bit 31); control bits
		// 31:16 go on from 256 TB. The largest set bit is the largest size.
		for b := 31; b >= 4; b-- {
			if capReg&(1<<b) != 0 {
				largest = 1 << (b + 16)
				break
			}
		}
		for b := 31; b >= 16; b-- {
			if ctl&(1<<b) != 0 {
				largest = 1 << (b + 32)
				break
			}
		}
		out = append(out, ResizableBAR{Index: int(ctl & 7), Current: 1 << (ctl>>8&0x3f + 20), Largest: largest})
	}
	return out
}

// ACSControl returns the ACS capability's control register (bit 2 P2P Request
// Redirect, bit 3 P2P Completion Redirect), and whether there is one.
func (c Config) ACSControl() (uint16, bool) {
	off := c.ExtCapability(0x0d)
	if off == 0 {
		return 0, false
	}
	return c.U16(off + 6), true
}
