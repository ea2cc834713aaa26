package hfmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/safetensors"
)

// Weights are a checkpoint's bytes, exact, from its safetensors headers, sorted by how
// an engine spreads them over GPUs: per decoder layer, and the parts outside the layers.
type Weights struct {
	Total   int64
	Tensors int
	Shards  int
	// HeaderOnly counts the shards present as their headers alone.
	HeaderOnly int
	// Embed and LMHead are the vocabulary matrices, split by tensor parallelism
	// (vocab-parallel); Final the other tensors outside the layers (the final norm),
	// kept whole on the last pipeline stage.
	Embed, LMHead, Final int64
	// Vision is the vision (or audio) tower and its projector, on the first stage.
	Vision int64
	// MTP is the multi-token-prediction layers (mtp.*, or layers past
	// num_hidden_layers), which engines load only for speculative decoding.
	MTP int64
	// Layers are the decoder layers' bytes, by layer.
	Layers []LayerBytes
	// ByDType adds the bytes up by dtype.
	ByDType map[string]int64
}

// LayerBytes are one decoder layer's bytes.
type LayerBytes struct {
	// Split are the attention and dense MLP matrices, which tensor parallelism splits
	// (column-parallel q/k/v and gate/up, row-parallel o and down, with their scales).
	Split int64
	// Experts are the routed experts (.experts.), split by TP (each rank a slice of
	// every expert) or by EP (whole experts): the same bytes per rank either way when
	// the experts divide evenly.
	Experts int64
	// Replicated are what every rank keeps whole: norms, the router, biases and the
	// other one-dimensional tensors and scalars.
	Replicated int64
}

// Caps on the JSON files of a model directory, far above a real model's: config.json is
// a few KB (a multimodal one with a long quantisation ignore list, 30 KB); the index of a
// checkpoint with a tensor per expert (a 397B MoE: 370,000 tensors) is about 40 MB.
const (
	MaxConfigBytes = 16 << 20
	MaxIndexBytes  = 128 << 20
)

// The names that place a tensor.
var (
	layerIndex = lazyre.New(`(?:^|\.)(?:layers|h|blocks)\.(\d+)\.`)
	visionPart = []string{"visual.", "vision_tower", "vision_model", "vision_encoder", "multi_modal_projector", "mm_projector", "audio_tower", "image_newline", "vision_embed"}
)

// part is where a tensor goes.
type part int

const (
	partSplit part = iota
	partExperts
	partReplicated
	partEmbed
	partLMHead
	partFinal
	partVision
	partMTP
)

// classify places a tensor by its name and rank. layers is num_hidden_layers: a layer
// index at or past it is an MTP layer (DeepSeek-V3 keeps its MTP layer as layer 61).
func classify(name string, rank, layers int) (part, int) {
	for _, v := range visionPart {
		if strings.Contains(name, v) {
			return partVision, -1
		}
	}
	if strings.HasPrefix(name, "mtp.") || strings.Contains(name, ".mtp.") {
		return partMTP, -1
	}
	if m := layerIndex.FindStringSubmatch(name); m != nil {
		i, err := strconv.Atoi(m[1])
		if err == nil && i < layers {
			switch {
			case strings.Contains(name, ".experts."):
				return partExperts, i
			case rank <= 1, isRouter(name):
				return partReplicated, i
			}
			return partSplit, i
		}
		if err == nil {
			return partMTP, -1
		}
	}
	switch {
	case strings.Contains(name, "lm_head"), name == "output.weight", strings.Contains(name, "embed_out"):
		return partLMHead, -1
	case strings.Contains(name, "embed_tokens"), strings.Contains(name, "wte."), strings.Contains(name, "tok_embeddings"),
		strings.Contains(name, "word_embeddings"), strings.Contains(name, "embed_in."):
		return partEmbed, -1
	}
	return partFinal, -1
}

// isRouter tells the MoE router, which every rank keeps whole, from the experts' gate
// projections: mlp.gate.weight (Qwen), block_sparse_moe.gate.weight (Mixtral),
// router.weight (gpt-oss), shared_expert_gate (Qwen), and their scales.
func isRouter(name string) bool {
	return strings.Contains(name, ".gate.") || strings.HasSuffix(name, ".gate") || strings.Contains(name, "router") ||
		strings.Contains(name, "shared_expert_gate")
}

// index is model.safetensors.index.json.
type index struct {
	Metadata struct {
		TotalSize *int64 `json:"total_size"`
	} `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// MaxWeightBytes bounds the bytes of a checkpoint's tensors: a 1.6-trillion-parameter
// model (Switch-C, the most experts of any published config) stored in float32 is 6.4
// TB; 64 TiB is ten times that. Headers are what is summed, and a header-only copy
// can claim any size: past the bound the sums are refused before they could overflow.
const MaxWeightBytes int64 = 1 << 46

// maxDTypes bounds the dtypes a checkpoint's tensors use, all shards together: a real
// one uses a handful (BF16, F32 scales, U8 packs, F8_E4M3), and the safetensors enum
// has 25.
const maxDTypes = 64

// errNoWeights is a directory without safetensors files: no index, no
// model.safetensors, no *.safetensors. Load then estimates the weights.
var errNoWeights = errors.New("no safetensors files")

// readWeights reads the header of every shard of d: the ones model.safetensors.index.json
// names, else model.safetensors, else every *.safetensors file. Names the index lists
// and the shards lack, or the other way round, are errors: such a checkpoint does not
// load, and its sum would be wrong. The index's total_size is not trusted (exporters
// write the files' sizes, or 0); the headers are summed instead, and a total_size that
// differs is said.
func readWeights(d *modelDir, layers int) (Weights, []string, error) {
	w := Weights{Layers: make([]LayerBytes, max(layers, 0)), ByDType: map[string]int64{}}
	var notes []string
	var shards []string
	var wmap map[string]string
	var claimed *int64
	const indexName = "model.safetensors.index.json"
	indexPath := d.show(indexName)
	data, err := d.readFile(indexName, MaxIndexBytes, "a safetensors index")
	switch {
	case err == nil:
		var ix index
		if err := json.Unmarshal(data, &ix); err != nil {
			return w, nil, fmt.Errorf("%s: %v", indexPath, jsonError(err))
		}
		if len(ix.WeightMap) == 0 {
			return w, nil, fmt.Errorf("%s: its weight_map is empty", indexPath)
		}
		wmap, claimed = ix.WeightMap, ix.Metadata.TotalSize
		seen := map[string]bool{}
		for _, f := range ix.WeightMap {
			if !seen[f] {
				seen[f] = true
				shards = append(shards, f)
			}
		}
		slices.Sort(shards)
		for _, s := range shards {
			if s != filepath.Base(s) || !filepath.IsLocal(s) {
				return w, nil, fmt.Errorf("%s names the shard %s, outside the model's directory", indexPath, safetensors.Quote(s))
			}
			if strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
				return w, nil, fmt.Errorf("%s names the shard %s, not a plain file name", indexPath, safetensors.Quote(s))
			}
		}
	case errors.Is(err, fs.ErrNotExist):
		if d.exists("model.safetensors") {
			shards = []string{"model.safetensors"}
			break
		}
		if shards, err = d.list(".safetensors"); err != nil {
			return w, nil, err
		}
		if len(shards) == 0 {
			return w, nil, errNoWeights
		}
		notes = append(notes, fmt.Sprintf("no model.safetensors.index.json: every *.safetensors file of the directory is counted (%s)", plural.S(len(shards), "file")))
	default:
		return w, nil, err
	}
	type tally struct{ tensors, bytes int64 }
	unknown := map[string]*tally{}
	for _, s := range shards {
		f, err := readShard(d, s)
		if err != nil {
			return w, nil, err
		}
		w.Shards++
		if f.Extent == safetensors.HeaderOnly {
			w.HeaderOnly++
		}
		for _, t := range f.Header.Tensors {
			if wmap != nil {
				want, listed := wmap[t.Name]
				switch {
				case !listed:
					return w, nil, fmt.Errorf("%s holds tensor %s, which the index does not list: the index and the shards are of different checkpoints", s, safetensors.Quote(t.Name))
				case want != s:
					return w, nil, fmt.Errorf("%s holds tensor %s, which the index puts in %s", s, safetensors.Quote(t.Name), safetensors.Quote(want))
				}
				delete(wmap, t.Name)
			}
			if err := w.add(t, layers); err != nil {
				return w, nil, fmt.Errorf("%s: %w", s, err)
			}
			if _, known := safetensors.Bits(t.DType); !known {
				u := unknown[t.DType]
				if u == nil {
					u = &tally{}
					unknown[t.DType] = u
				}
				u.tensors++
				u.bytes += t.Bytes()
			}
		}
	}
	if len(wmap) > 0 {
		names := make([]string, 0, len(wmap))
		for n := range wmap {
			names = append(names, n)
		}
		slices.Sort(names)
		return w, nil, fmt.Errorf("the index lists %s that no shard holds (%s, in %s): a shard is missing or from another checkpoint", plural.S(len(names), "tensor"), safetensors.Quote(names[0]), wmapFile(names[0], data))
	}
	dtypes := make([]string, 0, len(unknown))
	for dt := range unknown {
		dtypes = append(dtypes, dt)
	}
	slices.Sort(dtypes)
	for _, dt := range dtypes {
		u := unknown[dt]
		notes = append(notes, fmt.Sprintf("%s of dtype %s, which gpusplit does not know: counted by their offsets, %d bytes", plural.S(int(u.tensors), "tensor"), safetensors.Quote(dt), u.bytes))
	}
	if claimed != nil && *claimed != w.Total {
		if *claimed == 0 {
			notes = append(notes, "the index's total_size is 0; the headers' sum is used")
		} else {
			notes = append(notes, fmt.Sprintf("the index's total_size is %d bytes, the headers add up to %d: the headers are used (exporters write the files' sizes, headers included, or round)", *claimed, w.Total))
		}
	}
	if w.HeaderOnly > 0 {
		notes = append(notes, fmt.Sprintf("%s of %d %s headers alone: the sizes are the headers' (exact), the weights are not on this machine", plural.S(w.HeaderOnly, "shard"), w.Shards, isAre(w.HeaderOnly)))
	}
	return w, notes, nil
}

// readShard reads the header of the shard name of d.
func readShard(d *modelDir, name string) (*safetensors.File, error) {
	f, err := d.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return safetensors.ReadFile(f, d.show(name))
}

func isAre(n int) string {
	if n == 1 {
		return "is its"
	}
	return "are their"
}

// wmapFile finds the shard the index gave name, quoted for the message; the map itself
// was emptied as the shards were read.
func wmapFile(name string, data []byte) string {
	var ix index
	if json.Unmarshal(data, &ix) == nil {
		if f, ok := ix.WeightMap[name]; ok {
			return safetensors.Quote(f)
		}
	}
	return "the index"
}

// add counts t's bytes where t goes. Every sum is of parts of Total, which is kept
// within MaxWeightBytes: none can overflow.
func (w *Weights) add(t safetensors.Tensor, layers int) error {
	n := t.Bytes()
	if n > MaxWeightBytes-w.Total {
		return fmt.Errorf("with tensor %s the tensors add up to more than %d bytes (64 TiB), the most gpusplit accepts (ten times a 1.6-trillion-parameter model in float32): no real checkpoint's headers", safetensors.Quote(t.Name), MaxWeightBytes)
	}
	if _, ok := w.ByDType[t.DType]; !ok && len(w.ByDType) == maxDTypes {
		return fmt.Errorf("tensor %s: more than %d dtypes in one checkpoint: no real checkpoint's headers", safetensors.Quote(t.Name), maxDTypes)
	}
	w.Total += n
	w.Tensors++
	w.ByDType[t.DType] += n
	p, layer := classify(t.Name, len(t.Shape), layers)
	switch p {
	case partSplit:
		w.Layers[layer].Split += n
	case partExperts:
		w.Layers[layer].Experts += n
	case partReplicated:
		w.Layers[layer].Replicated += n
	case partEmbed:
		w.Embed += n
	case partLMHead:
		w.LMHead += n
	case partFinal:
		w.Final += n
	case partVision:
		w.Vision += n
	case partMTP:
		w.MTP += n
	}
	return nil
}

// Serving is what an engine loads without speculative decoding: everything but the
// MTP layers.
func (w Weights) Serving() int64 { return w.Total - w.MTP }
