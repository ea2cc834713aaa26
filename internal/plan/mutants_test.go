package plan

import (
	"slices"
	"strings"
	"testing"
)

// rest = "keep" leaves the GPUs no group selects where they are, even on vfio-pci;
// without it they go back to their vendor's driver.
func TestKeepRest(t *testing.T) {
	inv := demo(t)
	for _, g := range inv.GPUs {
		if g.Address.String() == "0000:01:00.0" {
			g.Driver, g.DriverOverride = VFIO, VFIO
		}
	}
	d := ForVFIO(choices(t, "numa:1"))
	d.KeepRest = true
	p, err := Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range append(slices.Clone(p.Moves), p.InPlace...) {
		if m.NUMANode == 0 {
			t.Errorf("rest = keep planned %s (%s>%s)", m.Device, m.From, DriverText(m.To))
		}
	}
	if len(p.Moves) != 8 {
		t.Errorf("moves %v, want the four NUMA-1 GPUs and their functions", moves(p.Moves))
	}
	d.KeepRest = false
	p, err = Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	if got := moves(p.Moves); !slices.Contains(got, "0000:01:00.0 gpu vfio-pci>nvidia") {
		t.Errorf("without rest = keep, 01:00.0 stays on vfio-pci: %v", got)
	}
}

// A device on its default driver with a driver_override left set is not in place: the
// override must be cleared, or the next probe takes it elsewhere.
func TestDoneNeedsOverrideCleared(t *testing.T) {
	for _, c := range []struct {
		m    Move
		done bool
	}{
		{Move{From: "snd_hda_intel", To: Default}, true},
		{Move{From: "snd_hda_intel", Override: VFIO, To: Default}, false},
		{Move{From: VFIO, To: Default}, false},
		{Move{From: "", To: None}, true},
		{Move{From: "nvidia", To: None}, false},
		{Move{From: VFIO, Override: VFIO, To: VFIO}, true},
	} {
		if got := c.m.Done(); got != c.done {
			t.Errorf("%+v: Done() = %v, want %v", c.m, got, c.done)
		}
	}
	inv := demo(t)
	for _, g := range inv.GPUs {
		for _, f := range g.Functions {
			if f.Address.String() == "0000:01:00.1" {
				f.DriverOverride = VFIO // left from an earlier split
			}
		}
	}
	p, err := Make(inv, ForVFIO(choices(t, "numa:1")))
	if err != nil {
		t.Fatal(err)
	}
	if got := moves(p.Moves); !slices.Contains(got, "0000:01:00.1 function snd_hda_intel>its default driver") {
		t.Errorf("01:00.1 with a stale override is not moved: %v", got)
	}
}

// A GPU sent to no driver takes its functions with it: they are left unbound too, not
// handed to the kernel's choice.
func TestFunctionsFollowToNone(t *testing.T) {
	d := Desired{Targets: []Target{{Name: "parked", Choices: choices(t, "numa:1"), Driver: None}}}
	p, err := Make(demo(t), d)
	if err != nil {
		t.Fatal(err)
	}
	got := moves(p.Moves)
	for _, bus := range []string{"81", "91", "e1", "f1"} {
		for _, want := range []string{"0000:" + bus + ":00.0 gpu nvidia>no driver", "0000:" + bus + ":00.1 function snd_hda_intel>no driver"} {
			if !slices.Contains(got, want) {
				t.Errorf("moves lack %q:\n%s", want, strings.Join(got, "\n"))
			}
		}
	}
}

// A group passed through may have members left without a driver: an unbound device does
// not keep the group from vfio-pci, so that is no split.
func TestGroupMemberToNoneIsNoSplit(t *testing.T) {
	inv := hostWithSharedGroups(t)
	d := Desired{Targets: []Target{
		{Name: "vm", Choices: choices(t, "0000:00:02.0"), Driver: VFIO},
		{Name: "parked", Choices: choices(t, "0000:00:03.0"), Driver: None},
	}}
	p, err := Make(inv, d)
	if err != nil {
		t.Fatalf("a group member sent to no driver: %v", err)
	}
	if got, want := moves(p.Moves), []string{"0000:00:02.0 gpu nvidia>vfio-pci", "0000:00:03.0 gpu nvidia>no driver"}; !slices.Equal(got, want) {
		t.Errorf("moves %v, want %v", got, want)
	}
}

// Proxmox's guest ids run from 100 to 999999999, both ends included.
func TestGuestIDBounds(t *testing.T) {
	ok := "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\ncontainers = [100]\nvms = [999999999]\n"
	if _, err := ParseFile("split.toml", []byte(ok)); err != nil {
		t.Errorf("ids 100 and 999999999: %v", err)
	}
	for _, bad := range []string{"containers = [99]", "vms = [1000000000]"} {
		text := "[[group]]\nname = \"a\"\nselect = [\"numa:0\"]\n" + bad + "\n"
		if _, err := ParseFile("split.toml", []byte(text)); err == nil || !strings.Contains(err.Error(), "ids run from 100 to 999999999") {
			t.Errorf("%s: %v, want a refusal", bad, err)
		}
	}
}
