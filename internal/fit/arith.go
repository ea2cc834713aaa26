package fit

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/gpusplit/gpusplit/internal/hfmodel"
)

// The memory arithmetic is in int64 bytes. hfmodel bounds what config.json and the
// headers may say, and the products of those bounds fit, but a context of 2^28 tokens
// at a cache of 2^38 bytes per token does not: every product and sum of the KV cache
// and the weights is checked, and one that passes 2^63 − 1 refuses the fit rather than
// wrapping into a verdict.

// ErrTooLarge is what a fit whose figures pass int64 is, for errors.Is.
var ErrTooLarge = errors.New("the figures pass 2^63 bytes, past anything gpusplit counts")

// Bounds on what the command line and the GPU table give, as hfmodel bounds config.json.
const (
	// MaxGPUMemory bounds a GPU's memory: the largest GPUs have 288 GB (B300, MI355X);
	// 8 TiB is about 30 times that.
	MaxGPUMemory = int64(1) << 43
	// MaxKVBytesPerToken bounds --kv-bytes-per-token: GPT-3-sized multi-head attention
	// (BLOOM-176B: 2 × 70 layers × 112 heads × 128 × 2 bytes) takes 4,014,080 bytes per
	// token; 1 GiB is more than 250 times that.
	MaxKVBytesPerToken = int64(1) << 30
)

// mul returns the product of non-negative factors; ok is false for a negative factor
// or a product past int64.
func mul(xs ...int64) (int64, bool) {
	p := int64(1)
	for _, x := range xs {
		if x < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(uint64(p), uint64(x))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		p = int64(lo)
	}
	return p, true
}

// sum adds non-negative figures and remembers whether any was negative or the total
// passed int64.
type sum struct {
	n   int64
	bad bool
}

func (s *sum) add(xs ...int64) {
	for _, x := range xs {
		if x < 0 || x > math.MaxInt64-s.n {
			s.bad = true
			continue
		}
		s.n += x
	}
}

// SequenceError is one sequence whose KV cache passes int64: the context is too long for
// the cache per token. It is ErrTooLarge, for errors.Is.
type SequenceError struct {
	Tokens   int
	PerToken int64
	Sliding  string // what the sliding-window layers add, said; "" without them
}

func (e *SequenceError) Error() string {
	return fmt.Sprintf("%v: one sequence of %d tokens at %d bytes of KV cache per token on one GPU%s", ErrTooLarge, e.Tokens, e.PerToken, e.Sliding)
}

func (e *SequenceError) Is(target error) bool { return target == ErrTooLarge }

// tooLarge is ErrTooLarge for what, said.
func tooLarge(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrTooLarge, fmt.Sprintf(format, args...))
}

// KVBytesError is an Options.KVBytesPerToken past MaxKVBytesPerToken.
type KVBytesError struct{ Bytes int64 }

func (e *KVBytesError) Error() string {
	return fmt.Sprintf("%d KV cache bytes per token is more than the %d (1 GiB) gpusplit accepts: BLOOM-176B's multi-head attention takes 4,014,080", e.Bytes, MaxKVBytesPerToken)
}

// checkInputs refuses a model, GPUs or options outside the bounds, before any
// arithmetic: hfmodel.Load keeps a model within them, a Model built otherwise may not.
func checkInputs(m *hfmodel.Model, gpus []GPU, o Options) error {
	switch {
	case m.Layers <= 0 || m.Layers > hfmodel.MaxLayers:
		return fmt.Errorf("the model has %d layers, outside the 1 to %d gpusplit accepts", m.Layers, hfmodel.MaxLayers)
	case len(m.Kinds) != m.Layers || len(m.Weights.Layers) != m.Layers:
		return fmt.Errorf("the model has %d layers, but %d layer kinds and %d layers of weights: its weights were not read (hfmodel.Load reads them)", m.Layers, len(m.Kinds), len(m.Weights.Layers))
	case o.KVBytesPerToken > MaxKVBytesPerToken:
		return &KVBytesError{o.KVBytesPerToken}
	}
	for _, g := range gpus {
		if g.Memory <= 0 || g.Memory > MaxGPUMemory {
			return fmt.Errorf("GPU %s: %d bytes of memory, outside the 1 to %d (8 TiB) gpusplit accepts", g.Address, g.Memory, MaxGPUMemory)
		}
	}
	return nil
}
