package fit

import (
	"fmt"
	"math"
	"strings"
)

// Engine is an inference server, which sets how much of a GPU it keeps for weights and
// the KV cache.
type Engine string

const (
	VLLM   Engine = "vllm"
	SGLang Engine = "sglang"
)

// ParseEngine reads an engine's name; an unknown one is an error that names it and says
// which there are.
func ParseEngine(s string) (Engine, error) {
	switch e := Engine(strings.ToLower(s)); e {
	case VLLM, SGLang:
		return e, nil
	}
	return "", fmt.Errorf("%q: it is vllm or sglang", s)
}

// Budget is what an engine leaves for the KV cache on one GPU, and why.
type Budget struct {
	// Fraction is the share of the GPU's memory the engine takes for weights and KV
	// cache: vLLM's gpu_memory_utilization, SGLang's mem_fraction_static.
	Fraction float64
	// FractionFrom says where it came from.
	FractionFrom string
	// Reserve is the rest: what the engine keeps from the GPU besides weights and KV
	// cache (the part of memory outside the fraction, the CUDA context, activations,
	// CUDA graphs, NCCL buffers).
	Reserve int64
}

// The engines' defaults.
const (
	// vLLM's CacheConfig.gpu_memory_utilization (vllm/config/cache.py @ 002f10e0cfa1373a
	// 19a0d2756598a34b700d20e5); releases before it used 0.9.
	vllmUtilization = 0.92
	// vLLM's profile runs one forward pass at max_num_batched_tokens and keeps its peak
	// activations, CUDA graphs and non-torch memory (the CUDA context, NCCL) within
	// the utilization but outside the KV cache: 0.5 GiB of context (about 300 MB with
	// lazy module loading, pytorch/pytorch#107667) and 1.5 GiB of activations and
	// graphs, the 1–2 GiB of headroom vLLM's deployments keep (an estimate: the
	// profile measures it at start).
	vllmContext     = 512 * MiB
	vllmActivations = 1536 * MiB
	// SGLang measures the GPU's free memory after loading the weights, so the CUDA
	// context comes off the KV cache too.
	sglangContext = 512 * MiB
)

// budget returns what engine e keeps on a GPU of mem bytes in a placement of tp × pp;
// fraction, when above 0, overrides the engine's default. mla selects SGLang's graph
// reserve for MLA backends.
func budget(e Engine, mem int64, tp, pp int, mla bool, fraction float64) Budget {
	switch e {
	case SGLang:
		b := Budget{Fraction: fraction, FractionFrom: "--memory-fraction"}
		if fraction <= 0 {
			b.Fraction = sglangFraction(mem, tp, pp, mla)
			b.FractionFrom = "SGLang's default for this GPU and placement (server_args.py)"
		}
		b.Reserve = mem - int64(b.Fraction*float64(mem)) + sglangContext
		return b
	}
	b := Budget{Fraction: fraction, FractionFrom: "--memory-fraction"}
	if fraction <= 0 {
		b.Fraction, b.FractionFrom = vllmUtilization, "vLLM's default gpu_memory_utilization"
	}
	b.Reserve = mem - int64(b.Fraction*float64(mem)) + vllmContext + vllmActivations
	return b
}

// sglangFraction is SGLang's mem_fraction_static when none is given, as
// _handle_gpu_memory_settings in python/sglang/srt/server_args.py works it out
// (github.com/sgl-project/sglang @ 001067fffe33427bee0ed2f007fb7551a1d76b44): a reserve
// in MiB of 512 + 1.5 × max(chunked_prefill_size, 2048) + TP·PP/8 × 1024, plus the
// decode CUDA graphs (2 MiB per captured batch size up to cuda_graph_max_bs) and the
// prefill graphs (8 MiB for each of the 58 sizes captured up to 8192, or 1.5 GiB on MLA
// backends), at least 10 GiB on GPUs of more than 60 GiB; the fraction is the rest of
// the GPU, rounded to three places. chunked_prefill_size and cuda_graph_max_bs follow
// the GPU's memory and the TP size, as the same function sets them.
func sglangFraction(mem int64, tp, pp int, mla bool) float64 {
	gpu := float64(mem) / float64(MiB)
	chunk, bs := 16384.0, 512.0
	small := tp < 4
	switch gib := gpu / 1024; {
	case gib < 20:
		chunk, bs = 2048, 8
	case gib < 35:
		chunk, bs = 2048, pick(small, 24, 80)
	case gib < 60:
		chunk, bs = 4096, pick(small, 32, 160)
	case gib < 160:
		chunk, bs = 8192, pick(small, 256, 512)
	}
	reserve := 512 + 1.5*math.Max(chunk, 2048) + float64(tp*pp)/8*1024 + 2*bs
	if mla {
		reserve += 1536
	} else {
		reserve += 8 * 58
	}
	if gpu > 60*1024 && reserve < 10*1024 {
		reserve = 10 * 1024
	}
	return math.Round((gpu-reserve)/gpu*1000) / 1000
}

func pick(cond bool, a, b float64) float64 {
	if cond {
		return a
	}
	return b
}
