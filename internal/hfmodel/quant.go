package hfmodel

import (
	"fmt"
	"slices"
	"strings"
)

// Quant is what a checkpoint says of its quantisation. It names the scheme; the bytes
// come from the safetensors headers, which hold the packed weights and their scales as
// tensors of their own, so nothing here is used to size the weights.
type Quant struct {
	// Scheme is "" for none, else fp8, nvfp4, mxfp4, awq, gptq, int8, int4 or the
	// config's quant_method when it is none of these.
	Scheme string
	// Bits of a quantised weight; GroupSize the elements sharing a scale (16 for NVFP4,
	// 32 for MXFP4, AWQ's and GPTQ's group_size); Block the FP8 block ([128, 128] for
	// DeepSeek-V3 and Qwen's FP8 checkpoints), zero when per tensor or per channel.
	Bits      int
	GroupSize int
	Block     [2]int
	// KVCache is "fp8" when the checkpoint ships FP8 scales for the KV cache
	// (kv_cache_quant_algo, kv_cache_scheme): the engine can then keep it in FP8.
	KVCache string
	// Source is where it was read: "config.json quantization_config",
	// "hf_quant_config.json".
	Source string
	// Ignore are the modules the checkpoint leaves unquantised, as the config names
	// them (modules_to_not_convert, ignore, exclude_modules): names, globs ("*self_attn*")
	// or "re:" expressions. Only the weights' estimate uses them, when there are no
	// safetensors headers to count.
	Ignore []string
}

// maxIgnore bounds the ignore list kept: the longest published one gpusplit knows,
// Qwen3.5-122B-A10B-FP8's modules_to_not_convert, has 321 entries.
const maxIgnore = 4096

// ignoreList reads the first list of module names of keys that q holds.
func ignoreList(q object, keys ...string) []string {
	for _, k := range keys {
		if l := q.strings(k); len(l) > 0 {
			return l[:min(len(l), maxIgnore)]
		}
	}
	return nil
}

// Label names the scheme for people: "NVFP4 (groups of 16, hf_quant_config.json)".
func (q Quant) Label() string {
	if q.Scheme == "" {
		return "none"
	}
	var parts []string
	switch {
	case q.Block != [2]int{}:
		parts = append(parts, fmt.Sprintf("blocks of %d×%d", q.Block[0], q.Block[1]))
	case q.GroupSize > 0:
		parts = append(parts, fmt.Sprintf("groups of %d", q.GroupSize))
	}
	if q.Bits > 0 && q.Scheme != "fp8" && q.Scheme != "nvfp4" && q.Scheme != "mxfp4" {
		parts = append(parts, fmt.Sprintf("%d-bit", q.Bits))
	}
	if q.KVCache != "" {
		parts = append(parts, q.KVCache+" KV-cache scales")
	}
	parts = append(parts, q.Source)
	return strings.ToUpper(q.Scheme) + " (" + strings.Join(parts, ", ") + ")"
}

// parseQuant reads a quantization_config (config.json) in the forms the engines take:
// quant_method fp8 (with weight_block_size), mxfp4, awq, gptq, modelopt (quant_algo),
// compressed-tensors (config_groups with weights of num_bits, type and group_size).
func parseQuant(q object, source string) Quant {
	out := Quant{Source: source}
	method := printable(strings.ToLower(q.str("quant_method")))
	switch method {
	case "fp8":
		out.Scheme, out.Bits = "fp8", 8
		if b := q.ints("weight_block_size"); len(b) == 2 {
			out.Block = [2]int{b[0], b[1]}
		}
	case "mxfp4":
		out.Scheme, out.Bits, out.GroupSize = "mxfp4", 4, 32
	case "awq", "gptq", "awq_marlin", "gptq_marlin":
		out.Scheme = strings.TrimSuffix(method, "_marlin")
		out.Bits, _ = q.int("bits")
		out.GroupSize, _ = q.int("group_size")
	case "modelopt":
		out = modelOpt(q, source)
	case "compressed-tensors":
		out = compressedTensors(q, source)
	case "":
		if q.has("quant_algo") {
			out = modelOpt(q, source)
		}
	default:
		out.Scheme = method
		out.Bits, _ = q.int("bits")
		out.GroupSize, _ = q.int("group_size")
	}
	if out.Ignore == nil {
		out.Ignore = ignoreList(q, "modules_to_not_convert", "ignore", "ignored_layers", "exclude_modules")
	}
	return out
}

// modelOpt reads NVIDIA Model Optimizer's form, as hf_quant_config.json's "quantization"
// object or config.json's quantization_config: quant_algo NVFP4 (FP4 E2M1 in groups of
// 16 with FP8 scales) or FP8, and kv_cache_quant_algo.
func modelOpt(q object, source string) Quant {
	out := Quant{Source: source, Ignore: ignoreList(q, "exclude_modules", "ignore")}
	switch algo := printable(strings.ToUpper(q.str("quant_algo"))); algo {
	case "NVFP4", "W4A16_NVFP4", "NVFP4_AWQ":
		out.Scheme, out.Bits, out.GroupSize = "nvfp4", 4, 16
	case "FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO":
		out.Scheme, out.Bits = "fp8", 8
	case "MXFP4":
		out.Scheme, out.Bits, out.GroupSize = "mxfp4", 4, 32
	case "":
	default:
		out.Scheme = strings.ToLower(algo)
	}
	if g, ok := q.int("group_size"); ok && g > 0 {
		out.GroupSize = g
	}
	if kv := strings.ToUpper(q.str("kv_cache_quant_algo")); strings.HasPrefix(kv, "FP8") {
		out.KVCache = "fp8"
	}
	if kv := q.sub("kv_cache_scheme"); kv != nil {
		if n, _ := kv.int("num_bits"); n == 8 && kv.str("type") == "float" {
			out.KVCache = "fp8"
		}
	}
	return out
}

// compressedTensors reads llm-compressor's form: the widest scheme of its config
// groups names the checkpoint (W4A4 float in groups of 16 is NVFP4).
func compressedTensors(q object, source string) Quant {
	out := Quant{Source: source, Ignore: ignoreList(q, "ignore")}
	groups := q.sub("config_groups")
	names := make([]string, 0, len(groups))
	for k := range groups {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		w := groups.sub(name).sub("weights")
		if w == nil {
			continue
		}
		bits, _ := w.int("num_bits")
		group, _ := w.int("group_size")
		kind := w.str("type")
		scheme := fmt.Sprintf("int%d", bits)
		switch {
		case kind == "float" && bits == 4 && group == 16:
			scheme = "nvfp4"
		case kind == "float" && bits == 4 && group == 32:
			scheme = "mxfp4"
		case kind == "float" && bits == 8:
			scheme = "fp8"
		}
		if out.Scheme == "" || bits > out.Bits {
			out.Scheme, out.Bits, out.GroupSize = scheme, bits, group
			if b := w.ints("block_structure"); len(b) == 2 {
				out.Block = [2]int{b[0], b[1]}
			}
		}
	}
	if kv := q.sub("kv_cache_scheme"); kv != nil {
		if n, _ := kv.int("num_bits"); n == 8 && kv.str("type") == "float" {
			out.KVCache = "fp8"
		}
	}
	if out.Scheme == "" {
		out.Scheme = "compressed-tensors"
	}
	return out
}
