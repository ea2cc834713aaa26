package fit

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/docs"
	"github.com/gpusplit/gpusplit/internal/hfmodel"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// TestRun: the serving conditions come from the command line, else the guest's group,
// else the model; a guest gets a set now and one after the split; the doctor's findings,
// a VM without a gpudirect clique and NoP2P each turn peer-to-peer off, with why.
func TestRun(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := hfmodel.Load("../../testdata/models/qwen3.5-397b-a17b-nvfp4-like")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := ParseKVDType("auto", m)
	if err != nil {
		t.Fatal(err)
	}
	file, err := plan.ParseFile("docs/split.toml", []byte(docs.SplitTOML))
	if err != nil {
		t.Fatal(err)
	}
	split := &Split{Name: "docs/split.toml", File: file, Demo: true}
	request := func() Request {
		return Request{
			Root: "/", Model: m, Inventory: inv, Engine: VLLM, KV: kv, Split: split,
			P2PChecks:  []string{"p2p-topology"},
			P2PAgainst: func() ([]string, error) { return nil, nil },
			Now: func(g Guest) (GuestNow, error) {
				return GuestNow{GPUs: inv.GPUs, NoClique: g.Kind == VM}, nil
			},
			Measured: func() map[pci.Address]int64 { return nil },
		}
	}

	r := request()
	r.Guest = &Guest{Container, 129}
	rep, err := Run(r)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Context != 262144 || rep.Concurrency != 16 || rep.ServingFrom != `group "inference" of docs/split.toml` {
		t.Errorf("serving %d × %d from %q", rep.Concurrency, rep.Context, rep.ServingFrom)
	}
	if len(rep.Sets) != 2 || len(rep.Sets[0].GPUs) != 8 || len(rep.Sets[1].GPUs) != 4 || rep.Sets[0].Recommended != "TP2×PP2" || rep.Sets[1].Recommended != "" {
		t.Fatalf("sets %+v", rep.Sets)
	}
	if !strings.HasSuffix(rep.Sets[1].From, "(the reference split: the sample host carries no "+plan.DefaultConfig+")") {
		t.Errorf("from %q", rep.Sets[1].From)
	}
	if s := rep.Sets[0]; !s.P2P || s.P2PWhy != "the doctor's p2p-topology found nothing against peer-to-peer" || *s.Container != 129 || s.VM != nil {
		t.Errorf("set 0: p2p %v %q", s.P2P, s.P2PWhy)
	}

	// The command line comes before the group; no guest, no group, no split.
	r = request()
	r.Context, r.ContextSet = 4096, true
	r.P2PAgainst = func() ([]string, error) { return []string{"IOMMU page faults", "ACS"}, nil }
	if rep, err = Run(r); err != nil {
		t.Fatal(err)
	}
	if rep.Context != 4096 || rep.Concurrency != 1 || rep.ServingFrom != "the command line" || len(rep.Sets) != 1 || rep.Sets[0].Label != "this host's GPUs" {
		t.Errorf("host: %d × %d from %q, %d sets", rep.Concurrency, rep.Context, rep.ServingFrom, len(rep.Sets))
	}
	if s := rep.Sets[0]; s.P2P || s.P2PWhy != "the doctor advises against it: IOMMU page faults; ACS" || s.Container != nil {
		t.Errorf("doctor against: %v %q", s.P2P, s.P2PWhy)
	}

	// A VM without a clique has no peer access; NoP2P says so for any set.
	r = request()
	r.Guest = &Guest{VM, 131}
	if rep, err = Run(r); err != nil {
		t.Fatal(err)
	}
	if s := rep.Sets[1]; s.P2P || !strings.HasSuffix(s.P2PWhy, "(gpusplit pve p2p-clique --vm 131)") || *s.VM != 131 {
		t.Errorf("VM: %v %q", s.P2P, s.P2PWhy)
	}
	r.NoP2P = true
	if rep, err = Run(r); err != nil || rep.Sets[0].P2PWhy != "--no-p2p" {
		t.Errorf("NoP2P: %v", err)
	}

	// What the callers read fails the run; a model without a context is ErrNoContext.
	r = request()
	r.Guest = &Guest{Container, 999}
	r.Now = func(Guest) (GuestNow, error) { return GuestNow{}, errors.New("no container 999") }
	if _, err := Run(r); err == nil || err.Error() != "no container 999" {
		t.Errorf("Now failing: %v", err)
	}
	r = request()
	r.Split = nil
	noContext := *m
	noContext.MaxContext = 0
	r.Model = &noContext
	if _, err := Run(r); !errors.Is(err, ErrNoContext) {
		t.Errorf("no context: %v", err)
	}

	// A GPU the table does not know, without a figure, is an UnknownGPUError; a model
	// fit cannot size is ErrUnsized. Neither names a flag: the caller says what to do.
	sels, _ := pci.ParseSelectors("class:0x0200")
	nics, err := inventory.Build(h, sels)
	if err != nil {
		t.Fatal(err)
	}
	r = request()
	r.Inventory = nics
	var unknown *UnknownGPUError
	if _, err := Run(r); !errors.As(err, &unknown) || unknown.Vendor != 0x8086 || strings.Contains(err.Error(), "--") {
		t.Errorf("unknown GPU: %v", err)
	}
	r = request()
	unsized := *m
	unsized.Missing = []string{"num_key_value_heads"}
	r.Model = &unsized
	if _, err := Run(r); !errors.Is(err, ErrUnsized) || strings.Contains(err.Error(), "--") {
		t.Errorf("unsized: %v", err)
	}
}

// TestGroupModels: a group's model is worked out on what the group keeps; one not on
// this machine is said in its entry.
func TestGroupModels(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	file, err := plan.ParseFile("docs/split.toml", []byte(docs.SplitTOML))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := file.Desired()
	p, err := plan.Make(inv, d)
	if err != nil {
		t.Fatal(err)
	}
	measured := func() map[pci.Address]int64 { return nil }
	got := GroupModels(file, inv, p, "", measured)
	if len(got) != 1 || !strings.Contains(got[0].Error, "is not on this machine") || len(got[0].GPUs) != 4 || got[0].Concurrency != 16 {
		t.Fatalf("%+v", got)
	}
	for i, grp := range file.Groups {
		if grp.Model != "" {
			file.Groups[i].Model = "qwen3.5-397b-a17b-nvfp4-like"
		}
	}
	got = GroupModels(file, inv, p, "../../testdata/models", measured)
	// After the split the 4 GPUs hold 15 of the 16 sequences at best: it does not fit,
	// and the reason names the closest placement.
	if len(got) != 1 || got[0].Error != "" || got[0].Recommended != "" || got[0].Verdict != "does not fit" || !strings.Contains(got[0].Why, "the most is 15, at TP2×PP2") {
		t.Errorf("%+v", got)
	}
}
