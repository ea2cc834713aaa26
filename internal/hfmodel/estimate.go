package hfmodel

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// EstimateError is the most the estimate of a checkpoint's weights from config.json
// (EstimateWeights) was off by, as a share of the exact bytes, on the public configs of
// testdata/models whose safetensors headers the repository holds or writes, and the
// published index totals it has (docs/fit.md, "Without safetensors files", lists them;
// TestEstimateWithinError measures each), rounded up to a hundredth of a percent. The
// report quotes it with every estimate. It holds for the architectures measured: the
// estimate of one it does not model (other norms, biases, towers) can be further off.
const EstimateError = 0.0001

// Where a model's weight figures come from (Model.WeightsFrom).
const (
	// WeightsExact: the safetensors headers, every tensor's bytes.
	WeightsExact = "safetensors"
	// WeightsEstimate: config.json's architecture, for a directory without safetensors.
	WeightsEstimate = "estimate"
)

// shape is what the estimate needs of config.json beyond Model's fields.
type shape struct {
	vocab, qLora, nopeDim, vDim, sharedWidth, firstDense, sparseStep int
	onlyDense                                                        map[int]bool
	outputGate, qkNorm, qkvBias, gated                               bool
	vision                                                           *visionShape
}

// visionShape is a vision tower of Depth transformer blocks over patches, with a
// merger of Merge×Merge patches into Out: the shape of Qwen2-VL's, Qwen2.5-VL's and
// Qwen3.5's towers, and near enough other ViTs' for an estimate.
type visionShape struct {
	depth, hidden, inter, out, positions, patch, temporal, channels, merge int
}

// readShape reads what the estimate needs. The fields it bounds (Bounds) are checked
// with the others when config.json is read; the vision tower's, which Bounds does not
// list, are checked here, and a tower outside them is left out of the estimate, with a
// note.
func (m *Model) readShape(top object) {
	c := newTextConfig(top)
	s := &shape{gated: true}
	s.vocab, _ = c.firstIntValue("vocab_size", "padded_vocab_size")
	s.qLora, _ = c.int("q_lora_rank")
	s.nopeDim, _ = c.int("qk_nope_head_dim")
	s.vDim, _ = c.int("v_head_dim")
	s.sharedWidth, _ = c.int("shared_expert_intermediate_size")
	s.firstDense, _ = c.int("first_k_dense_replace")
	s.sparseStep, _ = c.int("decoder_sparse_step")
	if o, ok := c.lookup("mlp_only_layers"); ok {
		s.onlyDense = map[int]bool{}
		for _, i := range o.ints("mlp_only_layers") {
			s.onlyDense[i] = true
		}
	}
	if o, ok := c.lookup("attn_output_gate"); ok {
		s.outputGate, _ = o.bool("attn_output_gate")
	}
	t := strings.ToLower(m.ModelType)
	// Qwen3's family and OLMo 2/3 normalise q and k per head (q_norm, k_norm); Qwen2's
	// q, k and v projections carry biases.
	s.qkNorm = strings.HasPrefix(t, "qwen3") || strings.HasPrefix(t, "olmo")
	s.qkvBias = strings.HasPrefix(t, "qwen2")
	if o, ok := c.lookup("attention_bias"); ok {
		if b, _ := o.bool("attention_bias"); b {
			s.qkvBias = true
		}
	}
	// The MLPs of GPT-2-era architectures are two matrices, not a gated three.
	switch t {
	case "gpt2", "gpt_neox", "gptj", "bloom", "opt", "falcon", "phi", "starcoder2", "gpt_bigcode":
		s.gated = false
	}
	if v := top.sub("vision_config"); v != nil {
		vs := &visionShape{channels: 3, merge: 2, temporal: 1}
		vs.depth, _ = v.int("depth")
		if vs.depth == 0 {
			vs.depth, _ = v.int("num_hidden_layers")
		}
		vs.hidden, _ = v.int("hidden_size")
		vs.inter, _ = v.int("intermediate_size")
		vs.out, _ = v.int("out_hidden_size")
		if vs.out == 0 {
			vs.out = m.Hidden
		}
		vs.positions, _ = v.int("num_position_embeddings")
		vs.patch, _ = v.int("patch_size")
		for key, dst := range map[string]*int{"temporal_patch_size": &vs.temporal, "in_channels": &vs.channels, "spatial_merge_size": &vs.merge} {
			if n, ok := v.int(key); ok {
				*dst = n
			}
		}
		in := func(n, hi int) bool { return n >= 0 && n <= hi }
		switch {
		case vs.depth <= 0 || vs.hidden <= 0:
		case !in(vs.depth, MaxLayers) || !in(vs.hidden, 1<<18) || !in(vs.inter, 1<<20) || !in(vs.out, 1<<18) ||
			!in(vs.positions, MaxContext) || !in(vs.patch, 1<<10) || !in(vs.temporal, 1<<6) || !in(vs.channels, 1<<6) || !in(vs.merge, 1<<6):
			m.Notes = append(m.Notes, "config.json's vision_config is outside what gpusplit accepts: the vision tower is left out of the weights' estimate")
		default:
			s.vision = vs
		}
	}
	m.shape = s
}

// EstimateWeights works a checkpoint's bytes out from config.json's architecture, for a
// model directory without safetensors files: per decoder layer its attention (GQA with
// its KV heads, MLA's low-rank projections, Gated DeltaNet), its MLP (gated or not) or
// its experts with their router and shared experts, and its norms; the embedding, the
// LM head unless tied, the final norm and the vision tower. Matrices are in the
// checkpoint's quantisation, with its scales, unless its ignore list leaves them out;
// the rest in torch_dtype. Biases of other than q/k/v, and the multi-token-prediction
// layers, which engines load only for speculative decoding, are left out.
// EstimateError bounds how far off it was on the checkpoints measured.
//
// The sums are in float64: the config's fields are bounded, so no product is infinite,
// and a total past MaxWeightBytes is refused before it is made an int64.
func (m *Model) EstimateWeights() (Weights, error) {
	w := Weights{Layers: make([]LayerBytes, m.Layers), ByDType: map[string]int64{}}
	s := m.shape
	if s == nil {
		s = &shape{gated: true}
	}
	if m.Hidden <= 0 || s.vocab <= 0 {
		var missing []string
		if m.Hidden <= 0 {
			missing = append(missing, "hidden_size")
		}
		if s.vocab <= 0 {
			missing = append(missing, "vocab_size")
		}
		return w, fmt.Errorf("config.json gives no %s: without safetensors files gpusplit estimates the weights from them", strings.Join(missing, " or "))
	}
	base := float64(m.DTypeBytes)
	h := float64(m.Hidden)
	ig := newIgnore(m.Quant.Ignore)
	// matrix is the bytes of a quantisable matrix of out × in, at layer i as module
	// names it: quantised unless the ignore list names it.
	matrix := func(i int, module string, out, in float64) float64 {
		if m.Quant.Scheme == "" || ig.match(i, module) {
			return out * in * base
		}
		return m.Quant.matrixBytes(out, in, base)
	}
	var total float64
	for i := 0; i < m.Layers; i++ {
		var split, experts, whole float64
		whole += 2 * h * base // input and post-attention norms
		switch {
		case m.Kinds[i] == LayerLinear && m.Linear != nil:
			l := m.Linear
			k, v := float64(l.KeyHeads*l.KeyDim), float64(l.ValueHeads*l.ValueDim)
			heads := float64(l.ValueHeads)
			// in_proj_qkv and in_proj_z (Qwen3-Next fuses them as in_proj_qkvz), out_proj;
			// the small in_proj_a and in_proj_b, and the convolution, stay unquantised.
			split += matrix(i, "linear_attn.in_proj_qkv", 2*k+v, h) + matrix(i, "linear_attn.in_proj_z", v, h) + matrix(i, "linear_attn.out_proj", h, v)
			split += 2*heads*h*base + (2*k+v)*float64(l.ConvKernel)*base
			whole += heads*4 + heads*base + float64(l.ValueDim)*base // A_log (float32), dt_bias, norm
		case m.MLA != nil:
			a := m.MLA
			heads := float64(m.Heads)
			qk := float64(s.nopeDim + a.RopeDim)
			if s.qLora > 0 {
				split += matrix(i, "self_attn.q_a_proj", float64(s.qLora), h) + matrix(i, "self_attn.q_b_proj", heads*qk, float64(s.qLora))
				whole += float64(s.qLora) * base
			} else {
				split += matrix(i, "self_attn.q_proj", heads*qk, h)
			}
			split += matrix(i, "self_attn.kv_a_proj_with_mqa", float64(a.KVLoraRank+a.RopeDim), h)
			split += matrix(i, "self_attn.kv_b_proj", heads*float64(s.nopeDim+s.vDim), float64(a.KVLoraRank))
			split += matrix(i, "self_attn.o_proj", h, heads*float64(s.vDim))
			whole += float64(a.KVLoraRank) * base
		default:
			q, kv := float64(m.Heads*m.HeadDim), float64(m.KVHeads*m.HeadDim)
			qOut := q
			if s.outputGate {
				qOut *= 2 // the gate of the attention output rides on q_proj
			}
			split += matrix(i, "self_attn.q_proj", qOut, h) + matrix(i, "self_attn.k_proj", kv, h) + matrix(i, "self_attn.v_proj", kv, h) + matrix(i, "self_attn.o_proj", h, q)
			if s.qkvBias {
				split += (q + 2*kv) * base
			}
			if s.qkNorm {
				whole += 2 * float64(m.HeadDim) * base
			}
		}
		if m.Experts > 0 && s.moeLayer(i) {
			e := float64(m.MoEIntermediate)
			if e == 0 {
				e = float64(m.Intermediate) // Mixtral: intermediate_size is an expert's
			}
			whole += float64(m.Experts) * h * base // the router
			experts += float64(m.Experts) * (2*matrix(i, "mlp.experts.0.gate_proj", e, h) + matrix(i, "mlp.experts.0.down_proj", h, e))
			shared := float64(s.sharedWidth)
			if shared > 0 {
				whole += h * base // shared_expert_gate
			} else {
				shared = float64(m.SharedExperts) * e
			}
			if shared > 0 {
				split += 2*matrix(i, "mlp.shared_expert.gate_proj", shared, h) + matrix(i, "mlp.shared_expert.down_proj", h, shared)
			}
		} else if m.Intermediate > 0 {
			n := 3.0
			if !s.gated {
				n = 2
			}
			split += (n-1)*matrix(i, "mlp.gate_proj", float64(m.Intermediate), h) + matrix(i, "mlp.down_proj", h, float64(m.Intermediate))
		}
		w.Layers[i] = LayerBytes{Split: int64(split), Experts: int64(experts), Replicated: int64(whole)}
		total += split + experts + whole
	}
	embed := float64(s.vocab) * h * base
	w.Embed, w.Final = int64(embed), int64(h*base)
	total += embed + h*base
	if !m.Tied {
		w.LMHead = int64(embed)
		total += embed
	}
	if v := s.vision; v != nil {
		vh, vi := float64(v.hidden), float64(v.inter)
		block := 4*vh*vh + 2*vh*vi + 9*vh + vi // qkv, proj, fc1, fc2, their biases, two norms
		merged := vh * float64(v.merge*v.merge)
		tower := float64(v.depth)*block + vh*float64(v.channels*v.temporal*v.patch*v.patch) + vh + float64(v.positions)*vh +
			2*vh + merged*merged + merged + merged*float64(v.out) + float64(v.out)
		w.Vision = int64(tower * base)
		total += tower * base
	}
	if total > float64(MaxWeightBytes) {
		return w, fmt.Errorf("config.json's dimensions give %.3g bytes of weights, more than the %d (64 TiB) gpusplit accepts: no real model's", total, MaxWeightBytes)
	}
	w.Total = int64(total)
	return w, nil
}

// moeLayer says whether layer i holds experts: DeepSeek's first_k_dense_replace
// layers and Qwen's mlp_only_layers are dense, and with decoder_sparse_step k every
// k-th layer is sparse.
func (s *shape) moeLayer(i int) bool {
	if i < s.firstDense || s.onlyDense[i] {
		return false
	}
	return s.sparseStep <= 1 || (i+1)%s.sparseStep == 0
}

// matrixBytes is a quantised matrix of out × in: its packed elements and its scales, as
// the scheme stores them (model-fit.md §3): FP8 with an F32 scale per block; NVFP4's
// two values a byte and an FP8 scale per 16; MXFP4's with an E8M0 scale per 32; AWQ's
// and GPTQ's packed integers with a 16-bit scale and a packed zero per group. A scheme
// without a known width keeps base bytes per element.
func (q Quant) matrixBytes(out, in, base float64) float64 {
	n := out * in
	switch q.Scheme {
	case "fp8":
		if q.Block[0] > 0 && q.Block[1] > 0 {
			return n + ceil(out/float64(q.Block[0]))*ceil(in/float64(q.Block[1]))*4
		}
		return n + out*4 // a scale per output channel, or less
	case "nvfp4":
		return n/2 + n/16
	case "mxfp4":
		return n/2 + n/32
	}
	if q.Bits <= 0 || q.Bits > 32 {
		return n * base
	}
	bits := float64(q.Bits)
	b := n * bits / 8
	if q.GroupSize > 0 {
		b += n / float64(q.GroupSize) * (2 + bits/8)
	}
	return b
}

func ceil(x float64) float64 {
	if t := float64(int64(x)); t < x {
		return t + 1
	}
	return x
}

// ignore is a quantisation config's list of modules left unquantised.
type ignore struct {
	names []string
	res   []*regexp.Regexp
}

func newIgnore(list []string) ignore {
	var ig ignore
	for _, p := range list {
		if r, ok := strings.CutPrefix(p, "re:"); ok {
			if re, err := regexp.Compile(r); err == nil {
				ig.res = append(ig.res, re)
			}
			continue
		}
		ig.names = append(ig.names, p)
	}
	return ig
}

// match says whether the list names module of layer i, under either prefix the text
// model's layers go by: a name equal to the module's or ending in it, a glob, or an
// expression.
func (ig ignore) match(i int, module string) bool {
	if len(ig.names) == 0 && len(ig.res) == 0 {
		return false
	}
	for _, prefix := range []string{"model.layers.", "model.language_model.layers."} {
		full := fmt.Sprintf("%s%d.%s", prefix, i, module)
		for _, p := range ig.names {
			if full == p || strings.HasSuffix(full, "."+p) || strings.HasPrefix(full, p+".") {
				return true
			}
			if strings.ContainsAny(p, "*?[") {
				if ok, _ := path.Match(p, full); ok {
					return true
				}
			}
		}
		for _, re := range ig.res {
			if re.MatchString(full) {
				return true
			}
		}
	}
	return false
}
