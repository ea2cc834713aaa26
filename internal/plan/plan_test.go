package plan

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/proc"
	"github.com/gpusplit/gpusplit/internal/samplehost"
	"github.com/gpusplit/gpusplit/internal/testutils/fakehost"
)

func demo(t *testing.T) *inventory.Inventory {
	t.Helper()
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func choices(t *testing.T, flags ...string) [][]pci.Selector {
	t.Helper()
	var out [][]pci.Selector
	for _, f := range flags {
		sels, err := pci.ParseSelectors(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sels)
	}
	return out
}

func moves(ms []Move) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s %s %s>%s", m.Device, m.Role, m.From, DriverText(m.To)))
	}
	return out
}

// The reference case: --vfio numa:1 moves exactly the four NUMA-1 GPUs and their audio
// functions; the NUMA-0 GPUs stay on nvidia.
func TestDemoVFIONUMA1(t *testing.T) {
	inv := demo(t)
	p, err := Make(inv, ForVFIO(choices(t, "numa:1")))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, bus := range []string{"81", "91", "e1", "f1"} {
		want = append(want,
			"0000:"+bus+":00.0 gpu nvidia>vfio-pci",
			"0000:"+bus+":00.1 function snd_hda_intel>vfio-pci")
	}
	if got := moves(p.Moves); !slices.Equal(got, want) {
		t.Errorf("moves:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var inPlace []string
	for _, m := range p.InPlace {
		inPlace = append(inPlace, m.Device.String())
	}
	if want := []string{"0000:01:00.0", "0000:01:00.1", "0000:11:00.0", "0000:11:00.1", "0000:61:00.0", "0000:61:00.1", "0000:71:00.0", "0000:71:00.1"}; !slices.Equal(inPlace, want) {
		t.Errorf("in place %v, want %v", inPlace, want)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("warnings %v", p.Warnings)
	}
	// The moves of each GPU form one group: the unit that moves together.
	if g := p.Groups(); len(g) != 4 || len(g[0]) != 2 || g[0][0].IOMMUGroup != 72 {
		t.Errorf("groups %v", g)
	}
	// Holders travel with the GPU's move, so apply can refuse.
	if len(p.Moves[0].Holders) != 2 {
		t.Errorf("holders of 81:00.0: %+v", p.Moves[0].Holders)
	}

	// Once there, a second run plans nothing.
	for _, g := range inv.GPUs {
		if g.NUMANode == 1 {
			g.Driver, g.DriverOverride = VFIO, VFIO
			for _, f := range g.Functions {
				f.Driver, f.DriverOverride = VFIO, VFIO
			}
		}
	}
	again, err := Make(inv, ForVFIO(choices(t, "numa:1")))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Empty() || len(again.InPlace) != 16 {
		t.Errorf("second plan: %v moves, %d in place", moves(again.Moves), len(again.InPlace))
	}

	// And going back returns the GPUs to nvidia and the audio to the kernel's choice.
	back, err := Make(inv, Desired{})
	if err != nil {
		t.Fatal(err)
	}
	if got := moves(back.Moves); len(got) != 8 || got[0] != "0000:81:00.0 gpu vfio-pci>nvidia" || got[1] != "0000:81:00.1 function vfio-pci>its default driver" {
		t.Errorf("back: %v", got)
	}
}

func TestChoicesAddUp(t *testing.T) {
	p, err := Make(demo(t), ForVFIO(choices(t, "numa:1,count:2", "0000:01:00.0")))
	if err != nil {
		t.Fatal(err)
	}
	var gpus []string
	for _, m := range p.Moves {
		if m.Role == RoleGPU {
			gpus = append(gpus, m.Device.String())
		}
	}
	if want := []string{"0000:01:00.0", "0000:81:00.0", "0000:91:00.0"}; !slices.Equal(gpus, want) {
		t.Errorf("GPUs moved %v, want %v", gpus, want)
	}
	// Both sides now straddle the two nodes.
	if len(p.Warnings) != 2 || !strings.Contains(p.Warnings[0], "vfio-pci are on NUMA nodes 0, 1") || !strings.Contains(p.Warnings[1], "nvidia are on NUMA nodes 0, 1") {
		t.Errorf("warnings %v, want one per side spanning nodes 0 and 1", p.Warnings)
	}
}

// hostWithSharedGroups: GPU A shares its group with a NIC; GPUs B and C share one group.
func hostWithSharedGroups(t *testing.T) *inventory.Inventory {
	t.Helper()
	h, err := fakehost.SharedGroups().Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func TestGroupRules(t *testing.T) {
	inv := hostWithSharedGroups(t)
	// A GPU whose group holds a NIC nobody selected is refused...
	_, err := Make(inv, ForVFIO(choices(t, "0000:01:00.0")))
	if err == nil || !strings.Contains(err.Error(), "IOMMU group 1") || !strings.Contains(err.Error(), "0000:01:01.0") || !strings.Contains(err.Error(), "allow_shared_groups") {
		t.Errorf("shared group: %v", err)
	}
	// ...unless allowed: then the NIC goes along, the bridge stays.
	d := ForVFIO(choices(t, "0000:01:00.0"))
	d.AllowSharedGroups = true
	p, err := Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	if got := moves(p.Moves); !slices.Equal(got, []string{"0000:01:00.0 gpu nvidia>vfio-pci", "0000:01:01.0 group member igb>vfio-pci"}) {
		t.Errorf("allowed shared group: %v", got)
	}
	// Two GPUs in one group cannot be split.
	_, err = Make(inv, ForVFIO(choices(t, "0000:00:02.0")))
	var want = "would split IOMMU group 2"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "0000:00:03.0") {
		t.Errorf("split group: %v", err)
	}
	// Together they go.
	if _, err := Make(inv, ForVFIO(choices(t, "group:2"))); err != nil {
		t.Errorf("whole group: %v", err)
	}
}

func TestMakeErrors(t *testing.T) {
	inv := demo(t)
	cases := []struct {
		d    Desired
		want string
	}{
		{ForVFIO(choices(t, "numa:7")), "vfio: selector numa:7 matches no GPU"},
		{ForVFIO(choices(t, "0000:99:00.0")), "; there is no PCI device 0000:99:00.0 on this host"},
		// The NIC the user named: said what it is, and how to count it as a GPU.
		{ForVFIO(choices(t, "0000:02:00.0")), "; 0000:02:00.0 is Ethernet Controller X710 for 10GBASE-T (class 0x020000, driver i40e)"},
		{Desired{Targets: []Target{{Name: "vms", Choices: choices(t, "numa:9")}}}, `group "vms": selector numa:9`},
		{Desired{Targets: []Target{{Name: "a", Choices: choices(t, "numa:0"), Driver: VFIO}, {Name: "b", Choices: choices(t, "count:1"), Driver: "nvidia"}}}, "both group"},
		{Desired{Targets: []Target{{Name: "empty"}}}, "selects no GPUs"},
	}
	for _, c := range cases {
		if _, err := Make(inv, c.d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.d, err, c.want)
		}
	}
	// A choice of the command line fails as its input, and a device that is no GPU as
	// such: the command line words them with its flags.
	_, err := Make(inv, ForVFIO(choices(t, "0000:02:00.0")))
	var in *InputError
	var nag *NotAGPUError
	if !errors.As(err, &in) || in.Input != "vfio" || !errors.As(err, &nag) || nag.Device.String() != "0000:02:00.0" {
		t.Errorf("a NIC chosen: %v", err)
	}
	if _, err := Make(&inventory.Inventory{Root: "x", Tree: &pci.Tree{}}, ForVFIO(nil)); err == nil || !strings.Contains(err.Error(), "no GPUs") {
		t.Errorf("no GPUs: %v", err)
	}
}

// desiredOf parses a split.toml and turns it into the desired state.
func desiredOf(t *testing.T, text string) (*File, Desired) {
	t.Helper()
	f, err := ParseFile("split.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.Desired()
	if err != nil {
		t.Fatal(err)
	}
	return f, d
}

func TestConfigGroups(t *testing.T) {
	_, d := desiredOf(t, `
devices = "10de:2bb1"
rest = "keep"

[[group]]
name = "inference"
select = ["numa:0"]
driver = "nvidia"
mapping = "pro6000"
containers = [129]

[[group]]
name = "vms"
select = ["numa:1"]
driver = "vfio-pci"
mapping = "pro6000-vm"
vms = [131]
`)
	p, err := Make(demo(t), d)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 8 || p.Moves[0].Target != "vms" || len(p.InPlace) != 8 || p.InPlace[0].Target != "inference" {
		t.Errorf("moves %v, in place %v", moves(p.Moves), moves(p.InPlace))
	}
}

// A pool's GPUs belong on their resting driver unless a running VM holds them: then on
// vfio-pci, with their functions, marked with the VM.
func TestPool(t *testing.T) {
	_, d := desiredOf(t, `
[[group]]
name = "inference"
select = ["numa:0"]
[[pool]]
name = "shared"
select = ["numa:1"]
mapping = "pro6000-numa1"
containers = [129]
vms = [131]
`)
	if len(d.Targets) != 2 || !d.Targets[1].Pool || d.Targets[0].Pool {
		t.Fatalf("targets %+v", d.Targets)
	}
	inv := demo(t)
	at := func(a string) pci.Address {
		p, err := pci.ParseAddress(a)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name    string
		holding map[pci.Address]int
		moves   int // of the eight NUMA-1 devices, all on nvidia or snd_hda_intel now
		heldBy  map[string]int
	}{
		{"at rest", nil, 0, map[string]int{"0000:81:00.0": 0, "0000:81:00.1": 0}},
		{"one held", map[pci.Address]int{at("0000:81:00.0"): 131}, 2, map[string]int{"0000:81:00.0": 131, "0000:81:00.1": 131, "0000:91:00.0": 0}},
		// A reservation of a group's GPU does not make it a pool's.
		{"group GPU reserved", map[pci.Address]int{at("0000:01:00.0"): 131}, 0, map[string]int{"0000:01:00.0": 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d.Holding = c.holding
			p, err := Make(inv, d)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Moves) != c.moves {
				t.Errorf("moves %v", moves(p.Moves))
			}
			for _, m := range append(p.Moves, p.InPlace...) {
				want, ok := c.heldBy[m.Device.String()]
				if !ok {
					continue
				}
				if m.HeldBy != want {
					t.Errorf("%s held by %d, want %d", m.Device, m.HeldBy, want)
				}
				if wantTo := map[bool]string{true: VFIO, false: m.To}[want != 0]; m.To != wantTo {
					t.Errorf("%s goes to %s", m.Device, m.To)
				}
			}
		})
	}
}

func TestParseFileErrors(t *testing.T) {
	cases := []struct {
		name, text string
		line, col  int
		want       string
	}{
		{"syntax", "[[group]]\nname = \"a\nselect = []\n", 2, 0, "new lines"},
		{"unknown key", "[[group]]\nname = \"a\"\nselekt = [\"numa:1\"]\n", 3, 1, "unknown key"},
		{"bad selector", "[[group]]\nname = \"vms\"\nselect = [\"numa:x\"]\n", 3, 11, "numa:x"},
		{"wrong type", "[[group]]\nname = \"vms\"\nselect = \"numa:1\"\n", 3, 0, ""},
		{"no groups", "devices = \"10de:2bb1\"\n", 0, 0, "no [[group]] and no [[pool]]"},
		{"pool resting on vfio-pci", "[[pool]]\nname = \"p\"\nselect = [\"numa:1\"]\nresting = \"vfio-pci\"\n", 4, 11, `pool "p": resting = "vfio-pci"`},
		{"pool VMs without a mapping", "[[pool]]\nname = \"p\"\nselect = [\"numa:1\"]\nvms = [131]\n", 4, 1, "give it mapping"},
		{"pool and group of one name", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\n[[pool]]\nname = \"a\"\nselect = [\"numa:1\"]\n", 2, 8, "a group and a pool are both named"},
		{"pool key in a group", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\nresting = \"nvidia\"\n", 4, 1, "unknown key"},
		{"pool VM id too low", "[[pool]]\nname = \"p\"\nselect = [\"numa:1\"]\nmapping = \"pool1\"\nvms = [42]\n", 5, 8, `pool "p": 42 is not a Proxmox VM id`},
		{"no select", "[[group]]\nname = \"vms\"\n", 2, 8, "no select"},
		{"twice", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\n[[group]]\nname = \"a\"\nselect = [\"numa:1\"]\n", 2, 8, "a group and a group are both named"},
		{"bad rest", "rest = \"all\"\n[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\n", 1, 1, "rest"},
		{"no name", "[[group]]\nselect = [\"numa:0\"]\n", 1, 1, "no name"},
		{"driver with a slash", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\ndriver = \"../../x\"\n", 4, 10, `driver "../../x" is not a driver name`},
		{"driver with a newline", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\ndriver = \"vfio-pci\\n\"\n", 4, 10, "white space"},
		{"driver too long", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\ndriver = \"" + strings.Repeat("x", 65) + "\"\n", 4, 10, "longer than 64"},
		{"mapping with a space", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\nmapping = \"pro 6000\"\n", 4, 11, "not a Proxmox mapping id"},
		{"mapping of one letter", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\nmapping = \"p\"\n", 4, 11, "not a Proxmox mapping id"},
		{"mapping from a digit", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\nmapping = \"6000\"\n", 4, 11, "not a Proxmox mapping id"},
		{"VM id too low", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\nvms = [131, 99]\n", 4, 13, "99 is not a Proxmox VM id"},
		{"container id negative", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\ncontainers = [\n  # the inference server\n  -1,\n]\n", 6, 3, "-1 is not a Proxmox container id"},
		{"container and VM", "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\ncontainers = [129]\n[[group]]\nname = \"b\"\nselect = [\"numa:1\"]\nvms = [129]\n", 8, 8, "129 is named both as a container and as a VM"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseFile("split.toml", []byte(c.text))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a ConfigError", err)
			}
			if c.line != 0 && ce.Line != c.line || c.col != 0 && ce.Column != c.col {
				t.Errorf("at %d:%d, want %d:%d (%v)", ce.Line, ce.Column, c.line, c.col, err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "split.toml:") {
				t.Errorf("error %q lacks %q", err, c.want)
			}
		})
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add("[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\n")
	f.Add("devices = \"10de:2bb1\"\nrest = \"keep\"\n")
	f.Fuzz(func(t *testing.T, text string) {
		file, err := ParseFile("f", []byte(text))
		if err != nil {
			return
		}
		if _, err := file.Desired(); err != nil {
			t.Fatalf("a file that parses must give a desired state: %v", err)
		}
	})
}

// The documented example parses, and plans the reference split on the sample host.
func TestDocumentedExample(t *testing.T) {
	data, err := os.ReadFile("../../docs/split.toml")
	if err != nil {
		t.Fatal(err)
	}
	f, d := desiredOf(t, string(data))
	p, err := Make(demo(t), d)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 8 || p.Moves[0].Device.String() != "0000:81:00.0" || len(f.Groups) != 2 || f.Groups[1].VMs[0] != 131 {
		t.Errorf("docs/split.toml plans %v", moves(p.Moves))
	}
}

// names is a host's answers for Check: the drivers, guests and mappings it has.
type names struct {
	drivers         map[string]bool
	containers, vms map[int]bool
	mappings        map[string][]string
}

func (n names) Mapping(name string) ([]string, error) {
	if paths, ok := n.mappings[name]; ok {
		return paths, nil
	}
	return nil, fmt.Errorf("no mapping %q", name)
}

func (n names) Driver(name string) error {
	if n.drivers[name] {
		return nil
	}
	return fmt.Errorf("no driver %q", name)
}

func (n names) Container(id int) error {
	if n.containers[id] {
		return nil
	}
	return fmt.Errorf("no container %d", id)
}

func (n names) VM(id int) error {
	if n.vms[id] {
		return nil
	}
	return fmt.Errorf("no VM %d", id)
}

// Check names every name that does not exist, each where it is written; "" and "none"
// are not driver names to look up.
func TestCheckNames(t *testing.T) {
	text := `[[group]]
name = "inference"
select = ["numa:0"]
driver = "nvidai"
containers = [129, 130]

[[group]]
name = "vms"
select = [
  "numa:1",
  "numa:7",
]
driver = "vfio-pci"
vms = [131, 132]

[[group]]
name = "rest"
select = ["0000:99:00.0", "10de:2bb1"]

[[group]]
name = "parked"
select = ["10de:ffff"]
driver = "none"

[[group]]
name = "mapped"
select = ["mapping:pro6000", "mapping:a6000", "mapping:nics"]
`
	f, err := ParseFile("split.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	n := names{drivers: map[string]bool{"vfio-pci": true, "nvidia": true}, containers: map[int]bool{129: true}, vms: map[int]bool{131: true},
		mappings: map[string][]string{"pro6000": {"0000:01:00", "0000:81:00"}, "nics": {"0000:82:00.0"}}}
	err = f.Check(demo(t), n)
	if err == nil {
		t.Fatal("Check found nothing")
	}
	want := []string{
		`split.toml:4:10: group "inference": no driver "nvidai"`,
		`split.toml:5:20: group "inference": no container 130`,
		`split.toml:11:3: group "vms": selector numa:7 matches no GPU`,
		`split.toml:14:13: group "vms": no VM 132`,
		`split.toml:18:11: group "rest": selector 0000:99:00.0 matches no`,
		`split.toml:22:11: group "parked": selector 10de:ffff matches no`,
		`split.toml:27:30: group "mapped": selector mapping:a6000: no mapping "a6000"`,
		`split.toml:27:47: group "mapped": selector mapping:nics matches no GPU: on this node it holds 0000:82:00.0`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("Check found %d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d = %q, want it to start with %q", i+1, lines[i], w)
		}
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("Check's error holds no ConfigError: %T", err)
	}

	// The same names, all there: nothing to say.
	ok := names{drivers: map[string]bool{"vfio-pci": true, "nvidia": true}, containers: map[int]bool{129: true}, vms: map[int]bool{131: true}}
	f, err = ParseFile("docs/split.toml", []byte("[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\ndriver = \"nvidia\"\ncontainers = [129]\n[[group]]\nname = \"b\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\nvms = [131]"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Check(demo(t), ok); err != nil {
		t.Errorf("Check of names that exist: %v", err)
	}
}

// On a host without GPUs the selectors are left to Make, which says there is nothing
// to split, rather than each saying it matches none of zero GPUs.
func TestCheckNoGPUs(t *testing.T) {
	f, err := ParseFile("split.toml", []byte("[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	inv := &inventory.Inventory{Root: "x", Tree: &pci.Tree{}}
	if err := f.Check(inv, names{}); err != nil {
		t.Errorf("Check without GPUs: %v", err)
	}
	d, _ := f.Desired()
	if _, err := Make(inv, d); err == nil || !strings.Contains(err.Error(), "no GPUs on x") {
		t.Errorf("Make without GPUs: %v", err)
	}
}

// Planned again under the lock, a host that changed since the plan was shown says how:
// each kind of change named, and nothing for the same host.
func TestChanged(t *testing.T) {
	gpu, _ := pci.ParseAddress("0000:81:00.0")
	audio, _ := pci.ParseAddress("0000:81:00.1")
	other, _ := pci.ParseAddress("0000:91:00.0")
	shown := &Plan{Moves: []Move{{Device: gpu, From: "nvidia", To: VFIO}, {Device: audio, From: "snd_hda_intel", To: VFIO}}}
	same := &Plan{Moves: slices.Clone(shown.Moves)}
	if got := Changed(shown, same); len(got) != 0 {
		t.Errorf("the same host: %v", got)
	}
	moved := &Plan{Moves: []Move{{Device: audio, From: "snd_hda_intel", To: VFIO}, {Device: other, From: "", To: VFIO}}, InPlace: []Move{{Device: gpu, From: VFIO, To: VFIO}}}
	got := Changed(shown, moved)
	want := []string{"0000:81:00.0 no longer needs to move (it is on vfio-pci now)", "0000:91:00.0 now needs to move too (no driver → vfio-pci)"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	held := &Plan{Moves: slices.Clone(shown.Moves)}
	held.Moves[0].Holders = []holders.Holder{{Kind: holders.KindVM, Process: proc.Process{VM: 131}, Name: "hostpci0"}}
	held.Moves[1].From = "vfio-pci"
	if got := Changed(shown, held); len(got) != 2 || !strings.Contains(got[0], "0000:81:00.0 is held by") || got[1] != "0000:81:00.1 is on vfio-pci now, not on snd_hda_intel" {
		t.Errorf("held and moved: %q", got)
	}
}

// GPUDrivers gives where each GPU that moves goes, and nothing of the GPUs that stay or
// of the functions that follow them: what topo's pictures colour.
func TestGPUDrivers(t *testing.T) {
	inv := demo(t)
	p, err := Make(inv, ForVFIO(choices(t, "numa:1")))
	if err != nil {
		t.Fatal(err)
	}
	got := p.GPUDrivers()
	want := map[pci.Address]string{}
	for _, g := range inv.GPUs {
		if g.NUMANode == 1 {
			want[g.Address] = VFIO
		}
	}
	if len(want) != 4 || !maps.Equal(got, want) {
		t.Errorf("GPUDrivers %v, want %v", got, want)
	}
}
