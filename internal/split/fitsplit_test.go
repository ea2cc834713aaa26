package split

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/docs"
	"github.com/gpusplit/gpusplit/internal/pci"

	"github.com/gpusplit/gpusplit/internal/plan"
)

// fit's desired state: none on a host without a file, the reference split for the
// demo's sample host, the host's own when it has one, and --config over both; a file
// that cannot be read or parsed is an error.
func TestFitSplit(t *testing.T) {
	root, h := openSample(t)
	if s, err := FitSplit(h, "", false); s != nil || err != nil {
		t.Errorf("no file: %+v %v", s, err)
	}
	s, err := FitSplit(h, "", true)
	if err != nil || s == nil || s.Name != DemoConfig || !s.Demo || len(s.File.Groups) == 0 {
		t.Fatalf("the demo: %+v %v", s, err)
	}
	// A --config that is missing is an error, on a host without a file too.
	var in *plan.InputError
	if _, err = FitSplit(h, filepath.Join(t.TempDir(), "none.toml"), true); !errors.As(err, &in) || in.Input != "config" {
		t.Errorf("a missing --config: %v", err)
	}
	const text = "[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\nvms = [131]\n"
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(plan.DefaultConfig)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, plan.DefaultConfig), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err = FitSplit(h, "", true); err != nil || s.Name != plan.DefaultConfig || s.Demo || len(s.File.Groups) != 1 {
		t.Errorf("the host's file: %+v %v", s, err)
	}
	mine := writeConfig(t, text+"\n[[group]]\nname = \"more\"\nselect = [\"numa:0\"]\ndriver = \"nvidia\"\n")
	if s, err = FitSplit(h, mine, true); err != nil || s.Name != mine || s.Demo || len(s.File.Groups) != 2 {
		t.Errorf("--config: %+v %v", s, err)
	}
	if _, err = FitSplit(h, writeConfig(t, "[[group]]\nnope = 1\n"), false); err == nil {
		t.Error("a file that does not parse is read")
	}
}

// The reference split's model, named relative to the file's directory, is worked out on
// the GPUs its group keeps; a model that cannot be read is worded by the caller's
// advice in its entry; a --vfio split names no model.
func TestModels(t *testing.T) {
	_, h := openSample(t)
	model, err := filepath.Abs("../../testdata/models/qwen3.5-397b-a17b-nvfp4-like")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(model, filepath.Join(dir, "m")); err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(docs.SplitTOML, `model = "/tank/models/Qwen3.5-397B-A17B-NVFP4"`, `model = "m"`, 1)
	config := filepath.Join(dir, "split.toml")
	if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	measured := func() map[pci.Address]int64 { return nil }
	advice := func(err error) error { return fmt.Errorf("%w; advice", err) }
	pl, err := Load(h, Source{Config: config})
	if err != nil {
		t.Fatal(err)
	}
	ms := pl.Models(measured, advice)
	if len(ms) != 1 || ms[0].Group != "inference" || ms[0].Verdict != "does not fit" || len(ms[0].GPUs) != 4 || ms[0].Error != "" {
		t.Fatalf("the reference model: %+v", ms)
	}
	if err := os.Remove(filepath.Join(dir, "m")); err != nil {
		t.Fatal(err)
	}
	if ms = pl.Models(measured, advice); len(ms) != 1 || ms[0].Err == nil || ms[0].Error != ms[0].Err.Error()+"; advice" {
		t.Errorf("a model that cannot be read: %+v", ms)
	}
	if pl, err = Load(h, Source{VFIO: []string{"numa:1"}}); err != nil || pl.Models(measured, advice) != nil {
		t.Errorf("--vfio: %v", err)
	}
}
