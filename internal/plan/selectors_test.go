package plan

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The forms of a device that users hold each plan the move of the card that inventory
// and topo label GPU4: Proxmox's slot (pci.cfg paths, hostpci lines), that label, and
// nvidia-smi's bus id.
func TestSelectorFormsUsersHold(t *testing.T) {
	inv := demo(t)
	if a := inv.GPUs[4].Address.String(); a != "0000:81:00.0" {
		t.Fatalf("the inventory's GPU4 is %s", a)
	}
	want := []string{"0000:81:00.0 gpu nvidia>vfio-pci", "0000:81:00.1 function snd_hda_intel>vfio-pci"}
	for _, sel := range []string{"0000:81:00", "81:00", "GPU4", "gpu:4", "00000000:81:00.0"} {
		p, err := Make(inv, ForVFIO(choices(t, sel)))
		if err != nil {
			t.Errorf("--vfio %s: %v", sel, err)
			continue
		}
		if got := moves(p.Moves); !slices.Equal(got, want) {
			t.Errorf("--vfio %s moves %v, want %v", sel, got, want)
		}
	}
	// A number past the last says which there are.
	if _, err := Make(inv, ForVFIO(choices(t, "GPU8"))); err == nil || !strings.Contains(err.Error(), "vfio: selector GPU8 matches no GPU (there are 8 GPUs, GPU0 (0000:01:00.0) to GPU7 (0000:f1:00.0)") {
		t.Errorf("--vfio GPU8: %v", err)
	}
	// A slot that is no GPU's names what it is.
	if _, err := Make(inv, ForVFIO(choices(t, "0000:82:00"))); err == nil || !strings.Contains(err.Error(), "0000:82:00.0 is MT2910 Family [ConnectX-7]") {
		t.Errorf("--vfio 0000:82:00: %v", err)
	}
}

// A desired state's mapping: selectors are looked up before it is planned, each choice
// of each target; the lookup's error names the target.
func TestDesiredResolveMappings(t *testing.T) {
	lookup := func(name string) ([]string, error) {
		if name == "pro6000" {
			return []string{"0000:81:00", "0000:91:00", "0000:01:00"}, nil
		}
		return nil, errors.New("no mapping " + name)
	}
	d := ForVFIO(choices(t, "mapping:pro6000,numa:1", "GPU7"))
	if _, err := Make(demo(t), d); err == nil || !strings.Contains(err.Error(), "vfio: selector mapping:pro6000 names a Proxmox mapping, which is not read here") {
		t.Errorf("Make before ResolveMappings: %v", err)
	}
	if err := d.ResolveMappings(lookup); err != nil {
		t.Fatal(err)
	}
	p, err := Make(demo(t), d)
	if err != nil {
		t.Fatal(err)
	}
	var gpus []string
	for _, m := range p.Moves {
		if m.Role == RoleGPU {
			gpus = append(gpus, m.Device.String())
		}
	}
	if want := []string{"0000:81:00.0", "0000:91:00.0", "0000:f1:00.0"}; !slices.Equal(gpus, want) {
		t.Errorf("GPUs moved %v, want %v", gpus, want)
	}

	_, d2 := desiredOf(t, "[[group]]\nname = \"vms\"\nselect = [\"numa:0\", \"mapping:gone\"]\ndriver = \"vfio-pci\"\n")
	if err := d2.ResolveMappings(lookup); err == nil || err.Error() != `group "vms": selector mapping:gone: no mapping gone` {
		t.Errorf("ResolveMappings of an unknown mapping: %v", err)
	}
}
