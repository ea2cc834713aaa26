// Package fit works out whether a model fits on a set of GPUs, and how to place it: for
// each tensor-parallel (TP) and pipeline-parallel (PP) placement the GPUs allow, the
// weights each GPU holds (exact, from the safetensors headers, split as the engines
// split them), what the engine keeps for itself, the KV cache left, the tokens it holds
// and the sequences of a given context it serves at once; a verdict per placement and
// the one to use. docs/fit.md gives the formulas and their sources.
package fit

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/hfmodel"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// GPU is one GPU of the set, with its memory.
type GPU struct {
	Address  pci.Address
	Name     string
	NUMANode int
	Memory   int64
	// MemoryFrom says where the figure is from (the table's kind and source, or
	// --gpu-memory).
	MemoryFrom string
}

// Options are the serving conditions.
type Options struct {
	Engine Engine
	// MemoryFraction overrides the engine's fraction when above 0.
	MemoryFraction float64
	KV             KVDType
	// KVBytesPerToken, when above 0, stands for the model's KV bytes per token (all
	// layers, TP 1): for architectures gpusplit cannot size.
	KVBytesPerToken int64
	// Context is the tokens of one sequence; Concurrency the sequences served at once
	// over all replicas.
	Context, Concurrency int
	// P2P says peer copies work between the GPUs: without them TP's all-reduces go
	// through host memory, and placements are ranked by fewest cross-node collectives.
	P2P bool
}

// Verdict is a placement's outcome.
type Verdict string

const (
	Fits       Verdict = "fits"
	Tight      Verdict = "tight"
	DoesNotFit Verdict = "does not fit"
)

// Margin is the share of the KV cache that must be left once the sequences asked for
// are in it for a "fits": the engine's reserve is an estimate, and a cache full to the
// last sequence preempts.
const Margin = 0.10

// Judge is the one rule behind every verdict, the table's and the JSON's alike. headroom
// is what Headroom gives: the share of the tightest stage's KV cache left once the
// sequences asked for are in it, below 0 when they are not all held.
//
//   - does not fit: the weights and the reserve leave no KV cache (ok false), or the
//     cache holds fewer sequences than asked (headroom < 0): a server asked for 16
//     sequences that holds 8 queues or preempts the other 8;
//   - tight: it holds them all, with less than Margin (10%) of the cache to spare;
//   - fits: it holds them all with Margin or more to spare.
func Judge(ok bool, headroom float64) Verdict {
	switch {
	case !ok || headroom < 0:
		return DoesNotFit
	case headroom < Margin:
		return Tight
	}
	return Fits
}

// Headroom is the share of a stage's KV cache left once it holds its part of the
// sequences asked for: kv / (⌈want / replicas⌉ × perSequence) − 1. A stage whose
// sequences take nothing has all of it to spare: the largest float64, which JSON holds
// where it holds no infinity.
func Headroom(kv, perSequence int64, want, replicas int) float64 {
	perReplica := (want + replicas - 1) / max(replicas, 1)
	need := float64(perSequence) * float64(perReplica)
	if need <= 0 {
		return math.MaxFloat64
	}
	return float64(kv)/need - 1
}

// Stage is one pipeline stage of a placement.
type Stage struct {
	// First and Last are the layers of the stage, [First, Last).
	First, Last int
	// GPUs are the stage's TP group in the first replica.
	GPUs []pci.Address
	// Nodes are the NUMA nodes of the group.
	Nodes []int
	// Memory is the smallest GPU's memory in the stage (over all replicas).
	Memory int64
	// Weights is what one GPU of the stage holds; Budget what the engine keeps; KV
	// what is left for the cache (negative when the weights do not fit).
	Weights int64
	Budget  Budget
	KV      int64
	kv      stageKV
	// Tokens and Sequences are what the stage's cache holds; PerSequence what one
	// sequence of Options.Context takes of it.
	Tokens, Sequences, PerSequence int64
}

// Placement is one way to run the model on the set.
type Placement struct {
	TP, PP, Replicas int
	Stages           []Stage
	// Per GPU, over the stages: the most weights, the most reserve, the least KV.
	Weights, Reserve, KV int64
	// PerToken is the most KV bytes per token one rank holds, State the most
	// per-sequence state; PerSequence what one sequence of Options.Context takes.
	PerToken, State, PerSequence int64
	// Tokens is the longest context one replica holds (the least over its stages);
	// Sequences the sequences of Options.Context all replicas hold at once.
	Tokens, Sequences int64
	// Headroom is the share of the KV cache left once the sequences asked for are in
	// it, the least over the stages (Headroom); the verdict is Judge's of it.
	Headroom float64
	// SpansNUMA is set when a TP group has GPUs on more than one NUMA node;
	// CrossNodeAllReduces counts the all-reduces per forward pass that cross nodes (two
	// per layer of each such group), CrossNodeHops the stage boundaries that do.
	SpansNUMA           bool
	CrossNodeAllReduces int
	CrossNodeHops       int
	Verdict             Verdict
	Why                 string
	Notes               []string
	Recommended         bool
}

// Name is "TP4", "TP4×PP2".
func (p Placement) Name() string {
	if p.PP == 1 {
		return fmt.Sprintf("TP%d", p.TP)
	}
	return fmt.Sprintf("TP%d×PP%d", p.TP, p.PP)
}

// Result is the fit of a model on a set of GPUs.
type Result struct {
	Placements []Placement
	// Recommended indexes Placements; -1 when nothing fits.
	Recommended int
	// Why says why that one, or why none.
	Why string
	// Impossible are the placements the model's shape rules out, each with why.
	Impossible []string
	Notes      []string
}

// ErrUnsized is returned for a model whose KV cache cannot be sized.
var ErrUnsized = errors.New("the KV cache cannot be sized")

// Fit works out every placement of m on gpus.
func Fit(m *hfmodel.Model, gpus []GPU, o Options) (*Result, error) {
	if len(gpus) == 0 {
		return nil, errors.New("no GPUs to place the model on")
	}
	if len(m.Missing) > 0 && o.KVBytesPerToken <= 0 {
		return nil, fmt.Errorf("%w: config.json lacks %s", ErrUnsized, strings.Join(m.Missing, ", "))
	}
	if o.Context <= 0 || o.Concurrency <= 0 {
		return nil, errors.New("the context and the concurrency must be positive")
	}
	if err := checkInputs(m, gpus, o); err != nil {
		return nil, err
	}
	res := &Result{Recommended: -1, Notes: splitNotes(m)}
	if m.MaxContext > 0 && o.Context > m.MaxContext {
		res.Notes = append(res.Notes, fmt.Sprintf("the context of %d tokens is longer than the model's max_position_embeddings (%d)", o.Context, m.MaxContext))
	}
	sorted := slices.Clone(gpus)
	slices.SortStableFunc(sorted, func(a, b GPU) int {
		return cmp.Or(cmp.Compare(a.NUMANode, b.NUMANode), strings.Compare(a.Address.String(), b.Address.String()))
	})
	n := len(sorted)
	for tp := 1; tp <= n; tp *= 2 {
		for pp := 1; tp*pp <= n; pp *= 2 {
			groups := tpGroups(sorted, tp)
			if len(groups) < pp {
				continue
			}
			if pp > 1 && anySpans(groups[:pp]) {
				// Pipeline stages are for keeping each TP group inside a node; a
				// group that spans nodes is TP's case, listed as pure TP.
				continue
			}
			if why := impossible(m, tp, pp); why != "" {
				res.Impossible = append(res.Impossible, fmt.Sprintf("%s: %s", name(tp, pp), why))
				continue
			}
			p, err := place(m, groups, tp, pp, o)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name(tp, pp), err)
			}
			res.Placements = append(res.Placements, p)
		}
	}
	recommend(res, o)
	return res, nil
}

func name(tp, pp int) string { return Placement{TP: tp, PP: pp}.Name() }

// tpGroups cuts the GPUs (sorted by node) into groups of tp, inside one NUMA node
// wherever the node has enough; what is left of the nodes makes groups that span them.
func tpGroups(gpus []GPU, tp int) [][]GPU {
	var groups [][]GPU
	var rest []GPU
	for i := 0; i < len(gpus); {
		j := i
		for j < len(gpus) && gpus[j].NUMANode == gpus[i].NUMANode {
			j++
		}
		node := gpus[i:j]
		for len(node) >= tp {
			groups = append(groups, node[:tp])
			node = node[tp:]
		}
		rest = append(rest, node...)
		i = j
	}
	for len(rest) >= tp {
		groups = append(groups, rest[:tp])
		rest = rest[tp:]
	}
	return groups
}

func nodesOf(g []GPU) []int {
	var nodes []int
	for _, x := range g {
		if !slices.Contains(nodes, x.NUMANode) {
			nodes = append(nodes, x.NUMANode)
		}
	}
	return nodes
}

func anySpans(groups [][]GPU) bool {
	for _, g := range groups {
		if len(nodesOf(g)) > 1 {
			return true
		}
	}
	return false
}

// impossible says why the model cannot run at tp × pp, or "".
func impossible(m *hfmodel.Model, tp, pp int) string {
	switch {
	case pp > m.Layers:
		return fmt.Sprintf("%d pipeline stages for %d layers", pp, m.Layers)
	case m.Heads > 0 && m.Heads%tp != 0:
		return fmt.Sprintf("%d attention heads do not split over %d ranks", m.Heads, tp)
	case m.MLA == nil && m.KVHeads > 0 && tp <= m.KVHeads && m.KVHeads%tp != 0:
		return fmt.Sprintf("%d KV heads do not split over %d ranks", m.KVHeads, tp)
	case m.MLA == nil && m.KVHeads > 0 && tp > m.KVHeads && tp%m.KVHeads != 0:
		return fmt.Sprintf("%d KV heads cannot be copied evenly to %d ranks", m.KVHeads, tp)
	case m.Linear != nil && (m.Linear.KeyHeads%tp != 0 || m.Linear.ValueHeads%tp != 0):
		return fmt.Sprintf("the linear-attention heads (%d key, %d value) do not split over %d ranks", m.Linear.KeyHeads, m.Linear.ValueHeads, tp)
	}
	if q := m.Quant; m.Experts == 0 && m.Intermediate > 0 {
		if unit := quantUnit(q); unit > 0 && (m.Intermediate%tp != 0 || m.Intermediate/tp%unit != 0) {
			return fmt.Sprintf("intermediate_size %d over %d ranks is not a multiple of the %d-wide %s blocks", m.Intermediate, tp, unit, strings.ToUpper(q.Scheme))
		}
	}
	return ""
}

// quantUnit is the width a rank's share of a quantised dimension must be a multiple of:
// the FP8 block, or the group of a group-quantised scheme.
func quantUnit(q hfmodel.Quant) int {
	if q.Block[1] > 0 {
		return q.Block[1]
	}
	return q.GroupSize
}

// ppLayers splits layers over pp stages as vLLM does (get_pp_indices in
// vllm/distributed/utils.py): layers / pp each, the remainder one more each to the stages
// counted back from the second-to-last, since the last stage also runs the final norm,
// the LM head and sampling. 61 layers at PP4: [15, 15, 16, 15].
func ppLayers(layers, pp int) []int {
	parts := make([]int, pp)
	for i := range parts {
		parts[i] = layers / pp
	}
	for i := 2; i < layers%pp+2; i++ {
		parts[pp-i]++
	}
	return parts
}

// place works one placement out: groups[r·pp + s] is stage s of replica r.
func place(m *hfmodel.Model, groups [][]GPU, tp, pp int, o Options) (Placement, error) {
	p := Placement{TP: tp, PP: pp, Replicas: len(groups) / pp}
	w := m.Weights
	b := o.KV.Bytes
	first := 0
	var perSeq int64
	for s, count := range ppLayers(m.Layers, pp) {
		st := Stage{First: first, Last: first + count, Memory: math.MaxInt64}
		first += count
		for r := 0; r < p.Replicas; r++ {
			for _, g := range groups[r*pp+s] {
				st.Memory = min(st.Memory, g.Memory)
			}
		}
		for _, g := range groups[s] {
			st.GPUs = append(st.GPUs, g.Address)
		}
		st.Nodes = nodesOf(groups[s])
		// The layers' matrices and experts split over the TP ranks; what every rank
		// keeps whole does not.
		var split, whole sum
		for i := st.First; i < st.Last; i++ {
			l := w.Layers[i]
			split.add(l.Split, l.Experts)
			whole.add(l.Replicated)
		}
		if s == 0 {
			split.add(w.Embed, w.Vision)
		}
		if s == pp-1 {
			split.add(w.LMHead)
			whole.add(w.Final)
			if m.Tied && pp > 1 {
				// Tied embeddings are stored once; the last stage needs its own copy.
				split.add(w.Embed)
			}
		}
		var weights sum
		weights.add(ceilDiv(split.n, int64(tp)), whole.n)
		if split.bad || whole.bad || weights.bad || weights.n > hfmodel.MaxWeightBytes {
			return p, tooLarge("the weights of stage %d pass %d bytes, the most hfmodel accepts", s, hfmodel.MaxWeightBytes)
		}
		st.Weights = weights.n
		st.Budget = budget(o.Engine, st.Memory, tp, pp, m.MLA != nil, o.MemoryFraction)
		st.KV = st.Memory - st.Weights - st.Budget.Reserve
		var err error
		if st.kv, err = kvOf(m, st.First, st.Last, tp, b, o.KVBytesPerToken); err != nil {
			return p, err
		}
		per, err := st.kv.perSequence(o.Context, m.SlidingWindow)
		if err != nil {
			return p, err
		}
		if st.KV > 0 {
			if st.kv.PerToken > 0 {
				st.Tokens = st.KV / st.kv.PerToken
			} else if st.kv.SlidingPerToken > 0 {
				st.Tokens = st.KV / st.kv.SlidingPerToken
			}
			if o.Engine == VLLM {
				// vLLM hands the cache out in blocks of 16 tokens.
				st.Tokens -= st.Tokens % 16
			}
			if per > 0 {
				st.Sequences = st.KV / per
			}
		}
		st.PerSequence = per
		perSeq = max(perSeq, per)
		p.Stages = append(p.Stages, st)
	}
	p.KV, p.Tokens, p.Sequences = math.MaxInt64, math.MaxInt64, math.MaxInt64
	for i, st := range p.Stages {
		p.Weights = max(p.Weights, st.Weights)
		p.Reserve = max(p.Reserve, st.Budget.Reserve)
		p.KV = min(p.KV, st.KV)
		p.PerToken = max(p.PerToken, st.kv.PerToken)
		p.State = max(p.State, st.kv.State)
		p.Tokens = min(p.Tokens, max(st.Tokens, 0))
		p.Sequences = min(p.Sequences, st.Sequences)
		if len(st.Nodes) > 1 {
			p.SpansNUMA = true
			p.CrossNodeAllReduces += 2 * (st.Last - st.First)
		}
		if i > 0 && !slices.Equal(p.Stages[i-1].Nodes, st.Nodes) {
			p.CrossNodeHops++
		}
	}
	p.PerSequence = perSeq
	p.Sequences *= int64(p.Replicas)
	p.Notes = placementNotes(m, tp, pp, p)
	weightsError := 0.0
	if m.WeightsFrom == hfmodel.WeightsEstimate {
		weightsError = hfmodel.EstimateError
	}
	p.Verdict, p.Headroom, p.Why = verdict(p, o, weightsError)
	return p, nil
}

// PerToken is the KV bytes per token one rank of the stage holds, sliding layers
// included (up to their window).
func (s Stage) PerToken() int64 { return s.kv.PerToken + s.kv.SlidingPerToken }

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// placementNotes says what is particular to a placement: its stages' layers, the
// all-reduces that cross nodes, expert widths the quantisation blocks do not divide.
func placementNotes(m *hfmodel.Model, tp, pp int, p Placement) []string {
	var notes []string
	if unit := quantUnit(m.Quant); m.Experts > 0 && tp > 1 && unit > 0 && m.MoEIntermediate > 0 && (m.MoEIntermediate%tp != 0 || m.MoEIntermediate/tp%unit != 0) {
		notes = append(notes, fmt.Sprintf("moe_intermediate_size %d over %d ranks is not a multiple of the %d-wide %s blocks: run the experts with expert parallelism (vLLM --enable-expert-parallel, SGLang --ep-size %d)", m.MoEIntermediate, tp, unit, strings.ToUpper(m.Quant.Scheme), tp))
	}
	if pp > 1 {
		var parts []string
		for _, s := range p.Stages {
			parts = append(parts, fmt.Sprintf("%d–%d", s.First, s.Last-1))
		}
		notes = append(notes, fmt.Sprintf("layers per stage: %s (vLLM's split)", strings.Join(parts, ", ")))
	}
	if p.SpansNUMA {
		notes = append(notes, fmt.Sprintf("the TP group spans NUMA nodes: %d all-reduces per forward pass cross the socket interconnect", p.CrossNodeAllReduces))
	}
	return notes
}

// splitNotes says how the model's weights and cache split, for every placement.
func splitNotes(m *hfmodel.Model) []string {
	notes := []string{"per GPU: 1/TP of each layer's matrices (attention, MLP, experts, with their scales) and of the embeddings; norms, routers and other one-dimensional tensors whole; the embeddings and vision tower on the first stage, the LM head and final norm on the last"}
	if m.Experts > 0 {
		notes = append(notes, fmt.Sprintf("experts: each rank holds 1/TP of each of the %d experts of a layer; with expert parallelism %d/EP whole experts, the same bytes when they divide evenly", m.Experts, m.Experts))
	}
	if m.MLA != nil {
		notes = append(notes, "MLA's latent cache is the same on every TP rank: TP adds no KV capacity, PP does")
	} else if m.KVHeads > 0 {
		notes = append(notes, fmt.Sprintf("%d KV heads: past TP%d each head is copied to TP/%d ranks, so the cache per token stops shrinking; PP stages divide it further", m.KVHeads, m.KVHeads, m.KVHeads))
	}
	return notes
}

// verdict judges a placement against the sequences asked for, by Judge, and says why
// in the placement's figures. weightsError is the share by which the weights may be
// off (hfmodel.EstimateError for weights estimated from config.json, 0 for the
// headers' exact bytes): the cache is judged as if the weights were that much larger,
// so that an estimate is never called a fit that the real bytes would make tight.
func verdict(p Placement, o Options, weightsError float64) (Verdict, float64, string) {
	ctx := Thousands(int64(o.Context))
	headroom := math.MaxFloat64
	for _, s := range p.Stages {
		if s.KV <= 0 {
			return Judge(false, -1), -1, fmt.Sprintf("%s of weights and %s of reserve per GPU leave no KV cache on %s GPUs (%s short)",
				GiBText(s.Weights), GiBText(s.Budget.Reserve), GiBText(s.Memory), GiBText(-s.KV))
		}
		kv := s.KV - int64(math.Ceil(float64(s.Weights)*weightsError))
		headroom = min(headroom, Headroom(kv, s.PerSequence, o.Concurrency, p.Replicas))
	}
	estimated := ""
	if weightsError > 0 {
		estimated = fmt.Sprintf(", the weights' estimate taken %s high", strings.TrimPrefix(hfmodel.ErrorText(weightsError), "±"))
	}
	want := int64(o.Concurrency)
	v := Judge(true, headroom)
	switch v {
	case DoesNotFit:
		return v, headroom, fmt.Sprintf("holds %d of the %d sequences of %s tokens asked", p.Sequences, want, ctx)
	case Tight:
		return v, headroom, fmt.Sprintf("holds the %d sequences of %s tokens asked with %s of the KV cache to spare%s, less than the %d%% a fit keeps (the reserve is an estimate)", want, ctx, percent(headroom), estimated, int(Margin*100))
	}
	return v, headroom, fmt.Sprintf("holds %d sequences of %s tokens, %d asked, with %s of the KV cache to spare%s", p.Sequences, ctx, want, percent(headroom), estimated)
}

// percent words a share of the KV cache: "4%", "more than 1000%".
func percent(f float64) string {
	if f > 10 {
		return "more than 1000%"
	}
	return fmt.Sprintf("%d%%", int(math.Floor(f*100)))
}

// recommend ranks the placements: first what fits (then what is tight, the most
// sequences first; what does not fit is never recommended), then the fewest
// GPUs per replica (the rest serve more replicas), then TP groups inside one NUMA node;
// without P2P, the fewest collectives across nodes; then the fewest pipeline stages;
// then the most sequences.
func recommend(res *Result, o Options) {
	rank := func(v Verdict) int {
		switch v {
		case Fits:
			return 0
		case Tight:
			return 1
		}
		return 2
	}
	best := -1
	better := func(a, b Placement) bool {
		c := cmp.Compare(rank(a.Verdict), rank(b.Verdict))
		if c == 0 && a.Verdict == Tight {
			// Little to spare: the most room first.
			c = cmp.Compare(b.Sequences, a.Sequences)
		}
		c = cmp.Or(c,
			cmp.Compare(a.TP*a.PP, b.TP*b.PP),
			cmp.Compare(boolInt(a.SpansNUMA), boolInt(b.SpansNUMA)),
		)
		if c == 0 && !o.P2P {
			c = cmp.Or(cmp.Compare(a.CrossNodeAllReduces, b.CrossNodeAllReduces), cmp.Compare(a.CrossNodeHops, b.CrossNodeHops))
		}
		// Then the shallowest pipeline (fewer bubbles, less latency), then the most
		// sequences and tokens.
		c = cmp.Or(c, cmp.Compare(a.PP, b.PP), cmp.Compare(b.Sequences, a.Sequences), cmp.Compare(b.Tokens, a.Tokens))
		return c < 0
	}
	for i, p := range res.Placements {
		if p.Verdict == DoesNotFit {
			continue
		}
		if best < 0 || better(p, res.Placements[best]) {
			best = i
		}
	}
	res.Recommended = best
	if best < 0 {
		res.Why = noneWhy(res, o)
		return
	}
	p := &res.Placements[best]
	p.Recommended = true
	var why []string
	if p.Verdict == Tight {
		why = append(why, "nothing fits with room to spare; this has the most")
	} else {
		why = append(why, fmt.Sprintf("the fewest GPUs per replica that fit (%d, %s)", p.TP*p.PP, plural(p.Replicas, "replica")))
	}
	switch {
	case p.PP > 1 && !p.SpansNUMA && p.CrossNodeHops > 0:
		why = append(why, "each TP group inside one NUMA node, the pipeline across them")
	case !p.SpansNUMA:
		why = append(why, "each replica inside one NUMA node")
	}
	if !o.P2P && p.CrossNodeAllReduces == 0 {
		why = append(why, "no all-reduce crosses nodes, which matters without P2P")
	}
	res.Why = strings.Join(why, "; ")
}

// noneWhy says why no placement is recommended: the most sequences any holds, and what
// would make room.
func noneWhy(res *Result, o Options) string {
	best := -1
	for i, p := range res.Placements {
		if best < 0 || p.Sequences > res.Placements[best].Sequences {
			best = i
		}
	}
	ctx := Thousands(int64(o.Context))
	if best < 0 || res.Placements[best].Sequences == 0 {
		return fmt.Sprintf("no placement holds one sequence of %s tokens on these GPUs", ctx)
	}
	p := res.Placements[best]
	return fmt.Sprintf("no placement holds the %d sequences of %s tokens asked; the most is %d, at %s: fewer sequences, a shorter context or an FP8 KV cache make room", o.Concurrency, ctx, p.Sequences, p.Name())
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// GiBText words bytes in GiB to a tenth: "95.6 GiB".
func GiBText(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/float64(GiB)) }
