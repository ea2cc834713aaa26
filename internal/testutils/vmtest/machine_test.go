package vmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/snapshot"
)

// The fixture builder must reproduce each captured snapshot from the same topology
// description: Topology.Machine, laid out by fakehost and captured by snapshot.Capture,
// gives the same paths, link targets and contents as the guest's own snapshot in
// testdata/vm, except for what no description determines (see notCompared). This runs
// without QEMU; TestTopologies makes the same comparison against a snapshot taken in the
// guest it boots.
func TestMachineReproducesSnapshots(t *testing.T) {
	for _, topo := range Topologies() {
		t.Run(topo.Name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "vm", topo.Name+".tar.gz"))
			if err != nil {
				t.Fatal(err)
			}
			checkSnapshot(t, "the captured snapshot testdata/vm/"+topo.Name+".tar.gz", want, builtSnapshot(t, topo))
		})
	}
}

// builtSnapshot lays out topo.Machine() in a directory and captures it as gpusplit
// snapshot captures a live host.
func builtSnapshot(t *testing.T, topo Topology) []byte {
	t.Helper()
	tree, err := topo.Machine().Build()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := tree.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	sum, err := snapshot.Capture(h, &buf, snapshot.Files{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Unreadable) > 0 {
		t.Fatalf("capturing the built tree: unreadable %q", sum.Unreadable)
	}
	return buf.Bytes()
}

// checkSnapshot fails t with a readable list of differences between the guest's snapshot
// (want, named by what) and the builder's (got).
func checkSnapshot(t *testing.T, what string, want, got []byte) {
	t.Helper()
	w, err := readSnapshot(want)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	g, err := readSnapshot(got)
	if err != nil {
		t.Fatalf("the built snapshot: %v", err)
	}
	diffs := diffSnapshots(w, g)
	if len(diffs) == 0 {
		return
	}
	const show = 40
	var b strings.Builder
	fmt.Fprintf(&b, "the machine built from the description differs from %s in %d paths", what, len(diffs))
	if len(diffs) > show {
		fmt.Fprintf(&b, " (the first %d shown)", show)
	}
	b.WriteString(":\n")
	for _, d := range diffs[:min(len(diffs), show)] {
		b.WriteString(d + "\n")
	}
	t.Error(b.String())
}

// notCompared are the contents that depend on the boot or the kernel build, not on the
// topology: the builder writes stand-ins, and only their presence is compared. Keep in
// step with testdata/vm/README.md.
var notCompared = map[string]bool{
	"dev/kmsg":     true, // the kernel log: timestamps, addresses
	"proc/cpuinfo": true, // bogomips differ from boot to boot
	"proc/version": true, // the kernel build
	"proc/modules": true, // load addresses
	"proc/devices": true, // the kernel configuration's character and block devices
	// The firmware's version: Debian's SeaBIOS package, not the topology.
	"sys/class/dmi/id/bios_version": true,
}

// deviceNotCompared are device attributes not compared byte for byte, and how they are
// compared instead:
//
//   - irq: routed by the firmware's ACPI tables and the MSI allocator; presence only.
//   - resource: the start addresses are where the firmware placed each BAR and bridge
//     window; every line's size and flags are compared.
//   - config: beyond the identity bytes (ids, revision, class, header type, and a
//     bridge's bus numbers or another function's subsystem ids) config space holds
//     capabilities and firmware-programmed registers; its size and those bytes are
//     compared.
var deviceNotCompared = map[string]func(want, got []byte) (string, string, bool){
	"irq":      func(want, got []byte) (string, string, bool) { return "", "", true },
	"resource": func(want, got []byte) (string, string, bool) { return same(resourceShape(want), resourceShape(got)) },
	"config":   func(want, got []byte) (string, string, bool) { return same(configIdentity(want), configIdentity(got)) },
}

func same(a, b string) (string, string, bool) { return a, b, a == b }

// snapEntry is one member of a snapshot archive.
type snapEntry struct {
	kind byte   // tar.TypeReg, tar.TypeSymlink or tar.TypeDir
	data []byte // a file's contents or a link's target
}

func readSnapshot(gz []byte) (map[string]snapEntry, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	out := map[string]snapEntry{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		e := snapEntry{kind: hdr.Typeflag}
		switch hdr.Typeflag {
		case tar.TypeReg:
			if e.data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		case tar.TypeSymlink:
			e.data = []byte(hdr.Linkname)
		case tar.TypeDir:
		default:
			return nil, fmt.Errorf("%s: unexpected member type %q", hdr.Name, hdr.Typeflag)
		}
		out[strings.TrimSuffix(hdr.Name, "/")] = e
	}
}

// diffSnapshots lists the differences, one line per path, in path order.
func diffSnapshots(want, got map[string]snapEntry) []string {
	var diffs []string
	all := maps.Clone(want)
	maps.Copy(all, got)
	for _, p := range slices.Sorted(maps.Keys(all)) {
		w, inWant := want[p]
		g, inGot := got[p]
		switch {
		case !inGot:
			diffs = append(diffs, fmt.Sprintf("  %s: only in the capture (%s)", p, describe(w)))
		case !inWant:
			diffs = append(diffs, fmt.Sprintf("  %s: only built (%s)", p, describe(g)))
		case w.kind != g.kind:
			diffs = append(diffs, fmt.Sprintf("  %s: captured %s, built %s", p, describe(w), describe(g)))
		case w.kind == tar.TypeReg && notCompared[p]:
		case w.kind == tar.TypeReg && strings.HasPrefix(p, "sys/devices/") && deviceNotCompared[path.Base(p)] != nil:
			if ws, gs, ok := deviceNotCompared[path.Base(p)](w.data, g.data); !ok {
				diffs = append(diffs, fmt.Sprintf("  %s:\n      captured %s\n      built    %s", p, ws, gs))
			}
		case !bytes.Equal(w.data, g.data):
			diffs = append(diffs, fmt.Sprintf("  %s:\n      captured %s\n      built    %s", p, describe(w), describe(g)))
		}
	}
	return diffs
}

func describe(e snapEntry) string {
	switch e.kind {
	case tar.TypeSymlink:
		return "link to " + string(e.data)
	case tar.TypeDir:
		return "directory"
	}
	s := strconv.Quote(string(e.data))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// resourceShape is a resource file without its start addresses: each line's size and
// flags. A line of zeros is empty; a line starting at 0 with a nonzero end or flags is
// a BAR of end+1 bytes (fakehost writes unplaced BARs so).
func resourceShape(b []byte) string {
	var out []string
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return fmt.Sprintf("malformed line %d %q", i, line)
		}
		var v [3]uint64
		for j := range f {
			n, err := strconv.ParseUint(strings.TrimPrefix(f[j], "0x"), 16, 64)
			if err != nil {
				return fmt.Sprintf("malformed line %d %q", i, line)
			}
			v[j] = n
		}
		if v == [3]uint64{} {
			out = append(out, "-")
			continue
		}
		out = append(out, fmt.Sprintf("%d:%#x/%#x", i, v[1]-v[0]+1, v[2]))
	}
	return fmt.Sprintf("%d lines [%s]", len(out), strings.Join(out, " "))
}

// configIdentity is the size of a config file and its identity bytes: vendor and device
// (0x00–0x03), revision and class (0x08–0x0b), header type (0x0e) and, for a bridge
// (header type 1), its primary, secondary and subordinate bus numbers (0x18–0x1a), for
// others the subsystem ids (0x2c–0x2f).
func configIdentity(b []byte) string {
	if len(b) < 64 {
		return fmt.Sprintf("%d bytes", len(b))
	}
	s := fmt.Sprintf("%d bytes, ids % x, rev/class % x, header %02x", len(b), b[0:4], b[8:12], b[0x0e])
	if b[0x0e]&0x7f == 1 {
		return s + fmt.Sprintf(", buses % x", b[0x18:0x1b])
	}
	return s + fmt.Sprintf(", subsystem % x", b[0x2c:0x30])
}

// The comparison can fail: a change to any compared part of a file shows, and the
// excluded parts are excluded only as documented.
func TestSnapshotComparisonCatchesDifferences(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "vm", "flat-vm.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := readSnapshot(want)
	if err != nil {
		t.Fatal(err)
	}
	if diffs := diffSnapshots(w, w); len(diffs) != 0 {
		t.Fatalf("a snapshot differs from itself: %q", diffs)
	}
	const dev = "sys/devices/pci0000:00/0000:00:10.0/0000:01:00.0/"
	mutations := []struct {
		name string
		edit func(m map[string]snapEntry)
		diff bool
	}{
		{"a value", func(m map[string]snapEntry) { m[dev+"numa_node"] = snapEntry{kind: tar.TypeReg, data: []byte("0\n")} }, true},
		{"a link target", func(m map[string]snapEntry) {
			m[dev+"iommu_group"] = snapEntry{kind: tar.TypeSymlink, data: []byte("../../../../kernel/iommu_groups/7")}
		}, true},
		{"a missing file", func(m map[string]snapEntry) { delete(m, dev+"reset_method") }, true},
		{"an extra file", func(m map[string]snapEntry) { m[dev+"label"] = snapEntry{kind: tar.TypeReg, data: []byte("x\n")} }, true},
		{"a BAR's size", func(m map[string]snapEntry) {
			m[dev+"resource"] = edit(m[dev+"resource"], "0x00000000fe01ffff", "0x00000000fe00ffff")
		}, true},
		{"a BAR's flags", func(m map[string]snapEntry) {
			m[dev+"resource"] = edit(m[dev+"resource"], "0x0000000000040101", "0x0000000000040100")
		}, true},
		{"a BAR's place", func(m map[string]snapEntry) {
			m[dev+"resource"] = edit(m[dev+"resource"], "0x00000000fe000000 0x00000000fe01ffff", "0x00000000f0000000 0x00000000f001ffff")
		}, false},
		{"config's class", func(m map[string]snapEntry) { m[dev+"config"] = poke(m[dev+"config"], 0x0b, 0x03) }, true},
		{"config's header type", func(m map[string]snapEntry) { m[dev+"config"] = poke(m[dev+"config"], 0x0e, 0x00) }, true},
		{"config's capabilities", func(m map[string]snapEntry) { m[dev+"config"] = poke(m[dev+"config"], 0x40, 0x55) }, false},
		{"the irq", func(m map[string]snapEntry) { m[dev+"irq"] = snapEntry{kind: tar.TypeReg, data: []byte("99\n")} }, false},
		{"the missing irq", func(m map[string]snapEntry) { delete(m, dev+"irq") }, true},
		{"the kernel log", func(m map[string]snapEntry) {
			m["dev/kmsg"] = snapEntry{kind: tar.TypeReg, data: []byte("6,0,0,-;x\n")}
		}, false},
		{"the missing kernel log", func(m map[string]snapEntry) { delete(m, "dev/kmsg") }, true},
		{"the command line", func(m map[string]snapEntry) {
			m["proc/cmdline"] = snapEntry{kind: tar.TypeReg, data: []byte("quiet\n")}
		}, true},
	}
	for _, mu := range mutations {
		g := maps.Clone(w)
		mu.edit(g)
		if diffs := diffSnapshots(w, g); (len(diffs) > 0) != mu.diff {
			t.Errorf("%s changed: differences %q, want some: %v", mu.name, diffs, mu.diff)
		}
	}
}

func edit(e snapEntry, old, new string) snapEntry {
	return snapEntry{kind: e.kind, data: []byte(strings.Replace(string(e.data), old, new, 1))}
}

func poke(e snapEntry, off int, v byte) snapEntry {
	data := bytes.Clone(e.data)
	data[off] = v
	return snapEntry{kind: e.kind, data: data}
}

// A description QEMU refuses, or one the converter does not model, is an error, not a
// machine.
func TestMachineRefuses(t *testing.T) {
	pxb := func(id, busNr string, props ...string) Device {
		return Device{ID: id, Model: "pxb-pcie", Bus: "pcie.0", Props: append([]string{"bus_nr=" + busNr}, props...)}
	}
	cases := map[string]Topology{
		"unknown model":        {Devices: []Device{{ID: "x", Model: "virtio-net-pci", Bus: "pcie.0"}}},
		"unknown bus":          {Devices: []Device{nic("n", "rp9", "0x0")}},
		"slot of the chipset":  {Devices: []Device{rootPort("a", "pcie.0", "0x1f.0")}},
		"slot taken":           {Devices: []Device{rootPort("a", "pcie.0", "0x10"), rootPort("b", "pcie.0", "0x10.0")}},
		"single function":      {Devices: []Device{rootPort("a", "pcie.0", "0x10.0"), rootPort("b", "pcie.0", "0x10.1")}},
		"expander bus taken":   {Devices: []Device{rootPort("a", "pcie.0", "0x10"), pxb("p", "0x1"), rootPort("b", "p", "0x0")}},
		"expander off bus 0":   {Devices: []Device{rootPort("a", "pcie.0", "0x10"), {ID: "p", Model: "pxb-pcie", Bus: "a", Props: []string{"bus_nr=0x20"}}}},
		"NUMA node not there":  {NUMA: 2, Devices: []Device{pxb("p", "0x20", "numa_node=2")}},
		"NUMA node, no NUMA":   {Devices: []Device{pxb("p", "0x20", "numa_node=0")}},
		"IOMMU on i440fx":      {MachineType: "pc", IOMMU: true},
		"unknown machine type": {MachineType: "virt"},
	}
	for name, topo := range cases {
		if _, err := topo.machine(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
