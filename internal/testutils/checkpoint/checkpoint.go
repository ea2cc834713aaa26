// Package checkpoint writes Hugging Face checkpoints for tests: the tensors of a model
// architecture, named as its checkpoints name them, in safetensors shards with real
// headers and an index. The data is left out: a shard is its header followed by a hole
// (os.Truncate), as long as the real file and taking no disk, or its header alone.
//
// The tensor lists follow the modules of each architecture (Llama, Qwen3 MoE,
// DeepSeek-V3, Qwen3.5); the tests that use them compute what they expect from the
// dimensions themselves, never from these lists.
package checkpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpusplit/gpusplit/internal/safetensors"
)

// Spec is a tensor: name, dtype, shape.
type Spec = safetensors.Spec

// Data says what follows each shard's header.
type Data int

const (
	// Sparse: the file has its full length, the data a hole.
	Sparse Data = iota
	// HeaderOnly: the file ends with its header.
	HeaderOnly
)

// Options shape the files.
type Options struct {
	// ShardBytes is the most data a shard holds (a tensor larger than it gets a shard
	// of its own); 5 GB, what save_pretrained writes, when zero.
	ShardBytes int64
	Data       Data
	// NoIndex writes a single model.safetensors and no index (all tensors in it).
	NoIndex bool
}

// Write writes specs as shards into dir, with model.safetensors.index.json (its
// total_size the sum of the tensors, as save_pretrained writes it), and returns the
// bytes of the tensors.
func Write(dir string, specs []Spec, o Options) (int64, error) {
	if o.ShardBytes == 0 {
		o.ShardBytes = 5_000_000_000
	}
	var shards [][]Spec
	var cur []Spec
	var curBytes, total int64
	for _, s := range specs {
		n, err := s.Bytes()
		if err != nil {
			return 0, err
		}
		total += n
		if !o.NoIndex && len(cur) > 0 && curBytes+n > o.ShardBytes {
			shards = append(shards, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, s)
		curBytes += n
	}
	if len(cur) > 0 {
		shards = append(shards, cur)
	}
	weightMap := map[string]string{}
	for i, shard := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		if o.NoIndex {
			name = "model.safetensors"
		}
		if err := writeShard(filepath.Join(dir, name), shard, o.Data); err != nil {
			return 0, err
		}
		for _, s := range shard {
			weightMap[s.Name] = name
		}
	}
	if o.NoIndex {
		return total, nil
	}
	ix := map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}
	data, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return 0, err
	}
	return total, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), append(data, '\n'), 0o644)
}

func writeShard(path string, specs []Spec, d Data) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	n, err := safetensors.WriteHeader(f, specs, map[string]string{"format": "pt"})
	if err != nil {
		f.Close()
		return err
	}
	off, err := f.Seek(0, 1)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || d == HeaderOnly {
		return err
	}
	return os.Truncate(path, off+n)
}

// CopyConfig copies the JSON files of a kept model (config.json, hf_quant_config.json
// and, when asked, its index) into dir.
func CopyConfig(from, dir string, names ...string) error {
	for _, n := range append([]string{"config.json"}, names...) {
		data, err := os.ReadFile(filepath.Join(from, n))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func bf16(name string, shape ...int64) Spec { return Spec{Name: name, DType: "BF16", Shape: shape} }

// Dense are the dimensions of a dense decoder (Llama, Qwen2/3, Olmo).
type Dense struct {
	Layers, Hidden, Intermediate, Heads, KVHeads, HeadDim, Vocab int64
	Tied                                                         bool
	// QKNorm adds Qwen3's and Olmo's per-head q_norm and k_norm.
	QKNorm bool
}

// Llama lists a Llama-style checkpoint: model.embed_tokens, per layer the q/k/v/o
// projections and the gate/up/down MLP with two norms, model.norm and lm_head, BF16.
func Llama(d Dense) []Spec {
	specs := []Spec{bf16("model.embed_tokens.weight", d.Vocab, d.Hidden)}
	for i := int64(0); i < d.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs,
			bf16(p+"input_layernorm.weight", d.Hidden),
			bf16(p+"self_attn.q_proj.weight", d.Heads*d.HeadDim, d.Hidden),
			bf16(p+"self_attn.k_proj.weight", d.KVHeads*d.HeadDim, d.Hidden),
			bf16(p+"self_attn.v_proj.weight", d.KVHeads*d.HeadDim, d.Hidden),
			bf16(p+"self_attn.o_proj.weight", d.Hidden, d.Heads*d.HeadDim),
			bf16(p+"post_attention_layernorm.weight", d.Hidden),
			bf16(p+"mlp.gate_proj.weight", d.Intermediate, d.Hidden),
			bf16(p+"mlp.up_proj.weight", d.Intermediate, d.Hidden),
			bf16(p+"mlp.down_proj.weight", d.Hidden, d.Intermediate),
		)
		if d.QKNorm {
			specs = append(specs, bf16(p+"self_attn.q_norm.weight", d.HeadDim), bf16(p+"self_attn.k_norm.weight", d.HeadDim))
		}
	}
	specs = append(specs, bf16("model.norm.weight", d.Hidden))
	if !d.Tied {
		specs = append(specs, bf16("lm_head.weight", d.Vocab, d.Hidden))
	}
	return specs
}

// MoE are the dimensions of a Qwen3-MoE decoder: every layer's MLP is Experts experts
// of width ExpertWidth and a router.
type MoE struct {
	Dense
	Experts, ExpertWidth int64
}

// QwenMoE lists a Qwen3-MoE checkpoint: attention as Llama with q_norm/k_norm, and per
// layer mlp.gate (the router) and mlp.experts.E.{gate,up,down}_proj.
func QwenMoE(m MoE) []Spec {
	specs := []Spec{bf16("model.embed_tokens.weight", m.Vocab, m.Hidden)}
	for i := int64(0); i < m.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs,
			bf16(p+"input_layernorm.weight", m.Hidden),
			bf16(p+"self_attn.q_proj.weight", m.Heads*m.HeadDim, m.Hidden),
			bf16(p+"self_attn.k_proj.weight", m.KVHeads*m.HeadDim, m.Hidden),
			bf16(p+"self_attn.v_proj.weight", m.KVHeads*m.HeadDim, m.Hidden),
			bf16(p+"self_attn.o_proj.weight", m.Hidden, m.Heads*m.HeadDim),
			bf16(p+"self_attn.q_norm.weight", m.HeadDim),
			bf16(p+"self_attn.k_norm.weight", m.HeadDim),
			bf16(p+"post_attention_layernorm.weight", m.Hidden),
			bf16(p+"mlp.gate.weight", m.Experts, m.Hidden),
		)
		for e := int64(0); e < m.Experts; e++ {
			q := fmt.Sprintf("%smlp.experts.%d.", p, e)
			specs = append(specs,
				bf16(q+"gate_proj.weight", m.ExpertWidth, m.Hidden),
				bf16(q+"up_proj.weight", m.ExpertWidth, m.Hidden),
				bf16(q+"down_proj.weight", m.Hidden, m.ExpertWidth),
			)
		}
	}
	return append(specs, bf16("model.norm.weight", m.Hidden), bf16("lm_head.weight", m.Vocab, m.Hidden))
}

// DeepSeek are the dimensions of a DeepSeek-V3 checkpoint.
type DeepSeek struct {
	Layers, DenseLayers, Hidden, Intermediate, Heads, QLoraRank, KVLoraRank,
	NopeDim, RopeDim, VDim, Experts, ExpertWidth, Shared, Vocab, MTPLayers int64
}

// fp8 is an FP8 matrix with its weight_scale_inv of one F32 per 128×128 block, as
// DeepSeek-V3's checkpoint stores its linear layers.
func fp8(name string, out, in int64) []Spec {
	return []Spec{
		{Name: name + ".weight", DType: "F8_E4M3", Shape: []int64{out, in}},
		{Name: name + ".weight_scale_inv", DType: "F32", Shape: []int64{(out + 127) / 128, (in + 127) / 128}},
	}
}

// DeepSeekV3 lists a DeepSeek-V3 checkpoint: MLA projections (q_a, q_b, kv_a with the
// rope part, kv_b, o) in FP8 with block scales, DenseLayers dense MLPs, then MoE layers
// with a router, its correction bias, Shared shared experts and Experts routed ones;
// the MTP layers follow as layers Layers… with their own embedding projection.
func DeepSeekV3(d DeepSeek) []Spec {
	specs := []Spec{bf16("model.embed_tokens.weight", d.Vocab, d.Hidden)}
	layer := func(i int64) {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs, bf16(p+"input_layernorm.weight", d.Hidden), bf16(p+"post_attention_layernorm.weight", d.Hidden))
		specs = append(specs, fp8(p+"self_attn.q_a_proj", d.QLoraRank, d.Hidden)...)
		specs = append(specs, bf16(p+"self_attn.q_a_layernorm.weight", d.QLoraRank))
		specs = append(specs, fp8(p+"self_attn.q_b_proj", d.Heads*(d.NopeDim+d.RopeDim), d.QLoraRank)...)
		specs = append(specs, fp8(p+"self_attn.kv_a_proj_with_mqa", d.KVLoraRank+d.RopeDim, d.Hidden)...)
		specs = append(specs, bf16(p+"self_attn.kv_a_layernorm.weight", d.KVLoraRank))
		specs = append(specs, fp8(p+"self_attn.kv_b_proj", d.Heads*(d.NopeDim+d.VDim), d.KVLoraRank)...)
		specs = append(specs, fp8(p+"self_attn.o_proj", d.Hidden, d.Heads*d.VDim)...)
		if i < d.DenseLayers {
			for _, n := range []string{"gate_proj", "up_proj"} {
				specs = append(specs, fp8(p+"mlp."+n, d.Intermediate, d.Hidden)...)
			}
			specs = append(specs, fp8(p+"mlp.down_proj", d.Hidden, d.Intermediate)...)
			return
		}
		specs = append(specs, bf16(p+"mlp.gate.weight", d.Experts, d.Hidden),
			Spec{Name: p + "mlp.gate.e_score_correction_bias", DType: "F32", Shape: []int64{d.Experts}})
		for _, n := range []string{"gate_proj", "up_proj"} {
			specs = append(specs, fp8(p+"mlp.shared_experts."+n, d.Shared*d.ExpertWidth, d.Hidden)...)
		}
		specs = append(specs, fp8(p+"mlp.shared_experts.down_proj", d.Hidden, d.Shared*d.ExpertWidth)...)
		for e := int64(0); e < d.Experts; e++ {
			q := fmt.Sprintf("%smlp.experts.%d.", p, e)
			specs = append(specs, fp8(q+"gate_proj", d.ExpertWidth, d.Hidden)...)
			specs = append(specs, fp8(q+"up_proj", d.ExpertWidth, d.Hidden)...)
			specs = append(specs, fp8(q+"down_proj", d.Hidden, d.ExpertWidth)...)
		}
	}
	for i := int64(0); i < d.Layers; i++ {
		layer(i)
	}
	for i := d.Layers; i < d.Layers+d.MTPLayers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs, bf16(p+"embed_tokens.weight", d.Vocab, d.Hidden),
			bf16(p+"enorm.weight", d.Hidden), bf16(p+"hnorm.weight", d.Hidden),
			bf16(p+"eh_proj.weight", d.Hidden, 2*d.Hidden), bf16(p+"shared_head.norm.weight", d.Hidden),
			bf16(p+"shared_head.head.weight", d.Vocab, d.Hidden))
		layer(i)
	}
	return append(specs, bf16("model.norm.weight", d.Hidden), bf16("lm_head.weight", d.Vocab, d.Hidden))
}

// Qwen35 are the dimensions of a Qwen3.5 checkpoint: hybrid layers (every
// FullInterval-th full attention with a gated q_proj, the others Gated DeltaNet), a
// dense MLP of width Intermediate or Experts routed experts of ExpertWidth with a
// shared expert of SharedWidth, a vision tower, and MTPLayers draft layers.
type Qwen35 struct {
	Layers, FullInterval, Hidden, Heads, KVHeads, HeadDim                int64
	LinearKeyHeads, LinearValueHeads, LinearKeyDim, LinearValueDim, Conv int64
	Intermediate, Experts, ExpertWidth, SharedWidth, Vocab, MTPLayers    int64
	Vision                                                               Vision
	// NVFP4 stores the routed experts as Model Optimizer's NVFP4 export does: two
	// E2M1 values per U8 byte, an F8_E4M3 scale per 16 inputs, an F32 global scale and
	// input scale per expert; everything else stays BF16.
	NVFP4 bool
}

// Vision is a Qwen3.5 vision tower: Depth blocks of Hidden with an MLP of
// Intermediate, a patch embedding of Patch×Patch×Temporal over 3 channels, Positions
// learned positions, and a merger of 2×2 patches into Out.
type Vision struct {
	Depth, Hidden, Intermediate, Out, Positions, Patch, Temporal int64
}

// Qwen35Model lists a Qwen3.5 checkpoint under model.language_model, model.visual and
// mtp, as its module tree names the tensors. The routed experts are fused per layer
// (mlp.experts.gate_up_proj of [E, 2·width, hidden], mlp.experts.down_proj of
// [E, hidden, width]), the layout of Transformers' Qwen3_5Moe module; a checkpoint with a
// tensor per expert has the same bytes.
func Qwen35Model(q Qwen35) []Spec {
	lm := "model.language_model."
	specs := []Spec{bf16(lm+"embed_tokens.weight", q.Vocab, q.Hidden)}
	decoder := func(p string, full bool) {
		specs = append(specs, bf16(p+"input_layernorm.weight", q.Hidden), bf16(p+"post_attention_layernorm.weight", q.Hidden))
		if full {
			a := p + "self_attn."
			specs = append(specs,
				bf16(a+"q_proj.weight", 2*q.Heads*q.HeadDim, q.Hidden),
				bf16(a+"k_proj.weight", q.KVHeads*q.HeadDim, q.Hidden),
				bf16(a+"v_proj.weight", q.KVHeads*q.HeadDim, q.Hidden),
				bf16(a+"o_proj.weight", q.Hidden, q.Heads*q.HeadDim),
				bf16(a+"q_norm.weight", q.HeadDim), bf16(a+"k_norm.weight", q.HeadDim))
		} else {
			a := p + "linear_attn."
			qkv := 2*q.LinearKeyHeads*q.LinearKeyDim + q.LinearValueHeads*q.LinearValueDim
			v := q.LinearValueHeads * q.LinearValueDim
			specs = append(specs,
				bf16(a+"in_proj_qkv.weight", qkv, q.Hidden),
				bf16(a+"in_proj_z.weight", v, q.Hidden),
				bf16(a+"in_proj_b.weight", q.LinearValueHeads, q.Hidden),
				bf16(a+"in_proj_a.weight", q.LinearValueHeads, q.Hidden),
				bf16(a+"conv1d.weight", qkv, 1, q.Conv),
				Spec{Name: a + "A_log", DType: "F32", Shape: []int64{q.LinearValueHeads}},
				bf16(a+"dt_bias", q.LinearValueHeads),
				bf16(a+"norm.weight", q.LinearValueDim),
				bf16(a+"out_proj.weight", q.Hidden, v))
		}
		m := p + "mlp."
		if q.Experts == 0 {
			specs = append(specs, bf16(m+"gate_proj.weight", q.Intermediate, q.Hidden),
				bf16(m+"up_proj.weight", q.Intermediate, q.Hidden), bf16(m+"down_proj.weight", q.Hidden, q.Intermediate))
			return
		}
		specs = append(specs, bf16(m+"gate.weight", q.Experts, q.Hidden),
			bf16(m+"shared_expert.gate_proj.weight", q.SharedWidth, q.Hidden),
			bf16(m+"shared_expert.up_proj.weight", q.SharedWidth, q.Hidden),
			bf16(m+"shared_expert.down_proj.weight", q.Hidden, q.SharedWidth),
			bf16(m+"shared_expert_gate.weight", 1, q.Hidden))
		e := m + "experts."
		if !q.NVFP4 {
			specs = append(specs, bf16(e+"gate_up_proj", q.Experts, 2*q.ExpertWidth, q.Hidden), bf16(e+"down_proj", q.Experts, q.Hidden, q.ExpertWidth))
			return
		}
		for _, x := range []struct {
			name    string
			out, in int64
		}{{"gate_up_proj", 2 * q.ExpertWidth, q.Hidden}, {"down_proj", q.Hidden, q.ExpertWidth}} {
			specs = append(specs,
				Spec{Name: e + x.name + ".weight", DType: "U8", Shape: []int64{q.Experts, x.out, x.in / 2}},
				Spec{Name: e + x.name + ".weight_scale", DType: "F8_E4M3", Shape: []int64{q.Experts, x.out, x.in / 16}},
				Spec{Name: e + x.name + ".weight_scale_2", DType: "F32", Shape: []int64{q.Experts}},
				Spec{Name: e + x.name + ".input_scale", DType: "F32", Shape: []int64{q.Experts}})
		}
	}
	for i := int64(0); i < q.Layers; i++ {
		decoder(fmt.Sprintf("%slayers.%d.", lm, i), (i+1)%q.FullInterval == 0)
	}
	specs = append(specs, bf16(lm+"norm.weight", q.Hidden), bf16("lm_head.weight", q.Vocab, q.Hidden))
	if v := q.Vision; v.Depth > 0 {
		vp := "model.visual."
		specs = append(specs,
			bf16(vp+"patch_embed.proj.weight", v.Hidden, 3, v.Temporal, v.Patch, v.Patch), bf16(vp+"patch_embed.proj.bias", v.Hidden),
			bf16(vp+"pos_embed.weight", v.Positions, v.Hidden))
		for b := int64(0); b < v.Depth; b++ {
			p := fmt.Sprintf("%sblocks.%d.", vp, b)
			specs = append(specs,
				bf16(p+"norm1.weight", v.Hidden), bf16(p+"norm1.bias", v.Hidden),
				bf16(p+"norm2.weight", v.Hidden), bf16(p+"norm2.bias", v.Hidden),
				bf16(p+"attn.qkv.weight", 3*v.Hidden, v.Hidden), bf16(p+"attn.qkv.bias", 3*v.Hidden),
				bf16(p+"attn.proj.weight", v.Hidden, v.Hidden), bf16(p+"attn.proj.bias", v.Hidden),
				bf16(p+"mlp.linear_fc1.weight", v.Intermediate, v.Hidden), bf16(p+"mlp.linear_fc1.bias", v.Intermediate),
				bf16(p+"mlp.linear_fc2.weight", v.Hidden, v.Intermediate), bf16(p+"mlp.linear_fc2.bias", v.Hidden))
		}
		merged := 4 * v.Hidden
		specs = append(specs,
			bf16(vp+"merger.norm.weight", v.Hidden), bf16(vp+"merger.norm.bias", v.Hidden),
			bf16(vp+"merger.linear_fc1.weight", merged, merged), bf16(vp+"merger.linear_fc1.bias", merged),
			bf16(vp+"merger.linear_fc2.weight", v.Out, merged), bf16(vp+"merger.linear_fc2.bias", v.Out))
	}
	for i := int64(0); i < q.MTPLayers; i++ {
		specs = append(specs, bf16("mtp.fc.weight", q.Hidden, 2*q.Hidden),
			bf16("mtp.pre_fc_norm_embedding.weight", q.Hidden), bf16("mtp.pre_fc_norm_hidden.weight", q.Hidden),
			bf16("mtp.norm.weight", q.Hidden))
		decoder(fmt.Sprintf("mtp.layers.%d.", i), true)
	}
	return specs
}
