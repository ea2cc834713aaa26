package fit

import (
	"fmt"
	"strings"

	"github.com/gpusplit/gpusplit/internal/hfmodel"
)

// KVDType is the KV cache's element type.
type KVDType struct {
	Name  string
	Bytes int
	// From says how it was chosen: "auto: the model's dtype", "--kv-dtype".
	From string
}

// ParseKVDType reads a KV cache dtype (--kv-dtype): auto (the model's dtype, as both engines take it:
// 16-bit, since a float32 checkpoint is served in 16 bits), bf16, fp16, or fp8 and its
// two kinds (one byte).
func ParseKVDType(s string, m *hfmodel.Model) (KVDType, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		name := m.DType
		if name == "" || m.DTypeBytes != 2 {
			name = "bfloat16"
		}
		return KVDType{Name: name, Bytes: 2, From: "auto: the model's dtype"}, nil
	case "bf16", "bfloat16":
		return KVDType{Name: "bfloat16", Bytes: 2, From: "--kv-dtype"}, nil
	case "fp16", "float16", "half":
		return KVDType{Name: "float16", Bytes: 2, From: "--kv-dtype"}, nil
	case "fp8", "fp8_e4m3", "fp8_e5m2":
		return KVDType{Name: strings.ToLower(s), Bytes: 1, From: "--kv-dtype"}, nil
	}
	return KVDType{}, fmt.Errorf("%q: it is auto, bf16, fp16, fp8, fp8_e4m3 or fp8_e5m2", s)
}

// kvHeadsPerRank is the KV heads one TP rank holds: its share of them, or one copy when
// there are fewer heads than ranks (both engines copy a KV head to the ranks that share
// it: max(1, heads / tp)).
func kvHeadsPerRank(heads, tp int) int {
	return max(1, heads/tp)
}

// stageKV is the KV cache one rank of a stage holds for layers [first, last).
type stageKV struct {
	// PerToken is the bytes per token of the layers whose cache grows with the
	// sequence: full attention, and MLA's latent.
	PerToken int64
	// SlidingPerToken is the bytes per token of the sliding layers, which hold at most
	// the window of each sequence.
	SlidingPerToken int64
	// State is the bytes per sequence of the linear-attention layers' fixed state.
	State                 int64
	Full, Sliding, Linear int
}

// kvOf works the KV cache of layers [first, last) out for one TP rank, at b bytes per
// element. override, when above 0, is the whole model's bytes per token at TP 1 and
// stands for the per-token part, split evenly over the layers and the ranks. Each
// product is checked: one past int64 is ErrTooLarge.
func kvOf(m *hfmodel.Model, first, last, tp int, b int, override int64) (stageKV, error) {
	var s stageKV
	for i := first; i < last; i++ {
		switch m.Kinds[i] {
		case hfmodel.LayerSliding:
			s.Sliding++
		case hfmodel.LayerLinear:
			s.Linear++
		default:
			s.Full++
		}
	}
	if override > 0 {
		n, ok := mul(override, int64(last-first))
		if !ok {
			return s, tooLarge("a KV cache of %d bytes per token over %d layers", override, last-first)
		}
		s.PerToken = n / int64(m.Layers) / int64(tp)
		return s, nil
	}
	if m.MLA != nil {
		// One latent of kv_lora_rank + qk_rope_head_dim per token and layer, whatever
		// the TP size; DeepSeek-V3.2's indexer adds its FP8 keys and their scales.
		var width, perLayer sum
		width.add(int64(m.MLA.KVLoraRank), int64(m.MLA.RopeDim))
		latent, ok := mul(width.n, int64(b))
		if !ok || width.bad {
			return s, tooLarge("an MLA latent of kv_lora_rank %d + qk_rope_head_dim %d", m.MLA.KVLoraRank, m.MLA.RopeDim)
		}
		perLayer.add(latent)
		if d := int64(m.MLA.IndexHeadDim); d > 0 {
			perLayer.add(d, d/128*4)
		}
		var ok2 bool
		if s.PerToken, ok2 = mul(int64(s.Full), perLayer.n); !ok2 || perLayer.bad {
			return s, tooLarge("the latent cache per token of %d layers", s.Full)
		}
		return s, nil
	}
	// K and V of the rank's KV heads.
	perLayer, ok := mul(2, int64(kvHeadsPerRank(m.KVHeads, tp)), int64(m.HeadDim), int64(b))
	if !ok {
		return s, tooLarge("2 × %d KV heads × head_dim %d × %d bytes", kvHeadsPerRank(m.KVHeads, tp), m.HeadDim, b)
	}
	var ok1, ok2 bool
	s.PerToken, ok1 = mul(int64(s.Full), perLayer)
	s.SlidingPerToken, ok2 = mul(int64(s.Sliding), perLayer)
	if !ok1 || !ok2 {
		return s, tooLarge("the KV cache per token of %d layers at %d bytes each", s.Full+s.Sliding, perLayer)
	}
	if l := m.Linear; l != nil && s.Linear > 0 {
		// Gated DeltaNet, split by heads: the convolution state of the q, k and v
		// channels over conv_kernel − 1 steps, in the model's dtype, and the recurrent
		// state of value heads × key dim × value dim, in the state's dtype.
		qk, ok1 := mul(2, int64(l.KeyHeads), int64(l.KeyDim))
		v, ok2 := mul(int64(l.ValueHeads), int64(l.ValueDim))
		var channels sum
		channels.add(qk, v)
		conv, ok3 := mul(channels.n/int64(tp), int64(max(l.ConvKernel-1, 0)), int64(min(m.DTypeBytes, 2)))
		rec, ok4 := mul(int64(l.ValueHeads/tp), int64(l.KeyDim), int64(l.ValueDim), int64(l.StateBytes))
		var perLayer sum
		perLayer.add(conv, rec)
		state, ok5 := mul(int64(s.Linear), perLayer.n)
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || channels.bad || perLayer.bad {
			return s, tooLarge("the linear-attention state of %d layers", s.Linear)
		}
		s.State = state
	}
	return s, nil
}

// perSequence is what one sequence of ctx tokens takes of a rank's cache; a sequence
// whose cache passes int64 is a *SequenceError.
func (s stageKV) perSequence(ctx, window int) (int64, error) {
	full, ok1 := mul(s.PerToken, int64(ctx))
	sliding, ok2 := mul(s.SlidingPerToken, int64(min(ctx, window)))
	var t sum
	t.add(full, sliding, s.State)
	if !ok1 || !ok2 || t.bad {
		sliding := ""
		if s.SlidingPerToken > 0 {
			sliding = fmt.Sprintf(", and %d per token of the window of %d on the sliding-window layers", s.SlidingPerToken, window)
		}
		return 0, &SequenceError{Tokens: ctx, PerToken: s.PerToken, Sliding: sliding}
	}
	return t.n, nil
}

// ModelKV is the whole model's KV cache per token and its linear-attention state per
// sequence at TP 1, in kv's dtype: the figures before any split.
func ModelKV(m *hfmodel.Model, kv KVDType) (perToken, state int64, err error) {
	if len(m.Kinds) != m.Layers {
		return 0, 0, fmt.Errorf("the model has %d layers but %d layer kinds", m.Layers, len(m.Kinds))
	}
	s, err := kvOf(m, 0, m.Layers, 1, kv.Bytes, 0)
	if err != nil {
		return 0, 0, err
	}
	var t sum
	t.add(s.PerToken, s.SlidingPerToken)
	if t.bad {
		return 0, 0, tooLarge("the KV cache per token of %d layers", m.Layers)
	}
	return t.n, s.State, nil
}
