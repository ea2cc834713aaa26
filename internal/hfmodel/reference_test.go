package hfmodel

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/testutils/checkpoint"
)

var update = flag.Bool("update", false, "rewrite the header-only shards of testdata/models/qwen3.5-397b-a17b-nvfp4-like")

// referenceDir is the reference case's model: a 397B-parameter MoE in NVFP4 shaped as
// Qwen3.5-397B-A17B (testdata/models/qwen3.5-397b-a17b-nvfp4-like/SOURCE says where
// each figure comes from), kept as header-only shards.
const referenceDir = "../../testdata/models/qwen3.5-397b-a17b-nvfp4-like"

// reference397B are its dimensions, from the published model card: 60 layers as 15 ×
// (3 Gated DeltaNet + 1 gated attention), hidden 4096, 32 query and 2 KV heads of 256,
// 16 QK and 64 V linear heads of 128, 512 experts of 1024 and a shared expert of 1024,
// a vocabulary of 248,320, one MTP layer; the vision tower of Qwen3.5's configs.
var reference397B = checkpoint.Qwen35{
	Layers: 60, FullInterval: 4, Hidden: 4096, Heads: 32, KVHeads: 2, HeadDim: 256,
	LinearKeyHeads: 16, LinearValueHeads: 64, LinearKeyDim: 128, LinearValueDim: 128, Conv: 4,
	Experts: 512, ExpertWidth: 1024, SharedWidth: 1024, Vocab: 248320, MTPLayers: 1,
	Vision: checkpoint.Vision{Depth: 27, Hidden: 1152, Intermediate: 4304, Out: 4096, Positions: 2304, Patch: 16, Temporal: 2},
	NVFP4:  true,
}

// TestReferenceModelIsCurrent checks that the committed shards are the ones the
// dimensions give; go test -run TestReferenceModelIsCurrent -update writes them.
func TestReferenceModelIsCurrent(t *testing.T) {
	dir := t.TempDir()
	if _, err := checkpoint.Write(dir, checkpoint.Qwen35Model(reference397B), checkpoint.Options{Data: checkpoint.HeaderOnly}); err != nil {
		t.Fatal(err)
	}
	built, _ := filepath.Glob(filepath.Join(dir, "*"))
	if *update {
		old, _ := filepath.Glob(filepath.Join(referenceDir, "model*.safetensors*"))
		for _, f := range old {
			os.Remove(f)
		}
		for _, f := range built {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(referenceDir, filepath.Base(f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	kept, _ := filepath.Glob(filepath.Join(referenceDir, "model*.safetensors*"))
	if len(kept) != len(built) {
		t.Fatalf("%s holds %d shard and index files, the dimensions give %d: go test -run TestReferenceModelIsCurrent -update", referenceDir, len(kept), len(built))
	}
	for _, f := range built {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join(referenceDir, filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s differs from what the dimensions give (%v): go test -run TestReferenceModelIsCurrent -update", filepath.Base(f), err)
		}
	}
	for _, f := range []string{"config.json", "hf_quant_config.json", "SOURCE"} {
		if _, err := os.Stat(filepath.Join(referenceDir, f)); err != nil {
			t.Error(err)
		}
	}
	src, _ := os.ReadFile(filepath.Join(referenceDir, "SOURCE"))
	if !strings.Contains(string(src), "constructed") {
		t.Error("SOURCE must say the reference model is constructed, not copied")
	}
}
