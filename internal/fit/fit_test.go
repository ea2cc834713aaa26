package fit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/hfmodel"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pciids"
	"github.com/gpusplit/gpusplit/internal/testutils/checkpoint"
)

const models = "../../testdata/models/"

// proMemory is the RTX PRO 6000 Blackwell's memory as nvidia-smi reports it.
const proMemory = 97887 * MiB

// gpusOn makes n GPUs of mem bytes, the first half on NUMA node 0 and the rest on node
// 1, as the sample host's 8 are.
func gpusOn(n int, mem int64, nodes int) []GPU {
	var out []GPU
	for i := 0; i < n; i++ {
		a, err := pci.ParseAddress(fmt.Sprintf("0000:%02x:00.0", 16*i+1))
		if err != nil {
			panic(err)
		}
		out = append(out, GPU{Address: a, NUMANode: i * nodes / n, Memory: mem})
	}
	return out
}

func config(t *testing.T, dir string) *hfmodel.Model {
	t.Helper()
	m, err := hfmodel.LoadConfig(models + dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSGLangFraction reproduces the reference's worked example of SGLang's default
// mem_fraction_static on a 97,887 MiB RTX PRO 6000, non-MLA, prefill graphs on
// (../shared/reference/model-fit.md §4.1): TP1 0.858, TP2 0.857, TP4 0.849, TP8 0.844,
// TP4×PP2 0.844.
func TestSGLangFraction(t *testing.T) {
	for _, c := range []struct {
		tp, pp int
		want   float64
	}{{1, 1, 0.858}, {2, 1, 0.857}, {4, 1, 0.849}, {8, 1, 0.844}, {4, 2, 0.844}} {
		if got := sglangFraction(proMemory, c.tp, c.pp, false); got != c.want {
			t.Errorf("TP%d×PP%d: %v, want %v", c.tp, c.pp, got, c.want)
		}
	}
	// The reserve by hand for TP4: 512 + 1.5·8192 + 4/8·1024 + 2·512 (decode graphs up
	// to 512) + 8·58 (prefill graphs) = 14,800 MiB, over the 10 GiB floor.
	if got, want := sglangFraction(proMemory, 4, 1, false), math.Round((97887.0-14800)/97887*1000)/1000; got != want {
		t.Errorf("TP4 %v, by hand %v", got, want)
	}
	// On MLA backends the prefill graphs take 1.5 GiB instead: 512 + 12288 + 512 + 1024 + 1536.
	if got, want := sglangFraction(proMemory, 4, 1, true), math.Round((97887.0-15872)/97887*1000)/1000; got != want {
		t.Errorf("MLA TP4 %v, by hand %v", got, want)
	}
	// A 24 GiB GPU: chunked prefill 2048, decode graphs up to 24, no 10 GiB floor:
	// 512 + 1.5·2048 + 1/8·1024 + 48 + 464 = 4,224 MiB.
	if got, want := sglangFraction(24*1024*MiB, 1, 1, false), math.Round((24576.0-4224)/24576*1000)/1000; got != want {
		t.Errorf("24 GiB: %v, want %v", got, want)
	}
}

// TestPPLayers checks vLLM's get_pp_indices split (vllm/distributed/utils.py): the
// remainder goes to the stages counted back from the second-to-last.
func TestPPLayers(t *testing.T) {
	for _, c := range []struct {
		layers, pp int
		want       []int
	}{{61, 2, []int{31, 30}}, {61, 4, []int{15, 15, 16, 15}}, {60, 2, []int{30, 30}}, {80, 8, []int{10, 10, 10, 10, 10, 10, 10, 10}}, {7, 4, []int{2, 2, 2, 1}}} {
		if got := ppLayers(c.layers, c.pp); !slices.Equal(got, c.want) {
			t.Errorf("%d layers over %d: %v, want %v", c.layers, c.pp, got, c.want)
		}
	}
}

// TestKVPerToken checks the KV cache per token (and state per sequence) of one model of
// each attention type against the reference's worked examples (model-fit.md §2), each
// written out here from the config's figures.
func TestKVPerToken(t *testing.T) {
	bf16 := KVDType{Name: "bfloat16", Bytes: 2}
	fp8 := KVDType{Name: "fp8", Bytes: 1}
	for _, c := range []struct {
		model       string
		tp          int
		kv          KVDType
		perToken    int64
		sliding     int64
		state       int64
		description string
	}{
		// Dense GQA, §2.1: 2 (K and V) × 80 layers × 8 heads × 128 × 2 bytes = 320 KiB.
		{"llama-3.1-70b-instruct", 1, bf16, 2 * 80 * 8 * 128 * 2, 0, 0, "320 KiB"},
		{"llama-3.1-70b-instruct", 4, bf16, 2 * 80 * 2 * 128 * 2, 0, 0, "80 KiB"},
		{"llama-3.1-70b-instruct", 8, bf16, 2 * 80 * 1 * 128 * 2, 0, 0, "40 KiB"},
		// TP16 would copy the 8 KV heads: still one head per rank.
		{"llama-3.1-70b-instruct", 16, bf16, 2 * 80 * 1 * 128 * 2, 0, 0, "40 KiB, heads copied"},
		// MoE, §2.2: 2 × 48 × 4 × 128 × 2 = 96 KiB; at TP4 and TP8 one head per rank.
		{"qwen3-30b-a3b", 1, bf16, 2 * 48 * 4 * 128 * 2, 0, 0, "96 KiB"},
		{"qwen3-30b-a3b", 8, bf16, 2 * 48 * 1 * 128 * 2, 0, 0, "24 KiB"},
		// MLA, §2.3: (512 + 64) × 61 × 2 = 70,272 B, at any TP; 35,136 B in FP8.
		{"deepseek-v3", 1, bf16, (512 + 64) * 61 * 2, 0, 0, "70,272 B"},
		{"deepseek-v3", 8, bf16, (512 + 64) * 61 * 2, 0, 0, "the same on every rank"},
		{"deepseek-v3", 8, fp8, (512 + 64) * 61, 0, 0, "35,136 B"},
		// Sliding window: 16 full layers grow with the sequence, 48 sliding ones stop
		// at the window; 2 × 8 × 128 × 2 = 4 KiB per layer.
		{"olmo-3.1-32b-instruct", 1, bf16, 16 * 2 * 8 * 128 * 2, 48 * 2 * 8 * 128 * 2, 0, "64 KiB + 192 KiB up to 4096 tokens"},
		// Hybrid linear, §2.5, Qwen3.5-27B: KV 16 × 2 × 4 × 256 × 2 = 64 KiB; state per
		// linear layer: conv (2·16·128 + 48·128) × 3 × 2 B, recurrent 48·128·128 × 4 B
		// (float32), × 48 layers = 146.8 MiB.
		{"qwen3.5-27b", 1, bf16, 16 * 2 * 4 * 256 * 2, 0, 48 * ((2*16*128+48*128)*3*2 + 48*128*128*4), "64 KiB + 146.8 MiB"},
		// At TP4 the state's heads split four ways.
		{"qwen3.5-27b", 4, bf16, 16 * 2 * 1 * 256 * 2, 0, 48 * ((2*16*128+48*128)/4*3*2 + 12*128*128*4), "16 KiB + 36.7 MiB"},
		// Qwen3-Next-80B-A3B, §2.5: 24 KiB per token, ≈73.7 MiB per sequence.
		{"qwen3-next-80b-a3b", 1, bf16, 12 * 2 * 2 * 256 * 2, 0, 36 * ((2*16*128+32*128)*3*2 + 32*128*128*4), "24 KiB + 73.7 MiB"},
	} {
		t.Run(fmt.Sprintf("%s TP%d %s", c.model, c.tp, c.kv.Name), func(t *testing.T) {
			m := config(t, c.model)
			s, err := kvOf(m, 0, m.Layers, c.tp, c.kv.Bytes, 0)
			if err != nil {
				t.Fatal(err)
			}
			if s.PerToken != c.perToken || s.SlidingPerToken != c.sliding || s.State != c.state {
				t.Errorf("per token %d, sliding %d, state %d; want %d, %d, %d (%s)", s.PerToken, s.SlidingPerToken, s.State, c.perToken, c.sliding, c.state, c.description)
			}
		})
	}
	// 146.8 MiB and 73.7 MiB, as the reference words them.
	if got := mib(48 * ((2*16*128+48*128)*3*2 + 48*128*128*4)); got != "146.8" {
		t.Errorf("Qwen3.5-27B state %s MiB", got)
	}
	if got := mib(36 * ((2*16*128+32*128)*3*2 + 32*128*128*4)); got != "73.7" {
		t.Errorf("Qwen3-Next state %s MiB", got)
	}
	// A sequence of 8192 tokens on Olmo holds the whole window on the sliding layers;
	// one of 1000 tokens holds its 1000.
	s, err := kvOf(config(t, "olmo-3.1-32b-instruct"), 0, 64, 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.perSequence(8192, 4096); err != nil || got != int64(8192*65536+4096*196608) {
		t.Errorf("8192 tokens: %d, %v; want %d", got, err, int64(8192*65536+4096*196608))
	}
	if got, err := s.perSequence(1000, 4096); err != nil || got != int64(1000*65536+1000*196608) {
		t.Errorf("1000 tokens: %d, %v; want %d", got, err, int64(1000*65536+1000*196608))
	}
	// A context whose cache passes int64 is a *SequenceError, which is ErrTooLarge: the
	// CLI names the flag that shortens it, fit does not.
	_, err = s.perSequence(math.MaxInt, 4096)
	var seq *SequenceError
	if !errors.As(err, &seq) || !errors.Is(err, ErrTooLarge) || seq.Tokens != math.MaxInt || seq.PerToken != 65536 || strings.Contains(err.Error(), "--") {
		t.Errorf("a sequence past int64: %v", err)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/float64(MiB)) }

// buildLlama writes Llama 3.1 70B's checkpoint (sparse shards) beside its kept config.
func buildLlama(t *testing.T) *hfmodel.Model {
	t.Helper()
	dir := t.TempDir()
	if err := checkpoint.CopyConfig(models+"llama-3.1-70b-instruct", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Write(dir, checkpoint.Llama(checkpoint.Dense{Layers: 80, Hidden: 8192, Intermediate: 28672, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 128256}), checkpoint.Options{}); err != nil {
		t.Fatal(err)
	}
	m, err := hfmodel.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func find(t *testing.T, r *Result, name string) Placement {
	t.Helper()
	for _, p := range r.Placements {
		if p.Name() == name {
			return p
		}
	}
	t.Fatalf("no placement %s among %d", name, len(r.Placements))
	return Placement{}
}

// TestDenseSGLang is the reference's Llama-3.1-70B table (model-fit.md §4.1): BF16, ~141
// GB of weights, on 97,887 MiB GPUs under SGLang's default fraction with 0.5 GiB of
// context: TP2 ~15.7 GiB of KV per GPU (~103 k tokens), TP4 ~47.8 GiB (~627 k), TP8
// ~63.8 GiB (~1.67 M), TP4×PP2 the same as TP8 with 40 layers per stage. The
// reference rounds; TP4 is also worked out here to the byte.
func TestDenseSGLang(t *testing.T) {
	m := buildLlama(t)
	kv, _ := ParseKVDType("auto", m)
	r, err := Fit(m, gpusOn(8, proMemory, 2), Options{Engine: SGLang, KV: kv, Context: 8192, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		kvGiB  float64
		tokens int64
	}{{"TP2", 15.7, 103_000}, {"TP4", 47.8, 627_000}, {"TP8", 63.8, 1_670_000}, {"TP4×PP2", 63.8, 1_670_000}} {
		p := find(t, r, c.name)
		got := float64(p.KV) / float64(GiB)
		if math.Abs(got-c.kvGiB) > 0.15 {
			t.Errorf("%s: %.2f GiB of KV, the reference ~%.1f", c.name, got, c.kvGiB)
		}
		if d := math.Abs(float64(p.Tokens-c.tokens)) / float64(c.tokens); d > 0.01 {
			t.Errorf("%s: %d tokens, the reference ~%d", c.name, p.Tokens, c.tokens)
		}
	}
	// TP4 by hand. Per layer 2·(8192·8192·2 + 8192·1024·2 + 3·8192·28672) bytes split
	// four ways, the two norms (2·2·8192) whole; the embedding and lm_head (128256·8192·2
	// each) split; the final norm (2·8192) whole.
	layerSplit := int64(2 * (8192*8192*2 + 8192*1024*2 + 3*8192*28672))
	split := 80*layerSplit + 2*128256*8192*2
	weights := (split+3)/4 + 80*2*2*8192 + 2*8192
	frac := math.Round((97887.0-14800)/97887*1000) / 1000
	reserve := proMemory - int64(frac*float64(proMemory)) + 512*MiB
	kvBytes := proMemory - weights - reserve
	perToken := int64(2 * 80 * 2 * 128 * 2)
	p := find(t, r, "TP4")
	if p.Weights != weights || p.Reserve != reserve || p.KV != kvBytes || p.PerToken != perToken || p.Tokens != kvBytes/perToken {
		t.Errorf("TP4: weights %d reserve %d KV %d per token %d tokens %d; by hand %d %d %d %d %d", p.Weights, p.Reserve, p.KV, p.PerToken, p.Tokens, weights, reserve, kvBytes, perToken, kvBytes/perToken)
	}
	if p.Sequences != 2*(kvBytes/(perToken*8192)) || p.Replicas != 2 {
		t.Errorf("TP4: %d sequences over %d replicas", p.Sequences, p.Replicas)
	}
	if pp := find(t, r, "TP4×PP2"); pp.Stages[0].Last-pp.Stages[0].First != 40 {
		t.Errorf("TP4×PP2 stage 0 has layers %d–%d", pp.Stages[0].First, pp.Stages[0].Last)
	}
}

// Reference case: the 397B NVFP4 MoE kept as header-only shards, on the RTX PRO 6000s of
// container 129 before the split (8, on two NUMA nodes) and after it (the 4 of node 0),
// under vLLM at the reference split's 16 sequences of 262,144 tokens (docs/split.toml).
// Every figure is worked out here from the model card's dimensions.
func TestReferenceCase(t *testing.T) {
	m, err := hfmodel.Load(models + "qwen3.5-397b-a17b-nvfp4-like")
	if err != nil {
		t.Fatal(err)
	}
	const ctx, want = 262144, 16
	kv, _ := ParseKVDType("auto", m)
	o := Options{Engine: VLLM, KV: kv, Context: ctx, Concurrency: want}

	// The bytes of each part (hfmodel's TestReferenceWeights checks them against the
	// headers one by one).
	const h = 4096
	nvfp4 := func(out, in int64) int64 { return out*in/2 + out*in/16 + 8 }
	experts := 512 * (nvfp4(2*1024, h) + nvfp4(h, 1024))
	qkv, v := int64(2*16*128+64*128), int64(64*128)
	full := int64(2*(2*32*256*h+2*2*256*h+32*256*h)) + experts + 2*3*1024*h
	linear := 2*(qkv*h+v*h+2*64*h+h*v+qkv*4) + experts + 2*3*1024*h
	wholeFull := int64(2*2*h + 2*(512*h+h) + 2*2*256)
	wholeLinear := int64(2*2*h + 2*(512*h+h) + 64*4 + 64*2 + 128*2)
	embed := int64(2 * 248320 * h)
	vision := int64(2*(1152*3*2*16*16+1152+2304*1152) +
		27*2*(4*1152+3*1152*1152+3*1152+1152*1152+1152+4304*1152+4304+1152*4304+1152) +
		2*(2*1152+4608*4608+4608+4096*4608+4096))
	final := int64(2 * h)
	// The reserve under vLLM: 8% of the GPU outside gpu_memory_utilization, and 2 GiB
	// of context, activations and graphs.
	utilization := 0.92
	reserve := proMemory - int64(utilization*float64(proMemory)) + 2*GiB
	// Per rank: KV heads max(1, 2/tp) of 256, K and V, BF16, per full layer; the
	// state per linear layer with its heads split tp ways.
	perFullLayer := func(tp int) int64 { return 2 * int64(max(1, 2/tp)) * 256 * 2 }
	statePerLayer := func(tp int64) int64 { return qkv/tp*3*2 + 64/tp*128*128*4 }
	// A stage of layers [first, last): its full layers are 3, 7, 11, …
	type stage struct{ weights, kv, perToken, state, seqs int64 }
	stageOf := func(first, last, tp int, head, tail bool) stage {
		var split, whole, nFull, nLinear int64
		for i := first; i < last; i++ {
			if (i+1)%4 == 0 {
				split, whole, nFull = split+full, whole+wholeFull, nFull+1
			} else {
				split, whole, nLinear = split+linear, whole+wholeLinear, nLinear+1
			}
		}
		if head {
			split += embed + vision
		}
		if tail {
			split += embed // lm_head, as large as the embedding
			whole += final
		}
		s := stage{weights: (split+int64(tp)-1)/int64(tp) + whole}
		s.kv = proMemory - s.weights - reserve
		s.perToken = nFull * perFullLayer(tp)
		s.state = nLinear * statePerLayer(int64(tp))
		s.seqs = s.kv / (s.perToken*ctx + s.state)
		return s
	}
	check := func(t *testing.T, p Placement, stages []stage, replicas int) {
		t.Helper()
		seqs := int64(math.MaxInt64)
		for i, s := range stages {
			got := p.Stages[i]
			if got.Weights != s.weights || got.KV != s.kv || got.kv.PerToken != s.perToken || got.kv.State != s.state || got.Sequences != s.seqs {
				t.Errorf("%s stage %d: weights %d KV %d per token %d state %d sequences %d; by hand %d %d %d %d %d",
					p.Name(), i, got.Weights, got.KV, got.kv.PerToken, got.kv.State, got.Sequences, s.weights, s.kv, s.perToken, s.state, s.seqs)
			}
			seqs = min(seqs, s.seqs)
		}
		if p.Replicas != replicas || p.Sequences != seqs*int64(replicas) {
			t.Errorf("%s: %d replicas, %d sequences; by hand %d, %d", p.Name(), p.Replicas, p.Sequences, replicas, seqs*int64(replicas))
		}
	}

	t.Run("before the split, 8 GPUs", func(t *testing.T) {
		r, err := Fit(m, gpusOn(8, proMemory, 2), o)
		if err != nil {
			t.Fatal(err)
		}
		tp4 := stageOf(0, 60, 4, true, true)
		check(t, find(t, r, "TP4"), []stage{tp4}, 2)
		check(t, find(t, r, "TP8"), []stage{stageOf(0, 60, 8, true, true)}, 1)
		check(t, find(t, r, "TP4×PP2"), []stage{stageOf(0, 30, 4, true, false), stageOf(30, 60, 4, false, true)}, 1)
		check(t, find(t, r, "TP2×PP2"), []stage{stageOf(0, 30, 2, true, false), stageOf(30, 60, 2, false, true)}, 2)
		// The figures these give: TP4 holds 8 sequences a replica, 16 over two, less
		// than 10% to spare; TP8 15 of the 16, which does not fit; TP4×PP2 28; TP2×PP2
		// 15 a replica, 30 over two.
		for _, c := range []struct {
			name    string
			seqs    int64
			verdict Verdict
		}{{"TP4", 16, Tight}, {"TP8", 15, DoesNotFit}, {"TP4×PP2", 28, Fits}, {"TP2×PP2", 30, Fits}, {"TP2", 0, DoesNotFit}, {"TP1", 0, DoesNotFit}} {
			if p := find(t, r, c.name); p.Sequences != c.seqs || p.Verdict != c.verdict {
				t.Errorf("%s: %d sequences, %s; want %d, %s", c.name, p.Sequences, p.Verdict, c.seqs, c.verdict)
			}
		}
		// TP8 across the sockets is not the choice; with 4 GPUs a replica fitting,
		// two replicas of TP2×PP2, each inside one NUMA node, are.
		if got := r.Placements[r.Recommended]; got.Name() != "TP2×PP2" || got.SpansNUMA {
			t.Errorf("recommended %s", got.Name())
		}
		if p := find(t, r, "TP8"); !p.SpansNUMA || p.CrossNodeAllReduces != 2*60 {
			t.Errorf("TP8 spans %v, %d all-reduces across nodes", p.SpansNUMA, p.CrossNodeAllReduces)
		}
	})
	t.Run("after the split, 4 GPUs", func(t *testing.T) {
		r, err := Fit(m, gpusOn(4, proMemory, 1), o)
		if err != nil {
			t.Fatal(err)
		}
		tp4 := stageOf(0, 60, 4, true, true)
		check(t, find(t, r, "TP4"), []stage{tp4}, 1)
		check(t, find(t, r, "TP2×PP2"), []stage{stageOf(0, 30, 2, true, false), stageOf(30, 60, 2, false, true)}, 1)
		// 8 of the 16 sequences at TP4: the container's 4 GPUs no longer serve what the
		// 8 did, and a server asked for 16 that holds 8 does not fit. None does:
		// TP2×PP2 comes closest (15), and the reason says so.
		if p := find(t, r, "TP4"); p.Sequences != 8 || p.Verdict != DoesNotFit || !strings.Contains(p.Why, "holds 8 of the 16") {
			t.Errorf("TP4: %d, %s: %s", p.Sequences, p.Verdict, p.Why)
		}
		if p := find(t, r, "TP2×PP2"); p.Sequences != 15 || p.Verdict != DoesNotFit {
			t.Errorf("TP2×PP2: %d, %s", p.Sequences, p.Verdict)
		}
		if r.Recommended != -1 || !strings.Contains(r.Why, "the most is 15, at TP2×PP2") {
			t.Errorf("recommended %d: %s", r.Recommended, r.Why)
		}
		// In FP8 the cache per token halves: TP4 then holds 15, TP2×PP2 29.
		kv8 := o
		kv8.KV = KVDType{Name: "fp8", Bytes: 1}
		r8, err := Fit(m, gpusOn(4, proMemory, 1), kv8)
		if err != nil {
			t.Fatal(err)
		}
		tp4.perToken /= 2
		if p := find(t, r8, "TP4"); p.Sequences != tp4.kv/(tp4.perToken*ctx+tp4.state) {
			t.Errorf("FP8 TP4: %d sequences, by hand %d", p.Sequences, tp4.kv/(tp4.perToken*ctx+tp4.state))
		}
	})
}

// TestRanking checks the order of preference on crafted placements.
func TestRanking(t *testing.T) {
	p := func(tp, pp, replicas int, v Verdict, seqs int64, spans bool, crossing int) Placement {
		return Placement{TP: tp, PP: pp, Replicas: replicas, Verdict: v, Sequences: seqs, SpansNUMA: spans, CrossNodeAllReduces: crossing}
	}
	for _, c := range []struct {
		name string
		p2p  bool
		in   []Placement
		want string
	}{
		{"what fits before what is tight", true, []Placement{p(4, 1, 2, Tight, 16, false, 0), p(8, 1, 1, Fits, 20, true, 120)}, "TP8"},
		{"fewest GPUs per replica", true, []Placement{p(8, 1, 1, Fits, 40, false, 0), p(4, 1, 2, Fits, 20, false, 0)}, "TP4"},
		{"TP inside a node", true, []Placement{p(8, 1, 1, Fits, 40, true, 120), p(4, 2, 1, Fits, 20, false, 0)}, "TP4×PP2"},
		{"shallowest pipeline", true, []Placement{p(2, 2, 2, Fits, 30, false, 0), p(4, 1, 2, Fits, 18, false, 0)}, "TP4"},
		{"the most room of the tight", true, []Placement{p(4, 1, 1, Tight, 16, false, 0), p(2, 2, 1, Tight, 17, false, 0)}, "TP2×PP2"},
		{"never what does not fit", true, []Placement{p(4, 1, 1, DoesNotFit, 8, false, 0), p(2, 2, 1, DoesNotFit, 15, false, 0)}, ""},
		// Both span nodes: without P2P every all-reduce goes through host memory, and
		// the fewest that cross nodes win over more sequences.
		{"without P2P, fewest cross-node all-reduces", false, []Placement{p(8, 1, 1, Fits, 40, true, 120), p(8, 1, 1, Fits, 30, true, 60)}, "60"},
		{"with P2P, more sequences", true, []Placement{p(8, 1, 1, Fits, 40, true, 120), p(8, 1, 1, Fits, 30, true, 60)}, "120"},
		{"nothing", true, []Placement{p(1, 1, 8, DoesNotFit, 0, false, 0)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := &Result{Placements: c.in}
			recommend(res, Options{P2P: c.p2p})
			got := ""
			if res.Recommended >= 0 {
				r := res.Placements[res.Recommended]
				got = r.Name()
				if strings.HasPrefix(c.name, "with") {
					got = fmt.Sprint(r.CrossNodeAllReduces)
				}
			}
			if got != c.want {
				t.Errorf("recommended %q, want %q (%s)", got, c.want, res.Why)
			}
		})
	}
}

// TestVerdicts checks the thresholds of Judge through verdict: a cache that holds fewer
// sequences than asked does not fit, whatever it holds (8 of 16 included); one that holds
// them with less than 10% of it to spare is tight; with 10% or more, it fits.
func TestVerdicts(t *testing.T) {
	const per = 1000 // bytes per sequence
	for _, c := range []struct {
		kv       int64
		replicas int
		want     Verdict
	}{
		{-1, 1, DoesNotFit}, {0, 1, DoesNotFit},
		{8 * per, 1, DoesNotFit},    // 8 of 16
		{16*per - 1, 1, DoesNotFit}, // 15 of 16
		{16 * per, 1, Tight},        // all 16, nothing to spare
		{17*per + 599, 1, Tight},    // 9.99% to spare
		{17*per + 600, 1, Fits},     // 10%
		{8 * per, 2, Tight},         // 8 in each of 2 replicas: 16, nothing to spare
		{9 * per, 2, Fits},          // 8 of each replica's 9: 12.5% to spare
		{6 * per, 3, Tight},         // ⌈16/3⌉ = 6 per replica, nothing to spare
		{5 * per, 3, DoesNotFit},    // 15 of 16
	} {
		p := Placement{Replicas: c.replicas, Stages: []Stage{{KV: c.kv, PerSequence: per}}}
		p.Sequences = max(c.kv, 0) / per * int64(c.replicas)
		v, headroom, why := verdict(p, Options{Context: 1000, Concurrency: 16}, 0)
		if v != c.want {
			t.Errorf("KV %d over %d replicas: %s (%s), want %s", c.kv, c.replicas, v, why, c.want)
		}
		if c.kv > 0 && v != Judge(true, headroom) {
			t.Errorf("KV %d: verdict %s, Judge of its headroom %g %s", c.kv, v, headroom, Judge(true, headroom))
		}
	}
}

// Weights estimated from config.json are judged at the estimate's worst: a cache that
// fits by the exact bytes, with 10% to spare, is tight when the weights may be
// hfmodel.EstimateError larger and that much would come out of the cache.
func TestVerdictOfAnEstimate(t *testing.T) {
	const per = 1000
	// 10 MB of weights, ±0.01%: up to 1,000 bytes more, one sequence's worth.
	p := Placement{Replicas: 1, Sequences: 17, Stages: []Stage{{KV: 17*per + 600, PerSequence: per, Weights: 10_000_000}}}
	o := Options{Context: 1000, Concurrency: 16}
	if v, _, why := verdict(p, o, 0); v != Fits {
		t.Errorf("exact weights: %s (%s), want fits", v, why)
	}
	v, headroom, why := verdict(p, o, hfmodel.EstimateError)
	if v != Tight || !strings.Contains(why, "the weights' estimate taken 0.01% high") || headroom >= Margin {
		t.Errorf("estimated weights: %s, %g (%s), want tight, said so", v, headroom, why)
	}
}

// TestImpossible: the model's shape rules placements out, and says why.
func TestImpossible(t *testing.T) {
	m := config(t, "llama-3.1-70b-instruct")
	if why := impossible(m, 16, 1); why != "" {
		t.Errorf("TP16 of 64 heads and 8 KV heads (copied): %s", why)
	}
	m.Heads = 40
	if why := impossible(m, 16, 1); !strings.Contains(why, "40 attention heads do not split over 16 ranks") {
		t.Errorf("%q", why)
	}
	if why := impossible(m, 1, 128); !strings.Contains(why, "128 pipeline stages for 80 layers") {
		t.Errorf("%q", why)
	}
	q := config(t, "qwen3.5-27b")
	if why := impossible(q, 32, 1); !strings.Contains(why, "do not split") {
		t.Errorf("%q", why)
	}
	// Qwen3-30B-A3B in FP8 blocks of 128: 768 / 8 = 96 is not a multiple of 128, so
	// TP8 needs expert parallelism (model-fit.md §3).
	moe := config(t, "qwen3-30b-a3b")
	moe.Quant = hfmodel.Quant{Scheme: "fp8", Block: [2]int{128, 128}}
	notes := placementNotes(moe, 8, 1, Placement{})
	if len(notes) != 1 || !strings.Contains(notes[0], "768 over 8 ranks is not a multiple of the 128-wide FP8 blocks") {
		t.Errorf("%q", notes)
	}
	if notes := placementNotes(moe, 4, 1, Placement{}); len(notes) != 1 {
		t.Errorf("768 / 4 = 192 is not a multiple of 128 either: %q", notes)
	}
	if notes := placementNotes(moe, 2, 1, Placement{}); len(notes) != 0 {
		t.Errorf("768 / 2 = 384 = 3 × 128: %q", notes)
	}
}

// TestUnsized: a model whose config lacks what the KV cache needs is refused with the
// fields named, unless --kv-bytes-per-token gives the figure.
func TestUnsized(t *testing.T) {
	m := config(t, "llama-3.1-70b-instruct")
	m.Missing = []string{"num_key_value_heads"}
	m.Weights = hfmodel.Weights{Layers: make([]hfmodel.LayerBytes, 80)}
	o := Options{Engine: VLLM, KV: KVDType{Bytes: 2}, Context: 1000, Concurrency: 1}
	if _, err := Fit(m, gpusOn(2, proMemory, 1), o); !errors.Is(err, ErrUnsized) || !strings.Contains(err.Error(), "lacks num_key_value_heads") {
		t.Errorf("%v", err)
	}
	o.KVBytesPerToken = 327680
	r, err := Fit(m, gpusOn(2, proMemory, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	// The whole model's 327,680 bytes per token, split over TP2.
	if p := find(t, r, "TP2"); p.PerToken != 327680/2 {
		t.Errorf("TP2 per token %d", p.PerToken)
	}
}

// TestTable checks each GPU of the table against the names the embedded pci.ids gives
// its id, so that a figure cannot sit under the wrong device id. (Not the host's file: a
// distribution's copy can predate the name, as Debian 12's names 10de:2321 only GH100.)
func TestTable(t *testing.T) {
	names := pciids.Names{pciids.Embedded()}
	ids := map[uint16]bool{}
	for _, k := range known {
		id := k.id
		if ids[id] {
			t.Errorf("%04x: twice in the table", id)
		}
		ids[id] = true
		name := names.Device(0x10de, id)
		if !strings.Contains(name, k.Name) && !strings.Contains(k.Name, strings.Trim(name[strings.Index(name, "[")+1:], "]")) {
			t.Errorf("%04x: the table says %q, pci.ids %q", id, k.Name, name)
		}
		if k.Bytes <= 0 || k.Source == "" || k.Kind == "" {
			t.Errorf("%04x: %+v", id, k)
		}
	}
	if k, ok := Lookup(0x10de, 0x2bb1); !ok || k.Bytes != 97887*MiB {
		t.Errorf("RTX PRO 6000: %+v", k)
	}
}

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{{"96GB", 96_000_000_000}, {"97887MiB", 97887 * MiB}, {"80 GiB", 80 * GiB}, {"1.5TB", 1_500_000_000_000}, {"96", -1}, {"96 GBs", -1}, {"-3GB", -1}, {"GB", -1},
		// Past int64 the conversion would wrap: past 8 TiB is refused, as is less than a byte.
		{"8TiB", 8 << 40}, {"8.001TiB", -1}, {"1e30TB", -1}, {"99999999999999999999TB", -1}, {"0.1B", -1}} {
		got, err := ParseSize(c.in)
		if c.want < 0 {
			if err == nil {
				t.Errorf("%q: %d, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}
