package split

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/plan"
)

func openSample(t *testing.T) (string, *host.Host) {
	t.Helper()
	root := sample(t)
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, h
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "split.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// --vfio's choices plan the reference split; on a Proxmox node the split includes
// Proxmox's files and the boot files unless a flag turns them off; the change of a
// --vfio split carries the desired state file the boot unit applies.
func TestLoadVFIO(t *testing.T) {
	_, h := openSample(t)
	var warned int
	pl, err := Load(h, Source{VFIO: []string{"numa:1"}, Warn: func([]string) { warned++ }})
	if err != nil {
		t.Fatal(err)
	}
	if pl.File != nil || len(pl.Plan.Moves) != 8 || !pl.Desired.SyncProxmox || !pl.Desired.Persist || warned != 1 {
		t.Fatalf("file %v, %d moves, proxmox %v, persist %v, warned %d", pl.File, len(pl.Plan.Moves), pl.Desired.SyncProxmox, pl.Desired.Persist, warned)
	}
	off := false
	if pl, err = Load(h, Source{VFIO: []string{"numa:1"}, Proxmox: &off}); err != nil || pl.Desired.SyncProxmox || !pl.Desired.Persist {
		t.Fatalf("--proxmox=false: %v %+v", err, pl.Desired)
	}
	pl, err = Load(h, Source{VFIO: []string{"numa:1"}, Devices: "10de:2bb1", AllowShared: true})
	if err != nil || !pl.Desired.AllowSharedGroups {
		t.Fatalf("--allow-shared-groups: %v %+v", err, pl.Desired)
	}
	c, err := pl.Change("test")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.BootFiles) == 0 || c.BootFiles[0].Path != plan.DefaultConfig ||
		!strings.Contains(c.BootFiles[0].Content, `devices = "10de:2bb1"`) || !strings.Contains(c.BootFiles[0].Content, "allow_shared_groups = true") {
		t.Errorf("the boot files of a --vfio split: %+v", c.BootFiles)
	}
}

// Each source that cannot be used says which: a choice without a selector, a file that
// cannot be read, and no file on a host that has none.
func TestLoadInputErrors(t *testing.T) {
	_, h := openSample(t)
	var in *plan.InputError
	_, err := Load(h, Source{VFIO: []string{","}})
	if !errors.As(err, &in) || in.Input != "vfio" || !errors.Is(err, plan.ErrNoSelector) {
		t.Errorf("an empty choice: %v", err)
	}
	_, err = Load(h, Source{Config: filepath.Join(t.TempDir(), "none.toml")})
	if !errors.As(err, &in) || in.Input != "config" || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing --config: %v", err)
	}
	if _, err = Load(h, Source{}); !errors.Is(err, ErrNoDesired) {
		t.Errorf("no file on the host: %v", err)
	}
}

// The host's own file is read when no other is given; its devices say which devices
// count as GPUs unless the command line says otherwise; every name it gives is checked
// before anything is planned; and LoadDesired reads it without planning.
func TestLoadFile(t *testing.T) {
	root, h := openSample(t)
	const text = "devices = \"numa:1\"\nsync_proxmox = false\n\n[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\n"
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(plan.DefaultConfig)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, plan.DefaultConfig), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	pl, err := Load(h, Source{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Name != plan.DefaultConfig || pl.File == nil || pl.Desired.SyncProxmox || !pl.Desired.Persist || len(pl.Inv.GPUs) != 4 || len(pl.Plan.Moves) != 8 {
		t.Fatalf("the host's file: %q %v, proxmox %v, persist %v, %d GPUs, %d moves", pl.Name, pl.File, pl.Desired.SyncProxmox, pl.Desired.Persist, len(pl.Inv.GPUs), len(pl.Plan.Moves))
	}
	// --devices over the file's: the NUMA-0 GPUs alone leave the group's selector none.
	if _, err := Load(h, Source{Devices: "numa:0"}); err == nil || !strings.Contains(err.Error(), "numa:1") {
		t.Errorf("--devices over the file's: %v", err)
	}
	bad := writeConfig(t, strings.Replace(text, "vfio-pci", "vfio_pci", 1))
	if _, err := Load(h, Source{Config: bad}); err == nil || !strings.Contains(err.Error(), `driver "vfio_pci" is not a driver name`) {
		t.Errorf("a misspelt driver: %v", err)
	}
	pl, err = LoadDesired(h, Source{Config: writeConfig(t, text)})
	if err != nil || pl.Plan != nil || pl.File == nil || pl.Inv == nil {
		t.Errorf("LoadDesired: %v %+v", err, pl)
	}
}
