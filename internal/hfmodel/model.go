// Package hfmodel reads a Hugging Face model directory without loading a tensor: the
// shape of the model from config.json (layers, attention and KV heads, head dim; MLA's
// latent; sliding-window and linear-attention layers with the layer pattern; experts),
// its quantisation (quantization_config, hf_quant_config.json), and the exact bytes of
// every tensor from the safetensors headers. What the config lacks for sizing the KV
// cache is named, never guessed.
package hfmodel

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// LayerKind is the attention of one decoder layer.
type LayerKind int

const (
	// LayerFull attends over the whole sequence: its KV cache grows with every token.
	LayerFull LayerKind = iota
	// LayerSliding attends over the last SlidingWindow tokens: its cache stops growing.
	LayerSliding
	// LayerLinear is linear attention (Gated DeltaNet): a fixed-size state per
	// sequence instead of a per-token cache.
	LayerLinear
)

// String names a kind in the tests' messages.
func (k LayerKind) String() string {
	switch k {
	case LayerSliding:
		return "sliding"
	case LayerLinear:
		return "linear"
	}
	return "full"
}

// MLA is multi-head latent attention (DeepSeek-V2/V3, Kimi K2): one latent vector of
// KVLoraRank + RopeDim elements per token and layer, the same on every TP rank.
type MLA struct {
	KVLoraRank, RopeDim int
	// IndexHeadDim is DeepSeek-V3.2's sparse-attention indexer, which caches
	// IndexHeadDim FP8 values and a 4-byte scale per 128 of them per token and layer;
	// 0 for models without one.
	IndexHeadDim int
}

// Linear is the shape of linear-attention layers (Gated DeltaNet, as Qwen3-Next and
// Qwen3.5 use): per sequence and layer a convolution state of
// (2·KeyHeads·KeyDim + ValueHeads·ValueDim) × (ConvKernel − 1) elements and a recurrent
// state of ValueHeads × KeyDim × ValueDim, both split across TP by heads.
type Linear struct {
	KeyHeads, ValueHeads, KeyDim, ValueDim, ConvKernel int
	// StateBytes is the width of the recurrent state's elements: mamba_ssm_dtype of the
	// config, float32 when it says none (what the engines keep it in for these models).
	StateBytes int
	// StateDType names it, for the report.
	StateDType string
}

// Model is what a model directory says of the model.
type Model struct {
	Dir string
	// Name is the directory's name, or the model's own name where config.json gives one.
	Name string
	// Architecture is architectures[0] of config.json; ModelType the text model's
	// model_type.
	Architecture, ModelType string

	Layers, Hidden, Heads, KVHeads, HeadDim int
	// MLA is set for latent attention; its layers count as full.
	MLA *MLA
	// Kinds is each layer's attention; SlidingWindow the window of the sliding ones.
	Kinds         []LayerKind
	SlidingWindow int
	Linear        *Linear

	// Experts is the routed experts per MoE layer (0 for a dense model), TopK how
	// many each token uses; MoEIntermediate the width of one expert.
	Experts, TopK, SharedExperts, MoEIntermediate, Intermediate int
	// MaxContext is max_position_embeddings.
	MaxContext int
	// DType is the model's dtype (torch_dtype or dtype), DTypeBytes its width: what an
	// engine's "auto" KV cache takes per element.
	DType      string
	DTypeBytes int
	Tied       bool
	Quant      Quant
	Weights    Weights
	// WeightsFrom says where Weights come from: WeightsExact, the safetensors headers,
	// or WeightsEstimate, config.json's architecture (EstimateWeights), for a directory
	// without safetensors files.
	WeightsFrom string
	// shape is what the estimate needs of config.json beyond the fields above.
	shape *shape

	// Missing names the fields the KV cache cannot be sized without, as config.json
	// spells them; empty when the model is understood.
	Missing []string
	// Notes are what is worth knowing: defaults taken, what the index claims, shards
	// present as headers alone.
	Notes []string
}

// Count returns how many layers are of kind k.
func (m *Model) Count(k LayerKind) int {
	n := 0
	for _, x := range m.Kinds {
		if x == k {
			n++
		}
	}
	return n
}

// Attention names the model's attention: "MLA", "hybrid linear", "sliding window",
// "GQA" (fewer KV heads than query heads), "MHA".
func (m *Model) Attention() string {
	switch {
	case m.MLA != nil:
		return "MLA"
	case m.Count(LayerLinear) > 0:
		return "hybrid linear attention"
	case m.Count(LayerSliding) > 0:
		return "sliding window"
	case m.KVHeads > 0 && m.KVHeads < m.Heads:
		return "GQA"
	}
	return "MHA"
}

// Load reads the model in dir: config.json (required), the quantisation config, and the
// header of every safetensors shard. config.json is read whole, capped; of the shards
// only the headers. Every file is read inside dir (see modelDir): a link out of it is
// refused, as is what is not a regular file. A directory without safetensors files
// gets its weights estimated from config.json (EstimateWeights), WeightsFrom says so.
func Load(dir string) (*Model, error) {
	d, err := openModelDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	m, err := loadConfig(d)
	if err != nil {
		return nil, err
	}
	w, notes, err := readWeights(d, m.Layers)
	if errors.Is(err, errNoWeights) {
		if w, err = m.EstimateWeights(); err != nil {
			return nil, fmt.Errorf("%s: %w", d.show("config.json"), err)
		}
		m.Weights, m.WeightsFrom = w, WeightsEstimate
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	m.Weights, m.WeightsFrom = w, WeightsExact
	m.Notes = append(m.Notes, notes...)
	if w.MTP > 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("%s of multi-token-prediction layers are not counted: engines load them only for speculative decoding", GB(w.MTP)))
	}
	return m, nil
}

// LoadConfig reads what Load reads but the shards: the model's shape and quantisation.
// The tests of hfmodel and fit use it to take a model's shape without its weights.
func LoadConfig(dir string) (*Model, error) {
	d, err := openModelDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return loadConfig(d)
}

func loadConfig(d *modelDir) (*Model, error) {
	data, err := d.readFile("config.json", MaxConfigBytes, "a model's config.json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s has no config.json: give the Hugging Face model's directory, the one with config.json (safetensors files optional)", d.path)
	}
	if err != nil {
		return nil, err
	}
	cfgPath := d.show("config.json")
	m, top, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	m.Dir, m.Name = d.path, filepath.Base(filepath.Clean(d.path))
	if err := m.readQuant(d, top); err != nil {
		return nil, err
	}
	if m.DTypeBytes == 4 {
		m.Notes = append(m.Notes, "config.json gives float32: vLLM and SGLang serve a float32 checkpoint in 16 bits unless told otherwise (--dtype), so the weights in GPU memory are about half the bytes counted here")
	}
	return m, nil
}

// ParseConfig reads a config.json's bytes: the model's shape, and the quantisation
// config.json gives (not hf_quant_config.json, which is a file of its own). Its Weights
// are empty. The fuzz targets of hfmodel and fit (FuzzConfig, FuzzFit) use it.
func ParseConfig(data []byte) (*Model, error) {
	m, top, err := parseConfig(data)
	if err != nil {
		return nil, err
	}
	m.readConfigQuant(top)
	return m, nil
}

func parseConfig(data []byte) (*Model, object, error) {
	top, err := parseObject(data)
	if err != nil {
		return nil, nil, err
	}
	m := &Model{}
	if err := m.readConfig(top); err != nil {
		return nil, nil, err
	}
	m.readShape(top)
	return m, top, nil
}

func (m *Model) readConfig(top object) error {
	c := newTextConfig(top)
	if err := checkBounds(c); err != nil {
		return err
	}
	if a := top.strings("architectures"); len(a) > 0 {
		m.Architecture = printable(a[0])
	}
	m.ModelType = c.text.str("model_type")
	if m.ModelType == "" {
		m.ModelType = top.str("model_type")
	}
	m.ModelType = printable(m.ModelType)
	var missing []string
	need := func(key string) int {
		v, ok := c.int(key)
		if !ok {
			missing = append(missing, c.field(key))
		}
		return v
	}
	layers, ok := c.firstIntValue("num_hidden_layers", "n_layer", "num_layers", "n_layers")
	if !ok || layers <= 0 {
		return fmt.Errorf("it gives no num_hidden_layers: gpusplit cannot tell the model's layers, which place its weights and its KV cache")
	}
	m.Layers = layers
	m.Hidden, _ = c.firstIntValue("hidden_size", "n_embd", "d_model")
	m.Heads, _ = c.firstIntValue("num_attention_heads", "n_head")
	m.MaxContext, _ = c.firstIntValue("max_position_embeddings", "n_positions", "max_sequence_length")
	m.Intermediate, _ = c.int("intermediate_size")
	m.Experts, _ = c.firstIntValue("num_experts", "n_routed_experts", "num_local_experts")
	m.TopK, _ = c.firstIntValue("num_experts_per_tok", "experts_per_token", "moe_topk")
	m.SharedExperts, _ = c.firstIntValue("n_shared_experts", "num_shared_experts")
	if m.SharedExperts == 0 && c.has("shared_expert_intermediate_size") {
		m.SharedExperts = 1
	}
	m.MoEIntermediate, _ = c.int("moe_intermediate_size")
	if tied, ok := c.lookup("tie_word_embeddings"); ok {
		m.Tied, _ = tied.bool("tie_word_embeddings")
	}
	m.DType = c.str("torch_dtype")
	if m.DType == "" {
		m.DType = c.str("dtype")
	}
	m.DType = printable(m.DType)
	if b, ok := dtypeBytes(m.DType); ok {
		m.DTypeBytes = b
	} else {
		m.DTypeBytes = 2
		if m.DType == "" {
			m.Notes = append(m.Notes, "config.json gives no torch_dtype: the KV cache's auto dtype is taken as 16-bit")
		}
	}

	if c.has("kv_lora_rank") {
		mla := &MLA{KVLoraRank: need("kv_lora_rank"), RopeDim: need("qk_rope_head_dim")}
		mla.IndexHeadDim, _ = c.int("index_head_dim")
		m.MLA = mla
		m.Kinds = make([]LayerKind, layers)
		m.Missing = missing
		m.KVHeads, _ = c.int("num_key_value_heads")
		if m.Heads == 0 {
			m.Missing = append(m.Missing, c.field("num_attention_heads"))
		}
		return nil
	}

	kinds, problems := layerKinds(c, layers)
	if problems != nil {
		m.Missing = append(m.Missing, problems...)
		kinds = make([]LayerKind, layers)
	}
	m.Kinds = kinds
	if m.Heads == 0 {
		missing = append(missing, c.field("num_attention_heads"))
	}
	if kv, ok := c.firstIntValue("num_key_value_heads", "n_head_kv", "num_kv_heads"); ok {
		m.KVHeads = kv
	} else if m.Heads > 0 {
		m.KVHeads = m.Heads
		m.Notes = append(m.Notes, fmt.Sprintf("config.json gives no num_key_value_heads: taken as num_attention_heads (%d), multi-head attention", m.Heads))
	}
	if hd, ok := c.int("head_dim"); ok && hd > 0 {
		m.HeadDim = hd
	} else if m.Hidden > 0 && m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	} else {
		missing = append(missing, c.field("head_dim")+" (or hidden_size)")
	}
	if m.Count(LayerSliding) > 0 {
		m.SlidingWindow = need("sliding_window")
	}
	if m.Count(LayerLinear) > 0 {
		l := &Linear{
			KeyHeads: need("linear_num_key_heads"), ValueHeads: need("linear_num_value_heads"),
			KeyDim: need("linear_key_head_dim"), ValueDim: need("linear_value_head_dim"),
			ConvKernel: need("linear_conv_kernel_dim"),
		}
		l.StateDType = printable(c.str("mamba_ssm_dtype"))
		if b, ok := dtypeBytes(l.StateDType); ok {
			l.StateBytes = b
		} else {
			l.StateBytes, l.StateDType = 4, "float32"
			m.Notes = append(m.Notes, "config.json gives no mamba_ssm_dtype: the linear-attention state is taken as float32, the engines' default for these models")
		}
		m.Linear = l
	}
	m.Missing = append(m.Missing, missing...)
	return nil
}

// firstIntValue is firstInt without the name.
func (c textConfig) firstIntValue(keys ...string) (int, bool) {
	v, _, ok := c.firstInt(keys...)
	return v, ok
}

// readConfigQuant takes the quantisation from config.json's quantization_config (or
// compression_config).
func (m *Model) readConfigQuant(top object) {
	c := newTextConfig(top)
	for _, key := range []string{"quantization_config", "compression_config"} {
		if o, ok := c.lookup(key); ok {
			m.Quant = parseQuant(o.sub(key), "config.json "+key)
			return
		}
	}
}

// readQuant takes the quantisation from config.json, else from hf_quant_config.json,
// Model Optimizer's file.
func (m *Model) readQuant(d *modelDir, top object) error {
	m.readConfigQuant(top)
	data, err := d.readFile("hf_quant_config.json", MaxConfigBytes, "a model's hf_quant_config.json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	o, err := parseObject(data)
	if err != nil {
		return fmt.Errorf("%s: %v", d.show("hf_quant_config.json"), err)
	}
	q := modelOpt(o.sub("quantization"), "hf_quant_config.json")
	switch {
	case m.Quant.Scheme == "":
		m.Quant = q
	case m.Quant.KVCache == "":
		m.Quant.KVCache = q.KVCache
	}
	return nil
}

// ErrorText words a share as the estimate's error: "±0.5%".
func ErrorText(f float64) string {
	return "±" + strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f*100), "0"), ".") + "%"
}

// GB words a byte count in decimal gigabytes, as model sizes are quoted: "223.4 GB".
func GB(n int64) string {
	s := fmt.Sprintf("%.1f GB", float64(n)/1e9)
	return strings.Replace(s, ".0 GB", " GB", 1)
}
