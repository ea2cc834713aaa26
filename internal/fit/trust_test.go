package fit

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/hfmodel"
	"github.com/gpusplit/gpusplit/internal/safetensors"
)

// loadConfig writes config into a model directory with one small shard and loads it as
// fit does.
func loadConfig(t *testing.T, config string) *hfmodel.Model {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := safetensors.WriteHeader(f, []safetensors.Spec{{Name: "model.layers.0.self_attn.q_proj.weight", DType: "BF16", Shape: []int64{64, 64}}}, nil)
	off, _ := f.Seek(0, 1)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	os.Truncate(f.Name(), off+n)
	m, err := hfmodel.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFitRefusesOverflow: a config whose every field is within its bound can still
// multiply past int64: 2 × 2048 KV heads × 8192 × 2 bytes × 2048 layers is 2^37 bytes
// per token, and a sequence of max_position_embeddings (2^28) tokens 2^65. The fit is
// refused, saying which product, rather than wrapped into a verdict; so is an
// override of the bytes per token times a context past int64.
func TestFitRefusesOverflow(t *testing.T) {
	m := loadConfig(t, `{"num_hidden_layers": 2048, "num_attention_heads": 4096, "num_key_value_heads": 2048, "head_dim": 8192, "max_position_embeddings": 268435456}`)
	perToken, _, err := ModelKV(m, KVDType{Bytes: 2})
	if err != nil || perToken != 2*2048*8192*2*2048 {
		t.Fatalf("per token %d, %v", perToken, err)
	}
	o := Options{Engine: VLLM, KV: KVDType{Bytes: 2}, Context: m.MaxContext, Concurrency: 1}
	_, err = Fit(m, gpusOn(8, proMemory, 2), o)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "one sequence of 268435456 tokens at 137438953472 bytes of KV cache per token on one GPU") {
		t.Errorf("%v", err)
	}
	// The same model at a context that fits in int64: a verdict.
	o.Context = 4096
	if _, err := Fit(m, gpusOn(8, proMemory, 2), o); err != nil {
		t.Errorf("4096 tokens: %v", err)
	}

	small := loadConfig(t, `{"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64, "max_position_embeddings": 4096}`)
	o = Options{Engine: VLLM, KV: KVDType{Bytes: 2}, Context: math.MaxInt, Concurrency: 1, KVBytesPerToken: 1 << 20}
	if _, err := Fit(small, gpusOn(2, proMemory, 1), o); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a context of 2^63 − 1: %v", err)
	}
	o.Context, o.KVBytesPerToken = 4096, MaxKVBytesPerToken+1
	var kvErr *KVBytesError
	if _, err := Fit(small, gpusOn(2, proMemory, 1), o); !errors.As(err, &kvErr) || kvErr.Bytes != MaxKVBytesPerToken+1 || !strings.Contains(err.Error(), "1073741825 KV cache bytes per token is more than the 1073741824") {
		t.Errorf("--kv-bytes-per-token past its bound: %v", err)
	}
	o.KVBytesPerToken = MaxKVBytesPerToken
	if _, err := Fit(small, gpusOn(2, proMemory, 1), o); err != nil {
		t.Errorf("--kv-bytes-per-token at its bound: %v", err)
	}
}

// TestFitChecksItsInputs: a Model not made by hfmodel.Load (no weights read, layers
// past the bound) and GPUs outside the memory bound are refused, not indexed past
// their end.
func TestFitChecksItsInputs(t *testing.T) {
	o := Options{Engine: VLLM, KV: KVDType{Bytes: 2}, Context: 4096, Concurrency: 1}
	m := config(t, "llama-3.1-70b-instruct")
	if _, err := Fit(m, gpusOn(2, proMemory, 1), o); err == nil || !strings.Contains(err.Error(), "80 layers, but 80 layer kinds and 0 layers of weights") {
		t.Errorf("no weights: %v", err)
	}
	m.Weights.Layers = make([]hfmodel.LayerBytes, m.Layers)
	if _, err := Fit(m, gpusOn(2, proMemory, 1), o); err != nil {
		t.Fatal(err)
	}
	for _, mem := range []int64{0, -1, MaxGPUMemory + 1} {
		if _, err := Fit(m, gpusOn(2, mem, 1), o); err == nil || !strings.Contains(err.Error(), "outside the 1 to 8796093022208 (8 TiB)") {
			t.Errorf("%d bytes of GPU memory: %v", mem, err)
		}
	}
	if _, err := Fit(m, gpusOn(2, MaxGPUMemory, 1), o); err != nil {
		t.Errorf("GPU memory at its bound: %v", err)
	}
	// Weights whose sum passes int64, as a Model built by hand can hold.
	m.Weights.Layers[0].Split, m.Weights.Layers[1].Split = math.MaxInt64, math.MaxInt64
	if _, err := Fit(m, gpusOn(2, proMemory, 1), o); !errors.Is(err, ErrTooLarge) {
		t.Errorf("weights past int64: %v", err)
	}
	m.Weights.Layers[1].Split = 0
	if _, err := Fit(m, gpusOn(2, proMemory, 1), o); !errors.Is(err, ErrTooLarge) {
		t.Errorf("weights past MaxWeightBytes: %v", err)
	}
	m.Layers = hfmodel.MaxLayers + 1
	if _, err := Fit(m, gpusOn(2, proMemory, 1), o); err == nil || !strings.Contains(err.Error(), "outside the 1 to 2048") {
		t.Errorf("layers past the bound: %v", err)
	}
}

// TestCheckedArithmetic: the products and sums at int64's edge.
func TestCheckedArithmetic(t *testing.T) {
	for _, c := range []struct {
		xs   []int64
		want int64
		ok   bool
	}{
		{[]int64{1 << 31, 1 << 31}, 1 << 62, true},
		{[]int64{1 << 32, 1 << 31}, 0, false},
		{[]int64{math.MaxInt64, 1}, math.MaxInt64, true},
		{[]int64{math.MaxInt64, 2}, 0, false},
		{[]int64{3037000500, 3037000500}, 0, false}, // just past √(2^63)
		{[]int64{3037000499, 3037000499}, 3037000499 * 3037000499, true},
		{[]int64{-1, 1}, 0, false},
		{[]int64{0, math.MaxInt64}, 0, true},
		{nil, 1, true},
	} {
		if got, ok := mul(c.xs...); got != c.want || ok != c.ok {
			t.Errorf("mul%v: %d, %v; want %d, %v", c.xs, got, ok, c.want, c.ok)
		}
	}
	var s sum
	s.add(math.MaxInt64-1, 1)
	if s.bad || s.n != math.MaxInt64 {
		t.Errorf("%+v", s)
	}
	s.add(1)
	if !s.bad {
		t.Errorf("past int64: %+v", s)
	}
	var neg sum
	if neg.add(-1); !neg.bad {
		t.Errorf("a negative figure: %+v", neg)
	}
}

// FuzzFit feeds the fit any config.json the reader accepts, on the sample host's eight
// GPUs at the model's context: a result whose figures are not negative, or an error,
// never a panic. The seeds hold the bounds.
func FuzzFit(f *testing.F) {
	dirs, _ := filepath.Glob(models + "*/config.json")
	for _, p := range dirs {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint32(0))
	}
	f.Add([]byte(`{"num_hidden_layers": 2048, "num_attention_heads": 4096, "num_key_value_heads": 2048, "head_dim": 8192, "max_position_embeddings": 268435456}`), uint32(0))
	f.Add([]byte(`{"num_hidden_layers": 2048, "num_attention_heads": 4096, "num_key_value_heads": 1, "head_dim": 8192, "sliding_window": 268435456, "max_position_embeddings": 268435456}`), uint32(1<<31))
	f.Add([]byte(`{"num_hidden_layers": 2048, "num_attention_heads": 4096, "full_attention_interval": 2048, "linear_num_key_heads": 256, "linear_num_value_heads": 1024, "linear_key_head_dim": 2048, "linear_value_head_dim": 2048, "linear_conv_kernel_dim": 64, "head_dim": 8192, "num_key_value_heads": 2048, "mamba_ssm_dtype": "float32"}`), uint32(4096))
	f.Add([]byte(`{"num_hidden_layers": 2048, "num_attention_heads": 4096, "kv_lora_rank": 8192, "qk_rope_head_dim": 1024, "index_head_dim": 2048, "max_position_embeddings": 268435456}`), uint32(0))
	f.Add([]byte(`{"num_hidden_layers": 3, "num_attention_heads": 0, "head_dim": 0, "linear_conv_kernel_dim": 0, "layer_types": ["linear_attention", "linear_attention", "full_attention"]}`), uint32(7))
	gpus := gpusOn(8, proMemory, 2)
	f.Fuzz(func(t *testing.T, data []byte, context uint32) {
		m, err := hfmodel.ParseConfig(data)
		if err != nil {
			return
		}
		m.Weights.Layers = make([]hfmodel.LayerBytes, m.Layers)
		ctx := int(context)
		if ctx == 0 {
			ctx = max(m.MaxContext, 1)
		}
		o := Options{Engine: VLLM, KV: KVDType{Bytes: 2}, Context: ctx, Concurrency: 1}
		if len(m.Missing) > 0 {
			o.KVBytesPerToken = 4096
		}
		r, err := Fit(m, gpus, o)
		if err != nil {
			return
		}
		for _, p := range r.Placements {
			if p.Weights < 0 || p.PerToken < 0 || p.State < 0 || p.PerSequence < 0 || p.Tokens < 0 || p.Sequences < 0 {
				t.Fatalf("%s: %+v", p.Name(), p)
			}
		}
		if _, _, err := ModelKV(m, o.KV); err != nil && len(m.Missing) == 0 && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("ModelKV: %v", err)
		}
	})
}
