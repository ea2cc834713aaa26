package fit

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/gpusplit/gpusplit/internal/hfmodel"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// Report is the fit of a model on a host's or a guest's GPUs, now and after the split:
// fit's result, and its JSON form (docs/json.md).
type Report struct {
	Host        string      `json:"host"`
	Model       ModelReport `json:"model"`
	Engine      string      `json:"engine"`
	KVDType     string      `json:"kv_dtype"`
	KVDTypeFrom string      `json:"kv_dtype_from"`
	Context     int         `json:"context"`
	Concurrency int         `json:"concurrency"`
	// ServingFrom says where context and concurrency came from.
	ServingFrom string      `json:"serving_from"`
	Sets        []SetReport `json:"sets"`
	Notes       []string    `json:"notes"`
}

// ModelReport is what the model's config.json and safetensors headers say.
type ModelReport struct {
	Path            string `json:"path"`
	Name            string `json:"name"`
	Architecture    string `json:"architecture"`
	ModelType       string `json:"model_type"`
	Attention       string `json:"attention"`
	Layers          int    `json:"layers"`
	FullLayers      int    `json:"full_attention_layers"`
	SlidingLayers   int    `json:"sliding_window_layers"`
	LinearLayers    int    `json:"linear_attention_layers"`
	SlidingWindow   int    `json:"sliding_window"`
	Heads           int    `json:"attention_heads"`
	KVHeads         int    `json:"kv_heads"`
	HeadDim         int    `json:"head_dim"`
	KVLoraRank      int    `json:"kv_lora_rank"`
	RopeDim         int    `json:"qk_rope_head_dim"`
	Experts         int    `json:"experts"`
	ExpertsPerToken int    `json:"experts_per_token"`
	MaxContext      int    `json:"max_context"`
	Quantization    string `json:"quantization"`
	WeightBytes     int64  `json:"weight_bytes"`
	// WeightsSource is "safetensors" (the headers: exact) or "estimate" (config.json's
	// architecture, for a directory without safetensors files); WeightsError the
	// estimate's error as a share of the bytes (hfmodel.EstimateError), 0 when exact.
	WeightsSource       string           `json:"weights_source"`
	WeightsError        float64          `json:"weights_error"`
	MTPBytes            int64            `json:"mtp_bytes"`
	Tensors             int              `json:"tensors"`
	Shards              int              `json:"shards"`
	HeaderOnlyShards    int              `json:"header_only_shards"`
	BytesByDType        map[string]int64 `json:"bytes_by_dtype"`
	KVBytesPerToken     int64            `json:"kv_bytes_per_token"`
	StateBytesPerSeq    int64            `json:"state_bytes_per_sequence"`
	KVBytesPerTokenFrom string           `json:"kv_bytes_per_token_from"`
	Missing             []string         `json:"missing"`
	Notes               []string         `json:"notes"`
}

// SetReport is one set of GPUs (the host's, a guest's now or after the split) and the
// model's placements on it.
type SetReport struct {
	Label     string `json:"label"`
	When      string `json:"when"`
	Container *int   `json:"container"`
	VM        *int   `json:"vm"`
	// From says how the GPUs were found.
	From        string            `json:"from"`
	P2P         bool              `json:"p2p"`
	P2PWhy      string            `json:"p2p_why"`
	GPUs        []GPUReport       `json:"gpus"`
	Placements  []PlacementReport `json:"placements"`
	Recommended string            `json:"recommended"`
	Why         string            `json:"why"`
	Impossible  []string          `json:"impossible"`
	Notes       []string          `json:"notes"`
}

// GPUReport is one GPU of a set, with its memory and where the figure is from.
type GPUReport struct {
	Address    string `json:"address"`
	Name       string `json:"name"`
	NUMANode   *int   `json:"numa_node"`
	Memory     int64  `json:"memory_bytes"`
	MemoryFrom string `json:"memory_from"`
}

// PlacementReport is a Placement's JSON form.
type PlacementReport struct {
	Name               string  `json:"name"`
	TP                 int     `json:"tp"`
	PP                 int     `json:"pp"`
	Replicas           int     `json:"replicas"`
	GPUsPerReplica     int     `json:"gpus_per_replica"`
	WeightBytesPerGPU  int64   `json:"weight_bytes_per_gpu"`
	ReserveBytesPerGPU int64   `json:"reserve_bytes_per_gpu"`
	MemoryFraction     float64 `json:"memory_fraction"`
	KVBytesPerGPU      int64   `json:"kv_bytes_per_gpu"`
	KVBytesPerToken    int64   `json:"kv_bytes_per_token"`
	StateBytesPerSeq   int64   `json:"state_bytes_per_sequence"`
	BytesPerSequence   int64   `json:"bytes_per_sequence"`
	KVTokens           int64   `json:"kv_tokens"`
	Sequences          int64   `json:"sequences"`
	// KVHeadroom is the share of the KV cache left once the sequences asked for are in
	// it, the least over the stages; -1 when there is no cache. The verdict is
	// fit.Judge's of it.
	KVHeadroom          float64       `json:"kv_headroom"`
	Verdict             string        `json:"verdict"`
	Why                 string        `json:"why"`
	Recommended         bool          `json:"recommended"`
	SpansNUMA           bool          `json:"spans_numa"`
	CrossNodeAllReduces int           `json:"cross_node_allreduces"`
	CrossNodeHops       int           `json:"cross_node_hops"`
	Stages              []StageReport `json:"stages"`
	Notes               []string      `json:"notes"`
}

// StageReport is a Stage's JSON form.
type StageReport struct {
	Layers          [2]int   `json:"layers"`
	GPUs            []string `json:"gpus"`
	NUMANodes       []int    `json:"numa_nodes"`
	Memory          int64    `json:"memory_bytes"`
	Weights         int64    `json:"weight_bytes"`
	Reserve         int64    `json:"reserve_bytes"`
	KV              int64    `json:"kv_bytes"`
	KVTokens        int64    `json:"kv_tokens"`
	Sequences       int64    `json:"sequences"`
	BytesPerSeq     int64    `json:"bytes_per_sequence"`
	MemoryFraction  float64  `json:"memory_fraction"`
	FractionFrom    string   `json:"memory_fraction_from"`
	KVBytesPerToken int64    `json:"kv_bytes_per_token"`
}

// Split is the desired state the "after the split" sets come from.
type Split struct {
	Name string
	File *plan.File
	// Demo is set when it is docs/split.toml, for the sample host without a file of its
	// own.
	Demo bool
}

// Request is what Run works on. The model, the inventory and the split are read by the
// caller; what Run needs of the doctor, of Proxmox's configs and of the CUDA driver it
// asks of the functions, when it needs it.
type Request struct {
	// Root is the host's root, for the report.
	Root      string
	Model     *hfmodel.Model
	Inventory *inventory.Inventory
	Engine    Engine
	KV        KVDType
	// MemoryFraction, KVBytesPerToken: as Options'; 0 for the engine's and the model's.
	MemoryFraction  float64
	KVBytesPerToken int64
	// Context and Concurrency are the command line's, ContextSet and ConcurrencySet say
	// it gave them; else the guest's group gives them, else the model's
	// max_position_embeddings and 1.
	Context, Concurrency       int
	ContextSet, ConcurrencySet bool
	// GPUMemory, when above 0, is every GPU's memory (--gpu-memory).
	GPUMemory int64
	// NoP2P says peer copies do not work, whatever the doctor finds.
	NoP2P bool
	// Guest is the container or VM whose GPUs to fit the model on; nil for the host's.
	Guest *Guest
	// Split is the desired state, nil without one.
	Split *Split

	// P2PChecks name the doctor's checks P2PAgainst runs; P2PAgainst gives the titles
	// of their findings against peer-to-peer.
	P2PChecks  []string
	P2PAgainst func() ([]string, error)
	// Now reads the guest's GPUs now.
	Now func(Guest) (GuestNow, error)
	// Measured is each GPU's memory as the CUDA driver reports it, by address.
	Measured func() map[pci.Address]int64
}

// ModelError is an error of the model's directory or of its figures.
type ModelError struct{ Err error }

func (e *ModelError) Error() string { return e.Err.Error() }
func (e *ModelError) Unwrap() error { return e.Err }

// ErrNoContext is returned when nothing gives the context: no command line, no group,
// and a config.json without max_position_embeddings.
var ErrNoContext = errors.New("config.json gives no max_position_embeddings")

// Run works out the model's fit on each set of GPUs: the host's, or the guest's now and,
// with a split, after it.
func Run(r Request) (*Report, error) {
	m, kv := r.Model, r.KV
	mj, err := modelReport(m, kv)
	if err != nil {
		return nil, &ModelError{err}
	}
	doc := &Report{Host: r.Root, Model: mj, Engine: string(r.Engine), KVDType: kv.Name, KVDTypeFrom: kv.From, Sets: []SetReport{}, Notes: []string{}}
	if kv.Bytes == 2 && m.Quant.KVCache == "fp8" && kv.From != "--kv-dtype" {
		doc.Notes = append(doc.Notes, "the checkpoint ships FP8 KV-cache scales: an fp8 KV cache (kv_dtype fp8; the engine's --kv-cache-dtype fp8) halves the cache per token")
	}
	if r.KVBytesPerToken > 0 {
		doc.Model.KVBytesPerToken, doc.Model.KVBytesPerTokenFrom = r.KVBytesPerToken, "--kv-bytes-per-token"
	}
	// The serving conditions: the command line, else the guest's group, else the model's.
	doc.Context, doc.Concurrency = r.Context, r.Concurrency
	var from []string
	if r.ContextSet || r.ConcurrencySet {
		from = append(from, "the command line")
	}
	if grp := GuestGroup(r.Split, r.Guest); grp != nil {
		if !r.ContextSet && grp.Context > 0 {
			doc.Context = grp.Context
		}
		if !r.ConcurrencySet && grp.Concurrency > 0 {
			doc.Concurrency = grp.Concurrency
		}
		if grp.Context > 0 && !r.ContextSet || grp.Concurrency > 0 && !r.ConcurrencySet {
			from = append(from, fmt.Sprintf("group %q of %s", grp.Name, r.Split.Name))
		}
	}
	if doc.Context == 0 {
		if m.MaxContext == 0 {
			return nil, ErrNoContext
		}
		doc.Context = m.MaxContext
		from = append(from, "the model's max_position_embeddings")
	}
	if doc.Concurrency == 0 {
		doc.Concurrency = 1
	}
	doc.ServingFrom = strings.Join(from, ", ")

	opts := Options{Engine: r.Engine, MemoryFraction: r.MemoryFraction, KV: kv, KVBytesPerToken: r.KVBytesPerToken, Context: doc.Context, Concurrency: doc.Concurrency}
	p2p, p2pWhy := true, "the doctor's "+strings.Join(r.P2PChecks, ", ")+" found nothing against peer-to-peer"
	against, err := r.P2PAgainst()
	if err != nil {
		return nil, err
	}
	if len(against) > 0 {
		p2p, p2pWhy = false, "the doctor advises against it: "+strings.Join(against, "; ")
	}
	if r.NoP2P {
		p2p, p2pWhy = false, "--no-p2p"
	}
	sets, err := gpuSets(r, p2p, p2pWhy)
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		js := SetReport{Label: s.label, When: s.when, From: s.from, P2P: s.p2p, P2PWhy: s.p2pWhy, GPUs: []GPUReport{}, Placements: []PlacementReport{}, Impossible: []string{}, Notes: append([]string{}, s.notes...)}
		if g := r.Guest; g != nil {
			id := g.ID
			if g.Kind == Container {
				js.Container = &id
			} else {
				js.VM = &id
			}
		}
		if len(s.gpus) == 0 {
			js.Why = "no GPUs"
			doc.Sets = append(doc.Sets, js)
			continue
		}
		gpus, err := Memory(s.gpus, r.GPUMemory, r.Measured())
		if err != nil {
			return nil, err
		}
		for _, x := range gpus {
			gj := GPUReport{Address: x.Address.String(), Name: x.Name, Memory: x.Memory, MemoryFrom: x.MemoryFrom}
			if x.NUMANode >= 0 {
				n := x.NUMANode
				gj.NUMANode = &n
			}
			js.GPUs = append(js.GPUs, gj)
		}
		o := opts
		o.P2P = s.p2p
		res, err := Fit(m, gpus, o)
		if err != nil {
			return nil, err
		}
		fillSet(&js, res)
		doc.Sets = append(doc.Sets, js)
	}
	return doc, nil
}

// gpuSet is one set of GPUs to fit the model on.
type gpuSet struct {
	label, when, from string
	gpus              []inventory.GPU
	p2p               bool
	p2pWhy            string
	notes             []string
}

// gpuSets are the host's GPUs; or the guest's now and, with a split, after it.
func gpuSets(r Request, p2p bool, p2pWhy string) ([]gpuSet, error) {
	inv, guest, split := r.Inventory, r.Guest, r.Split
	if guest == nil {
		return []gpuSet{{label: "this host's GPUs", when: "now", from: "the inventory (the devices that count as GPUs)", gpus: inv.GPUs, p2p: p2p, p2pWhy: p2pWhy}}, nil
	}
	now, err := r.Now(*guest)
	if err != nil {
		return nil, err
	}
	if guest.Kind == VM && p2p && now.NoClique {
		p2p, p2pWhy = false, fmt.Sprintf("without one gpudirect clique for its GPUs the guest's driver gives them no peer access (gpusplit pve p2p-clique --vm %d)", guest.ID)
	}
	from := "the devN and lxc.mount.entry lines of its config"
	if guest.Kind == VM {
		from = "its hostpciN entries, as qemu-server picks them at start"
	}
	sets := []gpuSet{{label: guest.String() + " now", when: "now", from: from, gpus: now.GPUs, p2p: p2p, p2pWhy: p2pWhy, notes: now.Notes}}
	if split == nil {
		return sets, nil
	}
	desired, err := split.File.Desired()
	if err != nil {
		return nil, err
	}
	pl, err := plan.Make(inv, desired)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", split.Name, err)
	}
	after, why := AfterSplit(inv, pl, desired, *guest, now.GPUs)
	src := fmt.Sprintf("%s of %s", why, split.Name)
	if split.Demo {
		src += " (the reference split: the sample host carries no " + plan.DefaultConfig + ")"
	}
	return append(sets, gpuSet{label: fmt.Sprintf("%s after the split", guest), when: "after the split", from: src, gpus: after, p2p: p2p, p2pWhy: p2pWhy}), nil
}

// GuestGroup is the group of the desired state that names the guest.
func GuestGroup(split *Split, guest *Guest) *plan.Group {
	if split == nil || guest == nil {
		return nil
	}
	for i, grp := range split.File.Groups {
		ids := grp.Containers
		if guest.Kind == VM {
			ids = grp.VMs
		}
		for _, id := range ids {
			if id == guest.ID {
				return &split.File.Groups[i]
			}
		}
	}
	return nil
}

func fillSet(js *SetReport, res *Result) {
	js.Impossible = append(js.Impossible, res.Impossible...)
	js.Notes = append(js.Notes, res.Notes...)
	js.Why = res.Why
	for _, p := range res.Placements {
		pj := PlacementReport{
			Name: p.Name(), TP: p.TP, PP: p.PP, Replicas: p.Replicas, GPUsPerReplica: p.TP * p.PP,
			WeightBytesPerGPU: p.Weights, ReserveBytesPerGPU: p.Reserve, MemoryFraction: p.Stages[0].Budget.Fraction,
			KVBytesPerGPU: max(p.KV, 0), KVBytesPerToken: p.PerToken, StateBytesPerSeq: p.State, BytesPerSequence: p.PerSequence,
			KVTokens: p.Tokens, Sequences: p.Sequences, KVHeadroom: p.Headroom, Verdict: string(p.Verdict), Why: p.Why, Recommended: p.Recommended,
			SpansNUMA: p.SpansNUMA, CrossNodeAllReduces: p.CrossNodeAllReduces, CrossNodeHops: p.CrossNodeHops,
			Stages: []StageReport{}, Notes: append([]string{}, p.Notes...),
		}
		for _, s := range p.Stages {
			sj := StageReport{Layers: [2]int{s.First, s.Last}, GPUs: []string{}, NUMANodes: append([]int{}, s.Nodes...), Memory: s.Memory,
				Weights: s.Weights, Reserve: s.Budget.Reserve, KV: max(s.KV, 0), KVTokens: s.Tokens, Sequences: s.Sequences, BytesPerSeq: s.PerSequence,
				MemoryFraction: s.Budget.Fraction, FractionFrom: s.Budget.FractionFrom, KVBytesPerToken: s.PerToken()}
			for _, a := range s.GPUs {
				sj.GPUs = append(sj.GPUs, a.String())
			}
			pj.Stages = append(pj.Stages, sj)
		}
		if p.Recommended {
			js.Recommended = p.Name()
		}
		js.Placements = append(js.Placements, pj)
	}
}

func modelReport(m *hfmodel.Model, kv KVDType) (ModelReport, error) {
	j := ModelReport{
		Path: m.Dir, Name: m.Name, Architecture: m.Architecture, ModelType: m.ModelType, Attention: m.Attention(),
		Layers: m.Layers, FullLayers: m.Count(hfmodel.LayerFull), SlidingLayers: m.Count(hfmodel.LayerSliding), LinearLayers: m.Count(hfmodel.LayerLinear),
		SlidingWindow: m.SlidingWindow, Heads: m.Heads, KVHeads: m.KVHeads, HeadDim: m.HeadDim,
		Experts: m.Experts, ExpertsPerToken: m.TopK, MaxContext: m.MaxContext, Quantization: m.Quant.Label(),
		WeightBytes: m.Weights.Serving(), WeightsSource: m.WeightsFrom, MTPBytes: m.Weights.MTP, Tensors: m.Weights.Tensors, Shards: m.Weights.Shards,
		HeaderOnlyShards: m.Weights.HeaderOnly, BytesByDType: m.Weights.ByDType,
		Missing: append([]string{}, m.Missing...), Notes: append([]string{}, m.Notes...),
	}
	if m.MLA != nil {
		j.KVLoraRank, j.RopeDim = m.MLA.KVLoraRank, m.MLA.RopeDim
	}
	if j.WeightsSource == hfmodel.WeightsEstimate {
		j.WeightsError = hfmodel.EstimateError
	}
	if len(m.Missing) == 0 {
		var err error
		if j.KVBytesPerToken, j.StateBytesPerSeq, err = ModelKV(m, kv); err != nil {
			return j, err
		}
		j.KVBytesPerTokenFrom = "config.json"
	}
	if j.BytesByDType == nil {
		j.BytesByDType = map[string]int64{}
	}
	return j, nil
}

// GroupModel is, for a group of the desired state that names a model, whether the model
// fits on the GPUs the group holds once the split is done (plan's and pve sync's
// models[], docs/json.md).
type GroupModel struct {
	Group       string   `json:"group"`
	Model       string   `json:"model"`
	Containers  []int    `json:"containers"`
	VMs         []int    `json:"vms"`
	GPUs        []string `json:"gpus"`
	Context     int      `json:"context"`
	Concurrency int      `json:"concurrency"`
	Recommended string   `json:"recommended"`
	Verdict     string   `json:"verdict"`
	Why         string   `json:"why"`
	Error       string   `json:"error"`
	// Err is the error Error says, for the caller to word what to do about it.
	Err error `json:"-"`
}

// GroupModels works out, for each group of file that names a model, whether the model
// fits on the GPUs the group holds once p is applied to inv: what its containers (or
// VMs) keep. A model that cannot be read is reported in the group's entry, not as an
// error. The model's path is on this machine; a relative one is relative to dir, the
// file's directory ("" for the working directory).
func GroupModels(file *plan.File, inv *inventory.Inventory, p *plan.Plan, dir string, measured func() map[pci.Address]int64) []GroupModel {
	var out []GroupModel
	end := EndDrivers(inv, p)
	for _, grp := range file.Groups {
		if grp.Model == "" {
			continue
		}
		j := GroupModel{Group: grp.Name, Model: grp.Model, Containers: append([]int{}, grp.Containers...), VMs: append([]int{}, grp.VMs...), GPUs: []string{}}
		path := grp.Model
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		var gpus []inventory.GPU
		for _, mv := range append(append([]plan.Move{}, p.Moves...), p.InPlace...) {
			if mv.Role != plan.RoleGPU || mv.Target != grp.Name {
				continue
			}
			for _, x := range inv.GPUs {
				if x.Address == mv.Device && end[x.Address] != "" {
					gpus = append(gpus, x)
					j.GPUs = append(j.GPUs, x.Address.String())
				}
			}
		}
		j.Context, j.Concurrency = grp.Context, max(grp.Concurrency, 1)
		fail := func(err error) {
			j.Error, j.Err = err.Error(), err
			out = append(out, j)
		}
		m, err := hfmodel.Load(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("model %s is not on this machine: %w", path, err)
			}
			fail(err)
			continue
		}
		if j.Context == 0 {
			j.Context = m.MaxContext
		}
		kv, _ := ParseKVDType("auto", m)
		fg, err := Memory(gpus, 0, measured())
		if err != nil {
			fail(err)
			continue
		}
		if len(fg) == 0 {
			fail(fmt.Errorf("group %q holds no GPUs after the split", grp.Name))
			continue
		}
		res, err := Fit(m, fg, Options{Engine: VLLM, KV: kv, Context: j.Context, Concurrency: j.Concurrency, P2P: true})
		if err != nil {
			fail(err)
			continue
		}
		if res.Recommended >= 0 {
			pl := res.Placements[res.Recommended]
			j.Recommended, j.Verdict, j.Why = pl.Name(), string(pl.Verdict), pl.Why
		} else {
			j.Verdict, j.Why = string(DoesNotFit), res.Why
		}
		out = append(out, j)
	}
	return out
}
