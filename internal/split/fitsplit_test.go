package split

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
	var in *InputError
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
