package hfmodel

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/testutils/checkpoint"
)

// estimateCase is a model of testdata/models and the exact bytes its estimate is held
// to: the headers the repository keeps or its tests write from the config's
// dimensions, or a published index's total_size.
type estimateCase struct {
	name  string
	model string
	// specs are the checkpoint's tensors, written as header-only shards; nil for a
	// model whose shards are kept.
	specs func() []checkpoint.Spec
	// published is the total_size of the checkpoint's model.safetensors.index.json on
	// the Hugging Face Hub, which save_pretrained writes as the sum of the tensors; 0
	// where none is used.
	published int64
}

var llama70B = checkpoint.Dense{Layers: 80, Hidden: 8192, Intermediate: 28672, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 128256}

var estimateCases = []estimateCase{
	{name: "Llama 3.1 70B, headers", model: "llama-3.1-70b-instruct", specs: func() []checkpoint.Spec { return checkpoint.Llama(llama70B) }},
	// huggingface.co/meta-llama/Llama-3.1-70B-Instruct/blob/main/model.safetensors.index.json
	{name: "Llama 3.1 70B, published", model: "llama-3.1-70b-instruct", published: 141_107_412_992},
	{name: "Llama 3.2 1B, tied, headers", model: "llama-3.2-1b-instruct", specs: func() []checkpoint.Spec {
		return checkpoint.Llama(checkpoint.Dense{Layers: 16, Hidden: 2048, Intermediate: 8192, Heads: 32, KVHeads: 8, HeadDim: 64, Vocab: 128256, Tied: true})
	}},
	{name: "Qwen3-30B-A3B, headers", model: "qwen3-30b-a3b", specs: func() []checkpoint.Spec {
		return checkpoint.QwenMoE(checkpoint.MoE{Dense: checkpoint.Dense{Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936}, Experts: 128, ExpertWidth: 768})
	}},
	// huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/model.safetensors.index.json
	{name: "Qwen3-30B-A3B, published", model: "qwen3-30b-a3b", published: 61_064_245_248},
	{name: "DeepSeek-V3 FP8, headers", model: "deepseek-v3", specs: func() []checkpoint.Spec {
		return checkpoint.DeepSeekV3(checkpoint.DeepSeek{Layers: 61, DenseLayers: 3, Hidden: 7168, Intermediate: 18432, Heads: 128, QLoraRank: 1536, KVLoraRank: 512,
			NopeDim: 128, RopeDim: 64, VDim: 128, Experts: 256, ExpertWidth: 2048, Shared: 1, Vocab: 129280, MTPLayers: 1})
	}},
	{name: "Qwen3.5-397B-A17B NVFP4-like, kept headers", model: "qwen3.5-397b-a17b-nvfp4-like"},
}

// exactBytes is what the case's headers add up to (served: the MTP layers apart), or
// its published total.
func exactBytes(t *testing.T, c estimateCase) int64 {
	t.Helper()
	if c.published > 0 {
		return c.published
	}
	dir := models + c.model
	if c.specs != nil {
		dir = t.TempDir()
		if err := checkpoint.CopyConfig(models+c.model, dir); err != nil {
			t.Fatal(err)
		}
		if _, err := checkpoint.Write(dir, c.specs(), checkpoint.Options{Data: checkpoint.HeaderOnly}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.WeightsFrom != WeightsExact {
		t.Fatalf("%s: weights from %q", c.model, m.WeightsFrom)
	}
	return m.Weights.Serving()
}

// estimateOf loads the case's model from its config files alone.
func estimateOf(t *testing.T, model string) *Model {
	t.Helper()
	dir := t.TempDir()
	var extra []string
	if _, err := os.Stat(filepath.Join(models, model, "hf_quant_config.json")); err == nil {
		extra = append(extra, "hf_quant_config.json")
	}
	if err := checkpoint.CopyConfig(models+model, dir, extra...); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEstimateWithinError: the estimate from config.json alone is within EstimateError
// of the exact bytes of every model measured, and EstimateError is the worst error
// found, rounded up to a hundredth of a percent: the figure the report quotes is the
// measured one.
// Dropping the MLP, the experts or the q/k/v/o projections, ignoring
// tie_word_embeddings, the quantisation or its scales each put a model outside it.
func TestEstimateWithinError(t *testing.T) {
	worst := 0.0
	for _, c := range estimateCases {
		t.Run(c.name, func(t *testing.T) {
			exact := exactBytes(t, c)
			m := estimateOf(t, c.model)
			if m.WeightsFrom != WeightsEstimate {
				t.Fatalf("weights from %q", m.WeightsFrom)
			}
			est := m.Weights.Total
			var parts int64
			for _, l := range m.Weights.Layers {
				parts += l.Split + l.Experts + l.Replicated
			}
			parts += m.Weights.Embed + m.Weights.LMHead + m.Weights.Final + m.Weights.Vision
			if d := parts - est; d < -int64(len(m.Weights.Layers))*3-8 || d > 0 {
				t.Errorf("the parts add up to %d, the total is %d", parts, est)
			}
			e := math.Abs(float64(est-exact)) / float64(exact)
			worst = max(worst, e)
			t.Logf("estimate %d, exact %d: %+.4f%%", est, exact, 100*float64(est-exact)/float64(exact))
			if e > EstimateError {
				t.Errorf("estimate %d bytes, exact %d: off by %.3f%%, more than the %s quoted", est, exact, 100*e, ErrorText(EstimateError))
			}
		})
	}
	// The figure quoted is the worst measured, rounded up to a hundredth of a percent.
	if want := math.Ceil(worst*1e4) / 1e4; math.Abs(EstimateError-want) > 1e-12 {
		t.Errorf("the worst error measured is %.4f%%: EstimateError (%s) should be it rounded up, %s", 100*worst, ErrorText(EstimateError), ErrorText(want))
	}
}

// TestEstimateTied: a tied model's estimate holds the embedding once; untied, it would
// count the LM head too.
func TestEstimateTied(t *testing.T) {
	m := estimateOf(t, "llama-3.2-1b-instruct")
	if !m.Tied || m.Weights.LMHead != 0 || m.Weights.Embed != 128256*2048*2 {
		t.Errorf("tied %v, embed %d, lm_head %d", m.Tied, m.Weights.Embed, m.Weights.LMHead)
	}
}

// TestEstimateDocumented: docs/fit.md quotes EstimateError, and the refusal of a
// directory with neither config.json nor safetensors says what to give, in one line.
func TestEstimateDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/fit.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "within " + ErrorText(EstimateError) + " of the exact bytes"; !strings.Contains(string(data), want) {
		t.Errorf("docs/fit.md does not say %q", want)
	}
	_, err = Load(t.TempDir())
	if err == nil || strings.Count(err.Error(), "\n") > 1 || !strings.Contains(err.Error(), "give the Hugging Face model's directory, the one with config.json") {
		t.Errorf("empty directory: %v", err)
	}
}
