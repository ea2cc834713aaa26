package pci

import (
	"encoding/binary"
	"testing"
)

// config lays out a 4 KiB config space with the given standard capabilities (id, body)
// chained from 0x40 and extended capabilities chained from 0x100.
func config(std [][]byte, ext [][]byte) Config {
	c := make(Config, 4096)
	if len(std) > 0 {
		c[0x06] = 0x10
		c[0x34] = 0x40
	}
	off := 0x40
	for i, s := range std {
		copy(c[off:], s)
		next := 0
		if i < len(std)-1 {
			next = off + 0x40
		}
		c[off+1] = byte(next)
		off += 0x40
	}
	off = 0x100
	for i, x := range ext {
		copy(c[off:], x)
		hdr := binary.LittleEndian.Uint32(c[off:])
		if i < len(ext)-1 {
			hdr |= uint32(off+0x40) << 20
		}
		binary.LittleEndian.PutUint32(c[off:], hdr)
		off += 0x40
	}
	return c
}

func TestConfigCapabilities(t *testing.T) {
	pcie := make([]byte, 0x3c)
	pcie[0] = 0x10
	binary.LittleEndian.PutUint32(pcie[0x04:], 0x2)             // DevCap: 512-byte payload supported
	binary.LittleEndian.PutUint16(pcie[0x08:], 1<<5|5<<12|0x10) // DevCtl: 256, 4096, relaxed ordering
	binary.LittleEndian.PutUint16(pcie[0x10:], 0x2)             // LnkCtl: L1
	binary.LittleEndian.PutUint16(pcie[0x28:], 0x1000)          // DevCtl2: 10-bit tags
	msi := []byte{0x05, 0}
	rebar := make([]byte, 20)
	binary.LittleEndian.PutUint32(rebar[0:], 0x00010015)
	binary.LittleEndian.PutUint32(rebar[4:], 0x003ffc00)         // 64 MiB .. 128 GiB
	binary.LittleEndian.PutUint32(rebar[8:], 8<<8|2<<5|1)        // BAR1 at 256 MiB, 2 entries
	binary.LittleEndian.PutUint32(rebar[12:], 0x00000010)        // 1 MiB only
	binary.LittleEndian.PutUint32(rebar[16:], 0<<8|0x00010000|3) // BAR3 at 1 MiB, 256 TiB offered
	acs := make([]byte, 8)
	binary.LittleEndian.PutUint32(acs[0:], 0x0001000d)
	binary.LittleEndian.PutUint16(acs[6:], 0x000c)
	c := config([][]byte{msi, pcie}, [][]byte{rebar, acs})

	if got := c.Capability(0x10); got != 0x80 {
		t.Errorf("PCIe capability at 0x%x, want 0x80 (the second of the list)", got)
	}
	p, ok := c.PCIeSettings()
	want := PCIe{MaxPayload: 256, MaxPayloadSupported: 512, MaxReadRequest: 4096, RelaxedOrdering: true, TenBitTagRequester: true, ASPM: "L1"}
	if !ok || p != want {
		t.Errorf("PCIeSettings = %+v, %v; want %+v", p, ok, want)
	}
	bars := c.ResizableBARs()
	if len(bars) != 2 || bars[0] != (ResizableBAR{Index: 1, Current: 256 << 20, Largest: 128 << 30}) ||
		bars[1] != (ResizableBAR{Index: 3, Current: 1 << 20, Largest: 256 << 40}) {
		t.Errorf("ResizableBARs = %+v", bars)
	}
	if ctl, ok := c.ACSControl(); !ok || ctl != 0x000c {
		t.Errorf("ACSControl = 0x%x, %v", ctl, ok)
	}

	// Without root: 64 bytes, no capability can be reached.
	short := c[:64]
	if short.Full() || short.Capability(0x10) != 0 || short.ResizableBARs() != nil {
		t.Error("a 64-byte config space gave capabilities")
	}
	if _, ok := short.PCIeSettings(); ok {
		t.Error("PCIeSettings of 64 bytes")
	}
	// A list that loops ends.
	loop := config([][]byte{msi}, nil)
	loop[0x41] = 0x40
	if loop.Capability(0x10) != 0 {
		t.Error("found a capability in a loop")
	}
	eloop := config(nil, [][]byte{{0x01, 0x00, 0x01, 0x10}}) // next: 0x100 again
	if eloop.ExtCapability(0x15) != 0 {
		t.Error("found an extended capability in a loop")
	}
}
