package hfmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/safetensors"
)

// object is a JSON object whose values are decoded when asked for.
type object map[string]json.RawMessage

// parseObject decodes a JSON object. Its errors say where the JSON breaks, never what
// it holds there: the file may be a link's target, or anything a user put in its place.
func parseObject(data []byte) (object, error) {
	var o object
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, jsonError(err)
	}
	if o == nil {
		return nil, errors.New("not a JSON object")
	}
	return o, nil
}

// jsonError words a decoding error without the text the decoder quotes (the character
// where the syntax breaks, a number it cannot hold).
func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Errorf("not valid: %s holds a value of the wrong type", safetensors.Quote(typ.Field))
	case errors.As(err, &typ):
		return errors.New("not a JSON object")
	}
	return errors.New("not valid JSON")
}

// sub returns the object under key, or nil.
func (o object) sub(key string) object {
	raw, ok := o[key]
	if !ok {
		return nil
	}
	var s object
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return s
}

// has reports whether key is present with a value other than null.
func (o object) has(key string) bool {
	raw, ok := o[key]
	return ok && string(raw) != "null"
}

// int returns the integer under key; ok is false when it is absent, null or not a
// whole number.
func (o object) int(key string) (int, bool) {
	raw, ok := o[key]
	if !ok {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt64/2 {
		return 0, false
	}
	return int(f), true
}

func (o object) str(key string) string {
	var s string
	if raw, ok := o[key]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

func (o object) bool(key string) (bool, bool) {
	raw, ok := o[key]
	if !ok {
		return false, false
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return false, false
	}
	return b, true
}

func (o object) strings(key string) []string {
	var s []string
	if raw, ok := o[key]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

func (o object) ints(key string) []int {
	var s []int
	if raw, ok := o[key]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// textConfig is where a config keeps its language model: multimodal configs nest it
// (text_config in Qwen3.5, Gemma 3, Llama 4; llm_config and language_config elsewhere);
// a key the nested object lacks is looked up at the top level, where some configs keep
// what the text model shares (tie_word_embeddings, quantization_config).
type textConfig struct {
	text, top object
	// nested names the object the text model came from, for messages ("text_config").
	nested string
}

func newTextConfig(top object) textConfig {
	for _, k := range []string{"text_config", "llm_config", "language_config"} {
		if s := top.sub(k); s != nil {
			return textConfig{text: s, top: top, nested: k}
		}
	}
	return textConfig{text: top, top: top}
}

func (c textConfig) lookup(key string) (object, bool) {
	if c.text.has(key) {
		return c.text, true
	}
	if c.top.has(key) {
		return c.top, true
	}
	return nil, false
}

func (c textConfig) int(key string) (int, bool) {
	if o, ok := c.lookup(key); ok {
		return o.int(key)
	}
	return 0, false
}

func (c textConfig) str(key string) string {
	if o, ok := c.lookup(key); ok {
		return o.str(key)
	}
	return ""
}

func (c textConfig) has(key string) bool {
	_, ok := c.lookup(key)
	return ok
}

// field names a key as the reader finds it in config.json.
func (c textConfig) field(key string) string {
	if c.nested != "" && !c.top.has(key) {
		return c.nested + "." + key
	}
	return key
}

// firstInt returns the first of keys that is present, with its name.
func (c textConfig) firstInt(keys ...string) (int, string, bool) {
	for _, k := range keys {
		if v, ok := c.int(k); ok {
			return v, k, true
		}
	}
	return 0, "", false
}

// layerKinds works out each layer's attention from the config: an explicit layer_types
// list, a full-attention interval (Qwen3-Next, Qwen3.5), a sliding-window pattern
// (Gemma 3), Qwen2's max_window_layers, or a window on every layer (Mistral 7B v0.1).
// problems name what it cannot read.
func layerKinds(c textConfig, layers int) ([]LayerKind, []string) {
	kinds := make([]LayerKind, layers)
	if o, ok := c.lookup("layer_types"); ok {
		types := o.strings("layer_types")
		if len(types) != layers {
			return nil, []string{fmt.Sprintf("%s lists %d layers, num_hidden_layers says %d", c.field("layer_types"), len(types), layers)}
		}
		var problems []string
		for i, t := range types {
			switch t {
			case "full_attention", "attention", "global", "global_attention":
				kinds[i] = LayerFull
			case "sliding_attention", "sliding_window", "local", "local_attention", "chunked_attention":
				kinds[i] = LayerSliding
			case "linear_attention":
				kinds[i] = LayerLinear
			default:
				if !slices.Contains(problems, t) && len(problems) <= maxQuotedTypes {
					problems = append(problems, t)
				}
			}
		}
		if len(problems) > 0 {
			return nil, []string{fmt.Sprintf("%s holds %s, which gpusplit cannot size (it knows full_attention, sliding_attention and linear_attention)", c.field("layer_types"), quoteAll(problems))}
		}
		return kinds, nil
	}
	if k, ok := c.int("full_attention_interval"); ok && k > 0 && c.has("linear_num_value_heads") {
		for i := range kinds {
			if (i+1)%k != 0 {
				kinds[i] = LayerLinear
			}
		}
		return kinds, nil
	}
	window, hasWindow := c.int("sliding_window")
	if !hasWindow || window <= 0 {
		return kinds, nil
	}
	if use, ok := c.lookup("use_sliding_window"); ok {
		if b, _ := use.bool("use_sliding_window"); !b {
			return kinds, nil
		}
	}
	for _, key := range []string{"sliding_window_pattern", "_sliding_window_pattern"} {
		if p, ok := c.int(key); ok && p > 0 {
			for i := range kinds {
				if (i+1)%p != 0 {
					kinds[i] = LayerSliding
				}
			}
			return kinds, nil
		}
	}
	if m, ok := c.int("max_window_layers"); ok && c.has("use_sliding_window") {
		for i := m; i < layers; i++ {
			kinds[i] = LayerSliding
		}
		return kinds, nil
	}
	for i := range kinds {
		kinds[i] = LayerSliding
	}
	return kinds, nil
}

// maxQuotedTypes is how many unknown layer types a message names.
const maxQuotedTypes = 4

// quoteAll quotes names read from config.json, the first maxQuotedTypes of them.
func quoteAll(s []string) string {
	var q []string
	for i, x := range s {
		if i == maxQuotedTypes {
			q = append(q, "and more")
			break
		}
		q = append(q, safetensors.Quote(x))
	}
	return strings.Join(q, ", ")
}

// dtypeBytes is the width of a torch dtype name as configs write it.
func dtypeBytes(name string) (int, bool) {
	switch strings.TrimPrefix(name, "torch.") {
	case "bfloat16", "float16", "half", "bf16", "fp16":
		return 2, true
	case "float32", "float", "fp32":
		return 4, true
	case "float8_e4m3fn", "float8_e5m2", "fp8":
		return 1, true
	}
	return 0, false
}
