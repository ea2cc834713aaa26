package hfmodel

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/safetensors"
	"github.com/gpusplit/gpusplit/internal/testutils/checkpoint"
)

const models = "../../testdata/models/"

// TestConfigs reads the config.json of each kept public model (SOURCE beside each says
// where it is from) and checks what the KV cache and the placement depend on against
// the figures of the file, read by eye.
func TestConfigs(t *testing.T) {
	type want struct {
		attention               string
		layers, full, swa, lin  int
		heads, kv, headDim      int
		window                  int
		mla                     MLA
		linear                  Linear
		experts, topK, moeWidth int
		quant                   string
		block                   [2]int
		group                   int
		maxContext, dtypeBytes  int
		tied                    bool
	}
	for _, c := range []struct {
		dir  string
		want want
	}{
		{"llama-3.1-70b-instruct", want{attention: "GQA", layers: 80, full: 80, heads: 64, kv: 8, headDim: 128, maxContext: 131072, dtypeBytes: 2}},
		{"deepseek-v3", want{attention: "MLA", layers: 61, full: 61, heads: 128, kv: 128, mla: MLA{KVLoraRank: 512, RopeDim: 64},
			experts: 256, topK: 8, moeWidth: 2048, quant: "fp8", block: [2]int{128, 128}, maxContext: 163840, dtypeBytes: 2}},
		// Olmo 3 gives no head_dim: hidden_size / num_attention_heads = 5120 / 40.
		{"olmo-3.1-32b-instruct", want{attention: "sliding window", layers: 64, full: 16, swa: 48, heads: 40, kv: 8, headDim: 128, window: 4096, maxContext: 65536, dtypeBytes: 2}},
		{"qwen3.5-27b", want{attention: "hybrid linear attention", layers: 64, full: 16, lin: 48, heads: 24, kv: 4, headDim: 256,
			linear: Linear{KeyHeads: 16, ValueHeads: 48, KeyDim: 128, ValueDim: 128, ConvKernel: 4, StateBytes: 4, StateDType: "float32"}, maxContext: 262144, dtypeBytes: 2}},
		// sliding_window is null: full attention everywhere.
		{"qwen3-30b-a3b", want{attention: "GQA", layers: 48, full: 48, heads: 32, kv: 4, headDim: 128, experts: 128, topK: 8, moeWidth: 768, maxContext: 40960, dtypeBytes: 2}},
		{"qwen3.5-122b-a10b-fp8", want{attention: "hybrid linear attention", layers: 48, full: 12, lin: 36, heads: 32, kv: 2, headDim: 256,
			linear:  Linear{KeyHeads: 16, ValueHeads: 64, KeyDim: 128, ValueDim: 128, ConvKernel: 4, StateBytes: 4, StateDType: "float32"},
			experts: 256, topK: 8, moeWidth: 1024, quant: "fp8", block: [2]int{128, 128}, maxContext: 262144, dtypeBytes: 2}},
		// No layer_types: full_attention_interval 4 makes layers 3, 7, … full.
		{"qwen3-next-80b-a3b", want{attention: "hybrid linear attention", layers: 48, full: 12, lin: 36, heads: 16, kv: 2, headDim: 256,
			linear:  Linear{KeyHeads: 16, ValueHeads: 32, KeyDim: 128, ValueDim: 128, ConvKernel: 4, StateBytes: 4, StateDType: "float32"},
			experts: 512, topK: 10, moeWidth: 512, maxContext: 262144, dtypeBytes: 2}},
		{"qwen3.5-397b-a17b-nvfp4-like", want{attention: "hybrid linear attention", layers: 60, full: 15, lin: 45, heads: 32, kv: 2, headDim: 256,
			linear:  Linear{KeyHeads: 16, ValueHeads: 64, KeyDim: 128, ValueDim: 128, ConvKernel: 4, StateBytes: 4, StateDType: "float32"},
			experts: 512, topK: 10, moeWidth: 1024, quant: "nvfp4", group: 16, maxContext: 262144, dtypeBytes: 2}},
	} {
		t.Run(c.dir, func(t *testing.T) {
			m, err := LoadConfig(models + c.dir)
			if err != nil {
				t.Fatal(err)
			}
			w := c.want
			if len(m.Missing) > 0 {
				t.Errorf("missing %v", m.Missing)
			}
			if m.Attention() != w.attention || m.Layers != w.layers || m.Count(LayerFull) != w.full || m.Count(LayerSliding) != w.swa || m.Count(LayerLinear) != w.lin {
				t.Errorf("attention %s, %d layers: %d full, %d sliding, %d linear", m.Attention(), m.Layers, m.Count(LayerFull), m.Count(LayerSliding), m.Count(LayerLinear))
			}
			if m.Heads != w.heads || m.KVHeads != w.kv || m.HeadDim != w.headDim || m.SlidingWindow != w.window {
				t.Errorf("heads %d, KV heads %d of %d, window %d", m.Heads, m.KVHeads, m.HeadDim, m.SlidingWindow)
			}
			if (m.MLA == nil) != (w.mla == MLA{}) || m.MLA != nil && *m.MLA != w.mla {
				t.Errorf("MLA %+v", m.MLA)
			}
			if (m.Linear == nil) != (w.linear == Linear{}) || m.Linear != nil && *m.Linear != w.linear {
				t.Errorf("linear %+v", m.Linear)
			}
			if m.Experts != w.experts || m.TopK != w.topK || m.MoEIntermediate != w.moeWidth {
				t.Errorf("experts %d, top %d, width %d", m.Experts, m.TopK, m.MoEIntermediate)
			}
			if m.Quant.Scheme != w.quant || m.Quant.Block != w.block || m.Quant.GroupSize != w.group {
				t.Errorf("quant %+v", m.Quant)
			}
			if m.MaxContext != w.maxContext || m.DTypeBytes != w.dtypeBytes || m.Tied != w.tied {
				t.Errorf("context %d, dtype %d bytes, tied %v", m.MaxContext, m.DTypeBytes, m.Tied)
			}
		})
	}
}

// TestLayerPatterns checks the layer kinds of the patterns a config can give, and that
// the first full layer of each interval model is layer 3.
func TestLayerPatterns(t *testing.T) {
	for _, c := range []struct {
		name, config string
		want         string // a letter per layer: f full, s sliding, l linear
	}{
		{"interval", `{"num_hidden_layers": 8, "full_attention_interval": 4, "linear_num_value_heads": 8}`, "lllflllf"},
		{"layer_types", `{"num_hidden_layers": 4, "layer_types": ["sliding_attention","full_attention","linear_attention","full_attention"], "sliding_window": 8}`, "sflf"},
		// Gemma 3: five local layers to one global.
		{"sliding_window_pattern", `{"num_hidden_layers": 7, "sliding_window": 512, "sliding_window_pattern": 6}`, "sssssfs"},
		// Qwen2: the window applies from max_window_layers up, when switched on.
		{"max_window_layers", `{"num_hidden_layers": 4, "sliding_window": 4096, "use_sliding_window": true, "max_window_layers": 2}`, "ffss"},
		{"use_sliding_window false", `{"num_hidden_layers": 3, "sliding_window": 4096, "use_sliding_window": false, "max_window_layers": 1}`, "fff"},
		// Mistral 7B v0.1: a window on every layer.
		{"window on every layer", `{"num_hidden_layers": 2, "sliding_window": 4096}`, "ss"},
		{"null window", `{"num_hidden_layers": 2, "sliding_window": null}`, "ff"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := parseObject([]byte(c.config))
			if err != nil {
				t.Fatal(err)
			}
			n, _ := o.int("num_hidden_layers")
			kinds, problems := layerKinds(newTextConfig(o), n)
			if problems != nil {
				t.Fatal(problems)
			}
			var got strings.Builder
			for _, k := range kinds {
				got.WriteByte(k.String()[0])
			}
			if got.String() != c.want {
				t.Errorf("%s, want %s", got.String(), c.want)
			}
		})
	}
}

// TestMissingFields: a config the KV cache cannot be sized from says which fields it
// lacks, as config.json spells them, instead of a guess.
func TestMissingFields(t *testing.T) {
	for _, c := range []struct {
		name, config string
		want         []string
	}{
		{"no heads, no head_dim", `{"num_hidden_layers": 4}`, []string{"num_attention_heads", "head_dim (or hidden_size)"}},
		{"MLA without its rope part", `{"num_hidden_layers": 4, "num_attention_heads": 8, "kv_lora_rank": 512}`, []string{"qk_rope_head_dim"}},
		{"linear layers without their heads", `{"text_config": {"num_hidden_layers": 4, "num_attention_heads": 8, "head_dim": 64, "layer_types": ["linear_attention","linear_attention","linear_attention","full_attention"]}}`,
			[]string{"text_config.linear_num_key_heads", "text_config.linear_num_value_heads", "text_config.linear_key_head_dim", "text_config.linear_value_head_dim", "text_config.linear_conv_kernel_dim"}},
		{"a layer type gpusplit cannot size", `{"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64, "layer_types": ["mamba","full_attention"]}`,
			[]string{`layer_types holds "mamba", which gpusplit cannot size (it knows full_attention, sliding_attention and linear_attention)`}},
		{"sliding layers without a window", `{"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64, "layer_types": ["sliding_attention","full_attention"]}`, []string{"sliding_window"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.Missing, c.want) {
				t.Errorf("missing %q, want %q", m.Missing, c.want)
			}
		})
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"hidden_size": 8}`), 0o644)
	if _, err := LoadConfig(dir); err == nil || !strings.Contains(err.Error(), "no num_hidden_layers") {
		t.Errorf("no layers: %v", err)
	}
}

// build writes a kept model's config.json and the shards of specs into a directory.
func build(t *testing.T, model string, specs []checkpoint.Spec, o checkpoint.Options) string {
	t.Helper()
	dir := t.TempDir()
	if err := checkpoint.CopyConfig(models+model, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Write(dir, specs, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWeightsDense: Llama 3.1 70B in BF16, its bytes worked out from the dimensions of
// its config.json (L 80, h 8192, 64 heads and 8 KV heads of 128, MLP 28672, vocab 128256).
func TestWeightsDense(t *testing.T) {
	dir := build(t, "llama-3.1-70b-instruct", checkpoint.Llama(checkpoint.Dense{Layers: 80, Hidden: 8192, Intermediate: 28672, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 128256}), checkpoint.Options{})
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const h, inter, q, kv, vocab = 8192, 28672, 64 * 128, 8 * 128, 128256
	// Per layer: q and o are h×(64·128), k and v h×(8·128), gate, up and down h×28672,
	// two norms of h; two bytes each.
	split := int64(2 * (h*q + 2*h*kv + q*h + 3*h*inter))
	norms := int64(2 * 2 * h)
	embed := int64(2 * vocab * h)
	total := 80*(split+norms) + 2*embed + 2*h
	if m.Weights.Total != total || m.Weights.Serving() != total {
		t.Errorf("total %d, want %d", m.Weights.Total, total)
	}
	if m.Weights.Embed != embed || m.Weights.LMHead != embed || m.Weights.Final != 2*h {
		t.Errorf("embed %d, lm_head %d, final %d", m.Weights.Embed, m.Weights.LMHead, m.Weights.Final)
	}
	for i, l := range m.Weights.Layers {
		if l.Split != split || l.Replicated != norms || l.Experts != 0 {
			t.Fatalf("layer %d: %+v, want split %d, replicated %d", i, l, split, norms)
		}
	}
	// 141.1 GB: the "~141 GB" of the reference's Llama-3.1-70B example.
	if GB(total) != "141.1 GB" {
		t.Errorf("%s", GB(total))
	}
	// Shards of at most 5 GB, as save_pretrained cuts them: 30, as many as the
	// published checkpoint has.
	if m.Weights.Shards != 30 {
		t.Errorf("%d shards of at most 5 GB", m.Weights.Shards)
	}
}

// TestWeightsMoE: Qwen3-30B-A3B, 48 layers of 128 experts, each expert's gate, up and
// down of 768×2048; the router 128×2048 is kept whole by every rank.
func TestWeightsMoE(t *testing.T) {
	dir := build(t, "qwen3-30b-a3b", checkpoint.QwenMoE(checkpoint.MoE{Dense: checkpoint.Dense{Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936}, Experts: 128, ExpertWidth: 768}), checkpoint.Options{})
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const h, q, kv = 2048, 32 * 128, 4 * 128
	experts := int64(2 * 128 * 3 * 768 * h)
	attn := int64(2 * (h*q + 2*h*kv + q*h))
	replicated := int64(2 * (2*h + 2*128 + 128*h)) // two norms, q_norm and k_norm, the router
	l := m.Weights.Layers[47]
	if l.Experts != experts || l.Split != attn || l.Replicated != replicated {
		t.Errorf("layer 47 %+v, want experts %d, split %d, replicated %d", l, experts, attn, replicated)
	}
	total := 48*(experts+attn+replicated) + 2*2*151936*h + 2*h
	if m.Weights.Total != total {
		t.Errorf("total %d, want %d", m.Weights.Total, total)
	}
}

// fp8Bytes is an FP8 matrix of out×in with one F32 scale per 128×128 block.
func fp8Bytes(out, in int64) int64 { return out*in + (out+127)/128*((in+127)/128)*4 }

// TestWeightsMLA: DeepSeek-V3 in FP8 with block scales, its MTP layer (layer 61) told
// apart, the first three layers dense.
func TestWeightsMLA(t *testing.T) {
	d := checkpoint.DeepSeek{Layers: 61, DenseLayers: 3, Hidden: 7168, Intermediate: 18432, Heads: 128, QLoraRank: 1536, KVLoraRank: 512,
		NopeDim: 128, RopeDim: 64, VDim: 128, Experts: 256, ExpertWidth: 2048, Shared: 1, Vocab: 129280, MTPLayers: 1}
	dir := build(t, "deepseek-v3", checkpoint.DeepSeekV3(d), checkpoint.Options{})
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const h = 7168
	attn := fp8Bytes(1536, h) + fp8Bytes(128*(128+64), 1536) + fp8Bytes(512+64, h) + fp8Bytes(128*(128+128), 512) + fp8Bytes(h, 128*128)
	norms := int64(2 * (2*h + 1536 + 512))
	dense := 2*fp8Bytes(18432, h) + fp8Bytes(h, 18432)
	shared := 2*fp8Bytes(2048, h) + fp8Bytes(h, 2048)
	experts := 256 * (2*fp8Bytes(2048, h) + fp8Bytes(h, 2048))
	router := int64(256*h*2 + 256*4)
	if l := m.Weights.Layers[0]; l.Split != attn+dense || l.Replicated != norms || l.Experts != 0 {
		t.Errorf("dense layer %+v", l)
	}
	if l := m.Weights.Layers[3]; l.Split != attn+shared || l.Replicated != norms+router || l.Experts != experts {
		t.Errorf("MoE layer %+v, want split %d, replicated %d, experts %d", l, attn+shared, norms+router, experts)
	}
	layer := attn + shared + norms + router + experts
	embed := int64(129280 * h * 2)
	mtp := layer + 2*embed + 3*h*2 + h*2*h*2
	if m.Weights.MTP != mtp {
		t.Errorf("MTP %d, want %d", m.Weights.MTP, mtp)
	}
	if serving := 3*(attn+dense+norms) + 58*layer + 2*embed + h*2; m.Weights.Serving() != serving {
		t.Errorf("serving %d, want %d", m.Weights.Serving(), serving)
	}
}

// TestIndexChecks uses DeepSeek-V3's kept index, cut down to layer 0's attention with a
// total_size of 0: a shard with exactly those tensors loads, with a note on total_size;
// a tensor missing, one too many, or one in the wrong shard is an error.
func TestIndexChecks(t *testing.T) {
	attn := func() []checkpoint.Spec {
		var s []checkpoint.Spec
		for _, x := range []struct {
			name    string
			out, in int64
		}{{"q_a_proj", 1536, 7168}, {"q_b_proj", 24576, 1536}, {"kv_a_proj_with_mqa", 576, 7168}, {"kv_b_proj", 32768, 512}, {"o_proj", 7168, 16384}} {
			p := "model.layers.0.self_attn." + x.name
			s = append(s, checkpoint.Spec{Name: p + ".weight", DType: "F8_E4M3", Shape: []int64{x.out, x.in}},
				checkpoint.Spec{Name: p + ".weight_scale_inv", DType: "F32", Shape: []int64{(x.out + 127) / 128, (x.in + 127) / 128}})
		}
		return s
	}
	shard := func(t *testing.T, specs []checkpoint.Spec) string {
		dir := t.TempDir()
		if err := checkpoint.CopyConfig(models+"deepseek-v3", dir, "model.safetensors.index.json"); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, "model-00001-of-00001.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		n, err := safetensors.WriteHeader(f, specs, nil)
		off, _ := f.Seek(0, 1)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		os.Truncate(f.Name(), off+n)
		return dir
	}
	m, err := Load(shard(t, attn()))
	if err != nil {
		t.Fatal(err)
	}
	want := fp8Bytes(1536, 7168) + fp8Bytes(24576, 1536) + fp8Bytes(576, 7168) + fp8Bytes(32768, 512) + fp8Bytes(7168, 16384)
	if m.Weights.Total != want || !slices.Contains(m.Notes, "the index's total_size is 0; the headers' sum is used") {
		t.Errorf("total %d, want %d; notes %q", m.Weights.Total, want, m.Notes)
	}
	for _, c := range []struct {
		name  string
		specs []checkpoint.Spec
		want  string
	}{
		{"a tensor missing", attn()[1:], `the index lists 1 tensor that no shard holds ("model.layers.0.self_attn.q_a_proj.weight", in "model-00001-of-00001.safetensors")`},
		{"a tensor too many", append(attn(), checkpoint.Spec{Name: "model.norm.weight", DType: "BF16", Shape: []int64{7168}}), `holds tensor "model.norm.weight", which the index does not list`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Load(shard(t, c.specs)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want %q", err, c.want)
			}
		})
	}
	dir := shard(t, attn())
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map": {"a": "../outside.safetensors"}}`), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "outside the model's directory") {
		t.Errorf("outside: %v", err)
	}
}

// TestReferenceWeights reads the reference model's header-only shards and checks each
// part against the dimensions of reference397B, worked out here.
func TestReferenceWeights(t *testing.T) {
	m, err := Load(referenceDir)
	if err != nil {
		t.Fatal(err)
	}
	const h, vocab, e, width = 4096, 248320, 512, 1024
	// NVFP4 experts: per expert gate_up (2·1024)×4096 and down 4096×1024 weights at half
	// a byte, an FP8 scale per 16 inputs, and two F32 scalars per projection.
	nvfp4 := func(out, in int64) int64 { return out*in/2 + out*in/16 + 2*4 }
	experts := int64(e) * (nvfp4(2*width, h) + nvfp4(h, width))
	// Full attention: q_proj gated (2·32·256), k and v 2·256, o 32·256; q_norm, k_norm.
	full := int64(2 * (2*32*256*h + 2*2*256*h + 32*256*h))
	// Gated DeltaNet: qkv (2·16·128 + 64·128 = 12288), z 64·128, a and b 64, out; conv1d
	// 12288×4.
	qkv, v := int64(2*16*128+64*128), int64(64*128)
	linear := 2 * (qkv*h + v*h + 2*64*h + h*v + qkv*4)
	linearSmall := int64(64*4 + 64*2 + 128*2) // A_log (F32), dt_bias, norm
	shared := int64(2 * 3 * width * h)
	router := int64(2 * (e*h + h)) // the router and shared_expert_gate
	norms := int64(2 * 2 * h)
	if l := m.Weights.Layers[3]; l.Experts != experts || l.Split != full+shared || l.Replicated != norms+router+2*2*256 {
		t.Errorf("full layer %+v, want experts %d, split %d", l, experts, full+shared)
	}
	if l := m.Weights.Layers[0]; l.Experts != experts || l.Split != linear+shared || l.Replicated != norms+router+linearSmall {
		t.Errorf("linear layer %+v, want split %d, replicated %d", l, linear+shared, norms+router+linearSmall)
	}
	if m.Weights.Embed != 2*vocab*h || m.Weights.LMHead != 2*vocab*h {
		t.Errorf("embed %d, lm_head %d", m.Weights.Embed, m.Weights.LMHead)
	}
	if m.Weights.HeaderOnly != m.Weights.Shards || m.Weights.Shards != 62 {
		t.Errorf("%d of %d shards header-only", m.Weights.HeaderOnly, m.Weights.Shards)
	}
	// The sum the SOURCE file gives, and its size class.
	if s := m.Weights.Serving(); s != 237_943_824_992 || GB(s) != "237.9 GB" {
		t.Errorf("serving %d (%s)", s, GB(s))
	}
	if m.Quant.Label() != "NVFP4 (groups of 16, config.json quantization_config)" {
		t.Errorf("quant %q", m.Quant.Label())
	}
}
