package persist

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// TestPlanBoot: the boot files for a split name the desired state by its absolute path
// and the installed binary; a snapshot's binary is not checked; a split that pins
// nothing is refused.
func TestPlanBoot(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	sels, _ := pci.ParseSelectors("numa:1")
	p, err := plan.Make(inv, plan.ForVFIO([][]pci.Selector{sels}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := PlanBoot(h, p, inv.Tree, BootOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Config != plan.DefaultConfig || b.Binary.Path != DefaultBinary || b.Checked || b.Refused != nil || len(b.Files) != len(Paths) {
		t.Errorf("default: %+v", b)
	}
	if r := b.Report(); r.Checked || r.OK || r.Problems == nil || r.Path != DefaultBinary {
		t.Errorf("report %+v", r)
	}
	b, err = PlanBoot(h, p, inv.Tree, BootOptions{Config: "split.toml", Binary: "/usr/bin/gpusplit"})
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("split.toml")
	if b.Config != abs || b.Binary.Path != "/usr/bin/gpusplit" || !strings.Contains(b.Files[len(b.Files)-1].Content, "/usr/bin/gpusplit") {
		t.Errorf("named: %s, %s", b.Config, b.Binary.Path)
	}
	if _, err := PlanBoot(h, &plan.Plan{}, inv.Tree, BootOptions{}); !errors.Is(err, ErrNothingToPin) {
		t.Errorf("nothing to pin: %v", err)
	}
	// A refused binary's problems are the report's.
	refused := &Boot{Binary: Binary{Path: "x", Resolved: "x"}, Checked: true, Refused: &BinaryError{"x", []string{"a", "b"}}}
	if r := refused.Report(); r.OK || len(r.Problems) != 2 {
		t.Errorf("refused: %+v", r)
	}
}

// TestFileStates and InitramfsAdvice read what is installed under a root; Run runs
// nothing under a root other than /.
func TestFileStates(t *testing.T) {
	dir := t.TempDir()
	for p, c := range map[string]string{UdevRule: "same", Modprobe: "old", "/etc/initramfs-tools/modules": "# early\nvfio_pci\n"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := FileStates(h, []File{{Path: UdevRule, Mode: 0o644, Content: "same"}, {Path: Modprobe, Content: "new"}, {Path: Unit, Mode: 0o755}})
	if len(got) != 3 || got[0].State != "installed" || got[0].Mode != "0644" || got[1].State != "different" || got[2].State != "absent" || got[2].Mode != "0755" {
		t.Errorf("%+v", got)
	}
	if a := InitramfsAdvice(h); len(a) != 1 || !strings.Contains(a[0], "loads vfio_pci early") {
		t.Errorf("advice %v", a)
	}
	if cs := Run(h, [][]string{{"false"}}); len(cs) != 1 || cs[0].Ran || cs[0].Command != "false" {
		t.Errorf("run under a root: %+v", cs)
	}
}

// TestVFIOConfig: the file install writes for --vfio is a desired state plan reads back
// as one vfio-pci group of the selectors, with devices and allow_shared_groups.
func TestVFIOConfig(t *testing.T) {
	text := VFIOConfig("10de:2bb1", []string{"numa:1", "0000:01:00.0"}, true)
	if !strings.HasPrefix(text, "# Written by gpusplit from --vfio numa:1 --vfio 0000:01:00.0\n") {
		t.Errorf("header of\n%s", text)
	}
	f, err := plan.ParseFile("split.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if f.Devices != "10de:2bb1" || !f.AllowSharedGroups || len(f.Groups) != 1 || f.Groups[0].Driver != plan.VFIO || len(f.Groups[0].Select) != 2 {
		t.Errorf("%+v", f)
	}
	if plain := VFIOConfig("", []string{"numa:1"}, false); strings.Contains(plain, "devices") || strings.Contains(plain, "allow_shared") {
		t.Errorf("no devices, no sharing:\n%s", plain)
	}
}
