package hfmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bound is the range gpusplit accepts for an integer field of config.json: 0 to Max.
// config.json is the model directory owner's to write, and its figures size slices
// (a kind per layer) and multiply into the memory arithmetic: a field past its bound is
// refused, naming the field, its value and the bound, rather than allocated or
// multiplied into a verdict.
//
// Each Max is the largest value among the published configs of the largest models
// (Largest, in Seen) times a margin for the models to come: 16, rounded up to a power
// of two, unless the comment says otherwise.
type Bound struct {
	// Fields are the names the field goes by, the usual one first.
	Fields []string
	Max    int64
	// Largest is the largest published value gpusplit knows of, Seen the model that
	// has it (its config.json on the Hugging Face Hub).
	Largest int64
	Seen    string
}

// The bounds, each field of config.json that hfmodel reads as an integer.
var Bounds = []Bound{
	// Llama 3.1 405B: 126 layers (meta-llama/Llama-3.1-405B). 2048 is the bound of
	// every field that counts or indexes layers.
	{Fields: []string{"num_hidden_layers", "n_layer", "num_layers", "n_layers"}, Max: MaxLayers, Largest: 126, Seen: "Llama 3.1 405B"},
	// Llama 3.1 405B: hidden_size 16384.
	{Fields: []string{"hidden_size", "n_embd", "d_model"}, Max: 1 << 18, Largest: 16384, Seen: "Llama 3.1 405B"},
	// Falcon-180B: 232 attention heads (tiiuae/falcon-180B), hidden 14848 of 64 each.
	{Fields: []string{"num_attention_heads", "n_head"}, Max: 1 << 12, Largest: 232, Seen: "Falcon-180B"},
	// DeepSeek-V3 lists 128 KV heads (deepseek-ai/DeepSeek-V3; its MLA caches a
	// latent, but the field is 128), as many as its attention heads.
	{Fields: []string{"num_key_value_heads", "n_head_kv", "num_kv_heads"}, Max: 1 << 11, Largest: 128, Seen: "DeepSeek-V3"},
	// DeepSeek-V4: head_dim 512; Gemma 2 and 3, Qwen3-Next and Qwen3.5 have 256.
	{Fields: []string{"head_dim"}, Max: 1 << 13, Largest: 512, Seen: "DeepSeek-V4"},
	// Llama 3.1 405B: intermediate_size 53248.
	{Fields: []string{"intermediate_size"}, Max: 1 << 20, Largest: 53248, Seen: "Llama 3.1 405B"},
	// DeepSeek-V3 and Kimi K2: experts of 2048. Bounded as intermediate_size is: an
	// expert is no wider than a dense MLP could be.
	{Fields: []string{"moe_intermediate_size"}, Max: 1 << 20, Largest: 2048, Seen: "DeepSeek-V3, Kimi K2"},
	// Switch-C: 2048 experts (google/switch-c-2048); of decoders, Qwen3.5 has 512.
	{Fields: []string{"num_experts", "n_routed_experts", "num_local_experts"}, Max: 1 << 15, Largest: 2048, Seen: "Switch-C"},
	// Qwen3-Next and Qwen3.5: 10 experts per token.
	{Fields: []string{"num_experts_per_tok", "experts_per_token", "moe_topk"}, Max: 1 << 8, Largest: 10, Seen: "Qwen3-Next, Qwen3.5"},
	// DeepSeek-V2: 2 shared experts. 64, 32 times: the bound costs nothing (the count
	// is only shown) and a few more shared experts are a plausible design.
	{Fields: []string{"n_shared_experts", "num_shared_experts"}, Max: 1 << 6, Largest: 2, Seen: "DeepSeek-V2"},
	// Llama 4 Scout: max_position_embeddings 10485760 (meta-llama/Llama-4-Scout-17B-16E);
	// MiniMax-M1 10240000.
	{Fields: []string{"max_position_embeddings", "n_positions", "max_sequence_length"}, Max: MaxContext, Largest: 10485760, Seen: "Llama 4 Scout"},
	// Phi-3 and Phi-4-mini: sliding_window 262144, longer than their context. A window
	// is bounded as the context is.
	{Fields: []string{"sliding_window"}, Max: MaxContext, Largest: 262144, Seen: "Phi-3 128k, Phi-4-mini"},
	// Gemma 3: a global layer every 6. A layer count: bounded as layers are.
	{Fields: []string{"sliding_window_pattern", "_sliding_window_pattern"}, Max: MaxLayers, Largest: 6, Seen: "Gemma 3"},
	// Qwen3-Next and Qwen3.5: a full-attention layer every 4. A layer count.
	{Fields: []string{"full_attention_interval"}, Max: MaxLayers, Largest: 4, Seen: "Qwen3-Next, Qwen3.5"},
	// Qwen2-72B: max_window_layers 80, all of its layers. A layer index.
	{Fields: []string{"max_window_layers"}, Max: MaxLayers, Largest: 80, Seen: "Qwen2-72B"},
	// DeepSeek-V3 and Kimi K2: a latent of 512 and a rotary part of 64.
	{Fields: []string{"kv_lora_rank"}, Max: 1 << 13, Largest: 512, Seen: "DeepSeek-V3, Kimi K2"},
	{Fields: []string{"qk_rope_head_dim"}, Max: 1 << 10, Largest: 64, Seen: "DeepSeek-V3, Kimi K2"},
	// DeepSeek-V3.2: the indexer's keys of 128.
	{Fields: []string{"index_head_dim"}, Max: 1 << 11, Largest: 128, Seen: "DeepSeek-V3.2"},
	// Qwen3-Next and Qwen3.5 (Gated DeltaNet): 16 key heads, up to 64 value heads
	// (Qwen3.5-397B-A17B), both of 128, a convolution of 4.
	{Fields: []string{"linear_num_key_heads"}, Max: 1 << 8, Largest: 16, Seen: "Qwen3-Next, Qwen3.5"},
	{Fields: []string{"linear_num_value_heads"}, Max: 1 << 10, Largest: 64, Seen: "Qwen3.5-397B-A17B"},
	{Fields: []string{"linear_key_head_dim"}, Max: 1 << 11, Largest: 128, Seen: "Qwen3-Next, Qwen3.5"},
	{Fields: []string{"linear_value_head_dim"}, Max: 1 << 11, Largest: 128, Seen: "Qwen3-Next, Qwen3.5"},
	{Fields: []string{"linear_conv_kernel_dim"}, Max: 1 << 6, Largest: 4, Seen: "Qwen3-Next, Qwen3.5"},
	// The fields below size only the weights' estimate (EstimateWeights), for a model
	// directory without safetensors files.
	// Gemma 3: a vocabulary of 262,208 (google/gemma-3-27b-it).
	{Fields: []string{"vocab_size", "padded_vocab_size"}, Max: 1 << 23, Largest: 262208, Seen: "Gemma 3"},
	// DeepSeek-V3 and Kimi K2: q_lora_rank 1536, qk_nope_head_dim and v_head_dim 128.
	{Fields: []string{"q_lora_rank"}, Max: 1 << 15, Largest: 1536, Seen: "DeepSeek-V3, Kimi K2"},
	{Fields: []string{"qk_nope_head_dim"}, Max: 1 << 11, Largest: 128, Seen: "DeepSeek-V3, Kimi K2"},
	{Fields: []string{"v_head_dim"}, Max: 1 << 11, Largest: 128, Seen: "DeepSeek-V3, Kimi K2"},
	// Qwen2-57B-A14B: a shared expert of 20480. Bounded as intermediate_size is.
	{Fields: []string{"shared_expert_intermediate_size"}, Max: 1 << 20, Largest: 20480, Seen: "Qwen2-57B-A14B"},
	// DeepSeek-V3: 3 dense layers before the MoE ones; Qwen's MoE: every layer sparse
	// (decoder_sparse_step 1). Layer counts.
	{Fields: []string{"first_k_dense_replace"}, Max: MaxLayers, Largest: 3, Seen: "DeepSeek-V3"},
	{Fields: []string{"decoder_sparse_step"}, Max: MaxLayers, Largest: 1, Seen: "Qwen2-MoE, Qwen3-MoE"},
}

// The bounds other code needs by name.
const (
	// MaxLayers bounds num_hidden_layers, and so the slices made per layer.
	MaxLayers = 1 << 11
	// MaxContext bounds max_position_embeddings (and sliding_window): 16 times Llama 4
	// Scout's 10,485,760, rounded up.
	MaxContext = 1 << 28
)

// BoundError is a field of config.json outside its bound.
type BoundError struct {
	// Field is the field as config.json spells it, with its nesting
	// ("text_config.num_hidden_layers"); Value its value, as a number.
	Field, Value string
	Bound        Bound
}

func (e *BoundError) Error() string {
	return fmt.Sprintf("%s is %s, outside the 0 to %d gpusplit accepts (the most in a published model is %d, in %s): no real model's config, or a damaged one",
		e.Field, e.Value, e.Bound.Max, e.Bound.Largest, e.Bound.Seen)
}

// checkBounds refuses the first field of c, where the text model's fields are looked
// up, that is a number outside its bound. A field that is not a number is left to the
// reader, which takes it as absent.
func checkBounds(c textConfig) error {
	for _, b := range Bounds {
		for _, key := range b.Fields {
			o, ok := c.lookup(key)
			if !ok {
				continue
			}
			f, ok := number(o[key])
			if !ok || (f >= 0 && f <= float64(b.Max)) {
				continue
			}
			return &BoundError{Field: c.field(key), Value: numberText(f), Bound: b}
		}
	}
	return nil
}

// number reads a JSON number; one too large for a float64 is an infinity. ok is false
// for what is not a number.
func number(raw json.RawMessage) (float64, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, false
	}
	var f float64
	if err := json.Unmarshal(t, &f); err != nil {
		if t[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	return f, true
}

// numberText words a value for a message: a whole number as such, else as Go prints a
// float64.
func numberText(f float64) string {
	switch {
	case math.IsInf(f, 0):
		return "a number past what a float64 holds"
	case f == math.Trunc(f) && math.Abs(f) < 1e15:
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// printable keeps what a terminal shows of a name config.json gives (architectures,
// model_type, a dtype, a quantisation method), cut to 64 bytes: the text output prints
// it as it is, and a control character in it would reach the terminal.
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			b.WriteString("…")
			break
		}
		if strconv.IsPrint(r) {
			b.WriteRune(r)
		} else {
			b.WriteRune('?')
		}
	}
	return b.String()
}
