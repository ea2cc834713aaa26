package pve

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Proxmox's own examples read and write back byte for byte.
func TestExamplesRoundTrip(t *testing.T) {
	pciCfg := read(t, "pci.cfg.example")
	f, err := ParseMappings("pci.cfg", pciCfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.String() != pciCfg {
		t.Error("pci.cfg example does not round-trip")
	}
	if m := f.Mapping("gpu-a100"); m == nil || len(m.Maps) != 3 || len(m.NodeMaps("pve1")) != 2 || m.Props["description"] != "A100 pool for training VMs" {
		t.Errorf("gpu-a100: %+v", m)
	}
	if m := f.Mapping("rtx4090-ws"); m == nil || m.Maps[0].Path != "0000:01:00" || m.Maps[0].SubsystemID != "1043:889d" || m.Props["mdev"] != "0" {
		t.Errorf("rtx4090-ws: %+v", m)
	}
	for _, c := range []struct{ file, kind string }{{"131.conf.example", QEMU}, {"200.conf.example", LXC}, {"raw.conf.example", LXC}} {
		text := read(t, c.file)
		g, err := ParseGuest(c.file, c.kind, 1, text)
		if err != nil {
			t.Fatal(err)
		}
		if g.String() != text {
			t.Errorf("%s does not round-trip", c.file)
		}
	}
	vm, _ := ParseGuest("131", QEMU, 131, read(t, "131.conf.example"))
	if v, _ := vm.Get("hostpci2"); v != "0000:ca:00.0,pcie=1,rombar=0" {
		t.Errorf("hostpci2 = %q", v)
	}
	// Keys after [PENDING] and in snapshots are not the main section's.
	if v, ok := vm.Get("hostpci3"); ok {
		t.Errorf("hostpci3 of [PENDING] read as a main key: %q", v)
	}
	ct, _ := ParseGuest("200", LXC, 200, read(t, "200.conf.example"))
	if n := ct.Numbered("dev"); len(n) != 9 || DevPath(n[4].Value) != "/dev/nvidiactl" {
		t.Errorf("dev entries %v", n)
	}
}

// The traps of pci.cfg are refused with the line, never silently changed.
func TestMappingTraps(t *testing.T) {
	good := "m1\n\tmap id=10de:2bb1,node=n1,path=0000:01:00.0\n\nm2\n\tmap id=10de:2bb1,node=n1,path=0000:02:00.0\n\n"
	if _, err := ParseMappings("pci.cfg", good); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, text string
		line       int
		want       string
	}{
		{"blank line of spaces", strings.Replace(good, "\n\nm2", "\n  \nm2", 1), 3, "merges the next section"},
		{"CRLF blank line", strings.Replace(good, "\n\nm2", "\n\r\nm2", 1), 3, "carriage return"},
		{"no blank line", strings.Replace(good, "\n\nm2", "\nm2", 1), 3, "without an empty line"},
		{"upper-case path", strings.Replace(good, "0000:01:00.0", "0000:0A:00.0", 1), 2, "upper case"},
		{"no valid map", "m1\n\tdescription x\n\n", 1, "no valid map line"},
		{"duplicate id", good + "m1\n\tmap id=10de:2bb1,node=n1,path=0000:03:00.0\n\n", 7, "defined twice (first on line 1)"},
		{"unknown key", strings.Replace(good, "\tmap id=10de:2bb1,node=n1,path=0000:02:00.0", "\tmap id=10de:2bb1,node=n1,path=0000:02:00.0\n\tbogus 1", 1), 6, "unknown key"},
		{"mdev yes", strings.Replace(good, "\n\nm2", "\n\tmdev yes\n\nm2", 1), 3, "only 0 or 1"},
		{"bad id", "9x\n\tmap id=10de:2bb1,node=n1,path=0000:01:00.0\n\n", 1, "not a mapping id"},
		{"map without node", "m1\n\tmap id=10de:2bb1,path=0000:01:00.0\n\n", 2, "lacks node"},
		{"empty value", "m1\n\tmap id=,node=n1,path=0000:01:00.0\n\n", 2, "not key=value"},
		{"NUL byte", strings.Replace(good, "node=n1,path=0000:02", "node=n1\x00,path=0000:02", 1), 5, "byte 0x00 at column 26 is not text"},
		{"binary first line", "\x7fELF\x02\x01\n" + good, 1, "byte 0x7f at column 1"},
		{"invalid UTF-8 id", "m\xff1\n\tmap id=10de:2bb1,node=n1,path=0000:01:00.0\n\n", 1, "not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseMappings("pci.cfg", c.text)
			var le *LineError
			if !errors.As(err, &le) || le.Line != c.line || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want line %d saying %q", err, c.line, c.want)
			}
		})
	}
	// Comments are kept, though Proxmox would drop them.
	commented := "# GPUs of the lab\n" + good
	if f, err := ParseMappings("pci.cfg", commented); err != nil || f.String() != commented {
		t.Errorf("comments: %v", err)
	}
}

func TestSetNodeMaps(t *testing.T) {
	f, err := ParseMappings("pci.cfg", read(t, "pci.cfg.example"))
	if err != nil {
		t.Fatal(err)
	}
	e := MapEntry{Node: "pve1", Path: "0000:31:00.0", ID: "10de:20b0", SubsystemID: "10de:134f", IOMMUGroup: "41"}
	if err := f.SetNodeMaps("gpu-a100", "pve1", []MapEntry{e}, nil); err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(read(t, "pci.cfg.example"), "\tmap id=10de:20b0,iommugroup=23,node=pve1,path=0000:17:00.0,subsystem-id=10de:134f\n", "", 1)
	if f.String() != want {
		t.Errorf("after dropping one pve1 entry:\n%s", f.String())
	}
	// A new mapping goes at the end, in Proxmox's form.
	if err := f.SetNodeMaps("a100-vm", "pve1", []MapEntry{{Node: "pve1", Path: "0000:17:00.0", ID: "10de:20b0", SubsystemID: "10de:134f", IOMMUGroup: "23"}}, map[string]string{"description": "A100 for VMs"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(f.String(), "\n\na100-vm\n\tmap id=10de:20b0,iommugroup=23,node=pve1,path=0000:17:00.0,subsystem-id=10de:134f\n\tdescription A100 for VMs\n\n") {
		t.Errorf("new mapping:\n%s", f.String())
	}
	// A mapping left without entries goes; other nodes' entries keep it alive.
	if err := f.SetNodeMaps("a100-vm", "pve1", nil, nil); err != nil {
		t.Fatal(err)
	}
	if f.Mapping("a100-vm") != nil || f.String() != want {
		t.Errorf("empty mapping not removed:\n%s", f.String())
	}
	if err := f.SetNodeMaps("gpu-a100", "pve1", nil, nil); err != nil || len(f.Mapping("gpu-a100").Maps) != 1 {
		t.Errorf("pve2's entry should keep gpu-a100: %v", err)
	}
}

func TestGuestEdits(t *testing.T) {
	g, _ := ParseGuest("131", QEMU, 131, read(t, "131.conf.example"))
	g.Set("hostpci1", "mapping=gpu-a100-vm,pcie=1")
	g.Set("onboot", "1") // a new key goes in sorted order
	g.Delete("balloon")
	out := g.String()
	for _, want := range []string{"hostpci1: mapping=gpu-a100-vm,pcie=1\nhostpci2", "numa1: cpus=16-31,hostnodes=1,memory=65536,policy=bind\nonboot: 1\nostype: l26", "args: -global q35-pcihost.pci-hole64-size=2048G\nbios: ovmf"} {
		if !strings.Contains(out, want) {
			t.Errorf("edited config lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, read(t, "131.conf.example")[strings.Index(read(t, "131.conf.example"), "\n[PENDING]"):]) {
		t.Error("the pending section and the snapshot changed")
	}
	ct, _ := ParseGuest("raw", LXC, 1, read(t, "raw.conf.example"))
	ct.Set("cores", "8")
	ct.AddRaw("lxc.mount.entry", "/dev/nvidia2 dev/nvidia2 none bind,optional,create=file")
	lines := strings.Split(ct.String(), "\n")
	if lines[0] != "cores: 8" || !strings.HasPrefix(lines[len(lines)-2], "lxc.mount.entry: /dev/nvidia2") {
		t.Errorf("raw config:\n%s", ct.String())
	}
	if ct.FreeIndex("dev") != 0 {
		t.Error("FreeIndex")
	}
}

func demo(t *testing.T) (*host.Host, *inventory.Inventory) {
	t.Helper()
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, inv
}

func syncDemo(t *testing.T, d plan.Desired) map[string]Change {
	t.Helper()
	changes, _ := syncWith(t, nil, d, SyncOptions{})
	return changes
}

func vfio(t *testing.T, sel string) plan.Desired {
	sels, err := pci.ParseSelectors(sel)
	if err != nil {
		t.Fatal(err)
	}
	return plan.ForVFIO([][]pci.Selector{sels})
}

// The reference case: after --vfio numa:1, pro6000 keeps 01, 11, 61, 71; pro6000-vm gets
// 81, 91, e1, f1 with their groups and subsystem ids; other mappings and other nodes'
// entries are untouched; container 129 keeps the four NUMA-0 GPUs only; VM 131 moves to
// pro6000-vm with its guest NUMA node on host node 1.
func TestSyncDemo(t *testing.T) {
	changes := syncDemo(t, vfio(t, "numa:1"))
	mc, ok := changes[MappingPath]
	if !ok {
		t.Fatal("no mapping change")
	}
	f, err := ParseMappings(MappingPath, mc.New)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := ParseMappings(MappingPath, mc.Old)
	paths := func(m *Mapping, node string) []string {
		var out []string
		for _, e := range m.NodeMaps(node) {
			out = append(out, e.Path+" "+e.IOMMUGroup+" "+e.SubsystemID+" "+e.ID)
		}
		return out
	}
	if got := strings.Join(paths(f.Mapping("pro6000"), "kpro6"), "|"); got != "0000:01:00 10 10de:204b 10de:2bb1|0000:11:00 28 10de:204b 10de:2bb1|0000:61:00 42 10de:204b 10de:2bb1|0000:71:00 61 10de:204b 10de:2bb1" {
		t.Errorf("pro6000 on kpro6: %s", got)
	}
	if got := strings.Join(paths(f.Mapping("pro6000-vm"), "kpro6"), "|"); got != "0000:81:00 72 10de:204b 10de:2bb1|0000:91:00 90 10de:204b 10de:2bb1|0000:e1:00 101 10de:204b 10de:2bb1|0000:f1:00 117 10de:204b 10de:2bb1" {
		t.Errorf("pro6000-vm on kpro6: %s", got)
	}
	if strings.Join(paths(f.Mapping("pro6000"), "kpro7"), "|") != strings.Join(paths(old.Mapping("pro6000"), "kpro7"), "|") || len(paths(f.Mapping("pro6000"), "kpro7")) != 2 {
		t.Error("kpro7's entries changed")
	}
	if a, b := f.Mapping("a6000-ws"), old.Mapping("a6000-ws"); a == nil || len(a.Maps) != len(b.Maps) || !strings.Contains(mc.New, "a6000-ws\n\tmap id=10de:2230,iommugroup=24,node=kpro5,path=0000:41:00.0,subsystem-id=10de:1459\n") {
		t.Error("a6000-ws changed")
	}
	// Proxmox's check passes for every entry of this node.
	_, inv := demo(t)
	for _, m := range f.Mappings {
		for _, e := range m.NodeMaps("kpro6") {
			if probs := Check(inv.Tree, e); len(probs) > 0 {
				t.Errorf("%s %s: %v", m.ID, e.Path, probs)
			}
		}
	}

	ct := changes["/etc/pve/lxc/129.conf"]
	for i := range 8 {
		has := strings.Contains(ct.New, "/dev/nvidia"+string(rune('0'+i))+",")
		if has != (i < 4) {
			t.Errorf("container 129 has /dev/nvidia%d: %v", i, has)
		}
	}
	for _, n := range []string{"/dev/nvidiactl", "/dev/nvidia-uvm,", "/dev/nvidia-uvm-tools", "nvidia-cap1"} {
		if !strings.Contains(ct.New, n) {
			t.Errorf("container 129 lost %s", n)
		}
	}

	vm := changes["/etc/pve/qemu-server/131.conf"]
	for _, want := range []string{"hostpci0: mapping=pro6000-vm,pcie=1\n", "hostpci3: mapping=pro6000-vm,pcie=1\n", "numa0: cpus=0-63,hostnodes=1,memory=262144,policy=bind\n"} {
		if !strings.Contains(vm.New, want) {
			t.Errorf("VM 131 lacks %q:\n%s", want, vm.New)
		}
	}
	if len(vm.Notes) == 0 || len(changes) != 3 {
		t.Errorf("%d changes; VM notes %v", len(changes), vm.Notes)
	}
	if _, other := changes["/etc/pve/nodes/kpro5/qemu-server/120.conf"]; other {
		t.Error("another node's VM changed")
	}
}

// The documented desired state names the mappings, the container and the VM.
func TestSyncWithNames(t *testing.T) {
	data, err := os.ReadFile("../../docs/split.toml")
	if err != nil {
		t.Fatal(err)
	}
	file, err := plan.ParseFile("split.toml", data)
	if err != nil {
		t.Fatal(err)
	}
	d, err := file.Desired()
	if err != nil {
		t.Fatal(err)
	}
	changes := syncDemo(t, d)
	f, err := ParseMappings(MappingPath, changes[MappingPath].New)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Mapping("pro6000").NodeMaps("kpro6")) != 4 || len(f.Mapping("pro6000-vm").NodeMaps("kpro6")) != 4 {
		t.Errorf("mappings:\n%s", changes[MappingPath].New)
	}
	if !strings.Contains(changes["/etc/pve/qemu-server/131.conf"].New, "hostpci0: mapping=pro6000-vm,pcie=1") {
		t.Error("VM 131 not on pro6000-vm")
	}
	if strings.Contains(changes["/etc/pve/lxc/129.conf"].New, "/dev/nvidia4,") {
		t.Error("container 129 keeps a vfio-pci GPU")
	}
}

func TestCheck(t *testing.T) {
	_, inv := demo(t)
	ok := MapEntry{Node: "kpro6", Path: "0000:81:00", ID: "10de:2bb1", SubsystemID: "10de:204b", IOMMUGroup: "72"}
	if p := Check(inv.Tree, ok); len(p) != 0 {
		t.Errorf("good entry: %v", p)
	}
	for _, c := range []struct {
		e    MapEntry
		want string
	}{
		{MapEntry{Path: "0000:81:00", ID: "10DE:2BB1", SubsystemID: "10de:204b", IOMMUGroup: "72"}, "'id' does not match"},
		{MapEntry{Path: "0000:81:00", ID: "10de:2bb1", SubsystemID: "10de:204b"}, "missing expected property 'iommugroup'"},
		{MapEntry{Path: "0000:81:00", ID: "10de:2bb1", IOMMUGroup: "72"}, "missing expected property 'subsystem-id'"},
		{MapEntry{Path: "0000:81:00.0", ID: "10de:2bb1", SubsystemID: "10de:204b", IOMMUGroup: "73"}, "'iommugroup' does not match"},
		{MapEntry{Path: "0000:99:00.0", ID: "10de:2bb1"}, "not found"},
	} {
		if p := Check(inv.Tree, c.e); len(p) == 0 || !strings.Contains(strings.Join(p, ";"), c.want) {
			t.Errorf("%+v: %v, want %q", c.e, p, c.want)
		}
	}
}

// The diff is what diff -u prints, hunks and all.
func TestDiffMatchesDiffU(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff program to compare with")
	}
	base := read(t, "131.conf.example")
	edits := []func(string) string{
		func(s string) string { return strings.Replace(s, "cores: 16", "cores: 32", 1) },
		func(s string) string { return strings.Replace(s, "agent: 1\n", "", 1) + "extra: 1\n" },
		func(s string) string {
			return "#new first line\n" + strings.Replace(s, "sockets: 2\n", "sockets: 4\nnuma2: x\n", 1)
		},
		func(s string) string { return strings.ReplaceAll(s, "local-lvm", "tank") },
	}
	dir := t.TempDir()
	for i, edit := range edits {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		os.WriteFile(a, []byte(base), 0o644)
		os.WriteFile(b, []byte(edit(base)), 0o644)
		out, _ := exec.Command("diff", "-u", a, b).Output()
		want := string(out)
		want = want[strings.Index(want, "@@"):]
		got := Diff("f", base, edit(base))
		got = got[strings.Index(got, "@@"):]
		if got != want {
			t.Errorf("edit %d:\n%s\nwant:\n%s", i, got, want)
		}
	}
	if Diff("f", "x\n", "x\n") != "" {
		t.Error("diff of equal texts")
	}
}

// Reading and writing back changes nothing, whatever the input.
func FuzzMappingsRoundTrip(f *testing.F) {
	for _, s := range smallSeeds(string(must(os.ReadFile("testdata/pci.cfg.example"))), "\n\n") {
		f.Add(s)
	}
	f.Add("m1\n\tmap id=10de:2bb1,node=n1,path=0000:01:00.0\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMappings("f", s)
		if err != nil {
			return
		}
		if m.String() != s {
			t.Fatalf("round trip changed %q", s)
		}
	})
}

// Each kind of guest config reads and writes back byte for byte, or is refused with the
// line at fault; a refusal of one kind does not stop the other from being tried.
func FuzzGuestRoundTrip(f *testing.F) {
	for _, name := range []string{"131.conf.example", "200.conf.example", "raw.conf.example"} {
		for _, s := range smallSeeds(string(must(os.ReadFile("testdata/"+name))), "\n") {
			f.Add(s)
		}
	}
	// Container configs a VM parse refuses: CR LF line ends, a byte that is not text,
	// a raw key that is not UTF-8.
	f.Add("arch: amd64\r\ncores: 32\r\ndev0: /dev/nvidia0,gid=44,mode=0666\r\n")
	f.Add("dev0: /dev/nvidia0\x00\nlxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n")
	f.Add("lxc.cgroup2.devices.allow: c 195:* rwm\nlxc.mount.entr\xff: /dev/nvidia0 dev/nvidia0 none bind\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, kind := range []string{QEMU, LXC} {
			g, err := ParseGuest("f", kind, 1, s)
			if err != nil {
				var le *LineError
				if !errors.As(err, &le) || le.File != "f" || le.Line < 1 || le.Line > strings.Count(s, "\n")+1 {
					t.Fatalf("%s: %q refused with %v, want the line at fault", kind, s, err)
				}
				continue
			}
			if g.String() != s {
				t.Fatalf("%s: round trip changed %q", kind, s)
			}
			g.Keys()
			g.Numbered("dev")
		}
	})
}

// smallSeeds cuts a file into pieces of a few parts (lines, or sections) each: a whole
// file as a seed makes the fuzzer spend its time minimising large inputs instead of
// running.
func smallSeeds(s, sep string) []string {
	parts := strings.SplitAfter(s, sep)
	var out []string
	for i := 0; i < len(parts); i += 3 {
		out = append(out, strings.Join(parts[i:min(i+3, len(parts))], ""))
	}
	return out
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// demoDir is the sample host as a directory, with extra files.
func demoDir(t *testing.T, extra map[string]string) (*host.Host, *inventory.Inventory) {
	t.Helper()
	dir := t.TempDir()
	archive := filepath.Join(dir, "kpro6.tar.gz")
	os.WriteFile(archive, samplehost.Archive(), 0o644)
	root := filepath.Join(dir, "root")
	os.MkdirAll(root, 0o755)
	if out, err := exec.Command("tar", "-xzf", archive, "-C", root).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	for p, body := range extra {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, inv
}

// Containers named by the desired state get their GPUs, in the style they use for the
// nvidia devices: lxc.mount.entry lines with the cgroup majors (nvidia-uvm's from
// /proc/devices), else devN entries.
func TestSyncAssignsContainers(t *testing.T) {
	h, inv := demoDir(t, map[string]string{
		"etc/pve/nodes/kpro6/lxc/140.conf": "arch: amd64\ncores: 8\nhostname: raw\nlxc.cgroup2.devices.allow: c 195:* rwm\nlxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n",
		"etc/pve/nodes/kpro6/lxc/141.conf": "arch: amd64\ncores: 8\ndev0: /dev/fuse\nhostname: new\n",
	})
	d := plan.Desired{Targets: []plan.Target{
		{Name: "a", Choices: [][]pci.Selector{mustSel(t, "0000:01:00.0")}, Driver: "nvidia", Containers: []int{140}},
		{Name: "b", Choices: [][]pci.Selector{mustSel(t, "0000:11:00.0,0000:61:00.0")}, Driver: "nvidia", Containers: []int{141}},
	}, KeepRest: true}
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	changes, _, err := Sync(h, inv, p, d, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range changes {
		got[c.Path] = c.New
	}
	raw := got["/etc/pve/lxc/140.conf"]
	for _, want := range []string{
		"lxc.cgroup2.devices.allow: c 195:* rwm\nlxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\nlxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n",
		"lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n",
		"lxc.mount.entry: /dev/nvidia-uvm-tools dev/nvidia-uvm-tools none bind,optional,create=file\nlxc.cgroup2.devices.allow: c 236:* rwm\n",
	} {
		if !strings.Contains(raw, want) {
			t.Errorf("container 140 lacks %q:\n%s", want, raw)
		}
	}
	dev := got["/etc/pve/lxc/141.conf"]
	for _, want := range []string{"dev0: /dev/fuse\ndev1: /dev/nvidia1,mode=0666\ndev2: /dev/nvidia2,mode=0666\ndev3: /dev/nvidiactl,mode=0666\n"} {
		if !strings.Contains(dev, want) {
			t.Errorf("container 141 lacks %q:\n%s", want, dev)
		}
	}
	// And container 129, named by no group, keeps what it has: the rest is kept.
	if _, changed := got["/etc/pve/lxc/129.conf"]; changed {
		t.Errorf("container 129 changed:\n%s", got["/etc/pve/lxc/129.conf"])
	}
}

func mustSel(t testing.TB, s string) []pci.Selector {
	t.Helper()
	sels, err := pci.ParseSelectors(s)
	if err != nil {
		t.Fatal(err)
	}
	return sels
}

// demoWith is the sample host with some files replaced ("" removes one), as an archive
// in memory: quicker than laying the host out in a directory, for tests that only read.
func demoWith(t testing.TB, files map[string]string) (*host.Host, *inventory.Inventory) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(samplehost.Archive()))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tr, tw := tar.NewReader(zr), tar.NewWriter(&buf)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if repl, ok := files[name]; ok {
			if repl == "" {
				continue
			}
			body = []byte(repl)
			hdr.Size = int64(len(body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
	}
	tw.Close()
	h, err := host.OpenArchive("kpro6-modified", &buf)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, inv
}

// syncWith runs the sync of a desired state on such a host.
func syncWith(t *testing.T, files map[string]string, d plan.Desired, o SyncOptions) (map[string]Change, []string) {
	t.Helper()
	h, inv := demoWith(t, files)
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	changes, notes, err := Sync(h, inv, p, d, o)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Change{}
	for _, c := range changes {
		out[c.Path] = c
	}
	return out, notes
}

// Results that cannot work, or that would lose what a mapping holds, are refusals, each
// on the file it concerns and saying what differs; a sound sync has none.
func TestSyncRefusals(t *testing.T) {
	const cfg = "etc/pve/mapping/pci.cfg"
	sample, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	ref := string(must(sample.ReadFile(MappingPath)))
	line := func(addr string) string {
		for _, l := range strings.SplitAfter(ref, "\n") {
			if strings.Contains(l, "node=kpro6,path="+addr+",") {
				return l
			}
		}
		t.Fatalf("no line for %s", addr)
		return ""
	}
	for _, tc := range []struct {
		name  string
		cfg   string
		opts  SyncOptions
		file  string // the change that carries the refusal
		want  string
		notes string // a note that must be there instead, when want is ""
	}{
		{name: "sound", cfg: ref},
		{name: "one GPU's line missing", cfg: strings.Replace(ref, line("0000:f1:00"), "", 1),
			file: "/etc/pve/qemu-server/131.conf", want: "VM 131: 4 hostpci entries would use mapping pro6000-vm, which holds 3 GPUs on kpro6: the VM could not start"},
		{name: "stale IOMMU group", cfg: strings.Replace(ref, "iommugroup=72,node=kpro6", "iommugroup=73,node=kpro6", 1),
			file: MappingPath, want: "mapping pro6000: the entry of node kpro6 with path=0000:81:00 no longer matches the host ('iommugroup' does not match for 0000:81:00.0 (72 != 73))"},
		{name: "entry of a device that is gone", cfg: strings.Replace(ref, line("0000:f1:00"), line("0000:f1:00")+strings.Replace(line("0000:f1:00"), "path=0000:f1:00", "path=0000:f2:00", 1), 1),
			file: MappingPath, want: "mapping pro6000: the entry of node kpro6 with path=0000:f2:00 points to no device of this host: sync would drop it"},
		{name: "entry of a device that is no GPU", cfg: strings.Replace(ref, line("0000:f1:00"), line("0000:f1:00")+strings.Replace(line("0000:f1:00"), "path=0000:f1:00", "path=0000:00:01.1", 1), 1),
			file: MappingPath, want: "path=0000:00:01.1 points to 0000:00:01.1, a 1022:"},
		{name: "the -vm mapping exists with another node's GPU", cfg: ref + "pro6000-vm\n\tmap id=10de:2bb1,iommugroup=12,node=kpro7,path=0000:41:00,subsystem-id=10de:204b\n\n",
			file: MappingPath, want: "mapping pro6000-vm exists already and holds devices of other nodes (kpro7:0000:41:00)"},
		{name: "the same, named with --vm-mapping", cfg: ref + "pro6000-vm\n\tmap id=10de:2bb1,iommugroup=12,node=kpro7,path=0000:41:00,subsystem-id=10de:204b\n\n",
			opts: SyncOptions{VMMapping: "pro6000-vm"}, notes: "mapping pro6000-vm, named to hold this node's GPUs, also holds devices of other nodes (kpro7:0000:41:00): they are kept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes, notes := syncWith(t, map[string]string{cfg: tc.cfg}, vfio(t, "numa:1"), tc.opts)
			var all []string
			for p, c := range changes {
				for _, r := range c.Refusals {
					all = append(all, p+": "+r)
					if tc.want == "" || p != tc.file || !strings.Contains(r, tc.want) {
						continue
					}
					tc.want = "" // found
				}
			}
			if tc.want != "" {
				t.Fatalf("no refusal %q on %s; refusals:\n%s", tc.want, tc.file, strings.Join(all, "\n"))
			}
			if tc.file == "" && len(all) > 0 {
				t.Fatalf("refusals:\n%s", strings.Join(all, "\n"))
			}
			if tc.notes != "" && !strings.Contains(strings.Join(notes, "\n"), tc.notes) {
				t.Fatalf("no note %q in %v", tc.notes, notes)
			}
		})
	}
}

// Guest configs that Proxmox did not write: refused with the line, and so is a sync over
// them, instead of skipping the line and going on.
func TestGuestNotText(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"NUL in a value", "cores: 4\nmemory: 10\x0024\n", 2, "byte 0x00 at column 11 is not text"},
		{"escape sequence", "cores: 4\n\x1b[31mhostpci0: 01:00\n", 2, "byte 0x1b at column 1"},
		{"invalid UTF-8 key", "cor\xe9s: 4\n", 1, "not valid UTF-8"},
		{"CRLF", "cores: 4\r\nmemory: 1024\r\n", 1, "CR LF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseGuest("131.conf", QEMU, 131, tc.text)
			var le *LineError
			if !errors.As(err, &le) || le.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want line %d saying %q", err, tc.line, tc.want)
			}
		})
	}
	// UTF-8 in a description comment, and TABs, are text.
	if _, err := ParseGuest("131.conf", QEMU, 131, "#Stra%C3%9Fe \xc3\xa9t\xc3\xa9\nname:\ttrain\n"); err != nil {
		t.Error(err)
	}
	sample, _ := demoWith(t, nil)
	vm := string(must(sample.ReadFile("/etc/pve/qemu-server/131.conf")))
	h, inv := demoWith(t, map[string]string{"etc/pve/nodes/kpro6/qemu-server/131.conf": strings.Replace(vm, "cores: 32", "cores: 3\x002", 1)})
	d := vfio(t, "numa:1")
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Sync(h, inv, p, d, SyncOptions{}); err == nil || !strings.Contains(err.Error(), "131.conf:") || !strings.Contains(err.Error(), "is not text") {
		t.Errorf("sync over a damaged VM config: %v", err)
	}
}

// A VM runs while its pid file is there, a container while its cgroup is.
func TestRunning(t *testing.T) {
	rc := newRefCase(t)
	if Running(rc.h, QEMU, 131) || Running(rc.h, LXC, 129) || Running(rc.h, "other", 131) {
		t.Fatal("a guest without its files runs")
	}
	for _, p := range []string{"run/qemu-server/131.pid", "sys/fs/cgroup/lxc/129/cgroup.procs"} {
		full := filepath.Join(rc.root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !Running(rc.h, QEMU, 131) || !Running(rc.h, LXC, 129) || Running(rc.h, QEMU, 129) {
		t.Error("a guest with its files does not run")
	}
}
