package hfmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// configWith is a config of 4 layers of 8 heads of 64, with field set to value (raw
// JSON), nested under text_config when nested is set.
func configWith(field, value string, nested bool) []byte {
	c := map[string]json.RawMessage{
		"num_hidden_layers":   json.RawMessage("4"),
		"num_attention_heads": json.RawMessage("8"),
		"head_dim":            json.RawMessage("64"),
	}
	c[field] = json.RawMessage(value)
	out, _ := json.Marshal(c)
	if nested {
		out, _ = json.Marshal(map[string]json.RawMessage{"architectures": json.RawMessage(`["X"]`), "text_config": out})
	}
	return out
}

// TestBoundsDocumented: docs/fit.md's table of bounds is Bounds, row for row: the
// names, the bound, the largest published value and where.
func TestBoundsDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/fit.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) != 4 {
			continue
		}
		names := strings.Fields(strings.NewReplacer("|", " ", "`", " ", "(", " ", ")", " ", ",", " ").Replace(cells[0]))
		rows[names[0]] = append(names, cells[1:]...)
	}
	if len(rows) != len(Bounds) {
		t.Errorf("%d rows in docs/fit.md, %d bounds", len(rows), len(Bounds))
	}
	figure := func(n int64) string {
		s := strconv.FormatInt(n, 10)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	}
	for _, b := range Bounds {
		want := append(append([]string{}, b.Fields...), figure(b.Max), figure(b.Largest), b.Seen+" |")
		if got := rows[b.Fields[0]]; strings.Join(got, ";") != strings.Join(want, ";") {
			t.Errorf("docs/fit.md has %q, Bounds %q", got, want)
		}
	}
}

// TestBounds: every field of Bounds, by each of its names, is read at its bound and
// refused one past it and below 0, with the field, the value and the bound named.
func TestBounds(t *testing.T) {
	if b, _ := boundOf("num_hidden_layers"); b.Max != 2048 || MaxLayers != 2048 || MaxContext != 1<<28 {
		// A larger bound is tested below at its value: 2^31 layers would allocate 16 GB.
		t.Fatalf("layers bound %d, MaxLayers %d, MaxContext %d: docs/fit.md gives 2048 and 268,435,456", b.Max, MaxLayers, MaxContext)
	}
	for _, b := range Bounds {
		if b.Max < 16*b.Largest || b.Seen == "" {
			t.Errorf("%s: bound %d is not 16 times the largest published %d (%q)", b.Fields[0], b.Max, b.Largest, b.Seen)
		}
		for _, field := range b.Fields {
			t.Run(field, func(t *testing.T) {
				if _, err := ParseConfig(configWith(field, strconv.FormatInt(b.Max, 10), false)); err != nil {
					t.Errorf("at its bound %d: %v", b.Max, err)
				}
				for _, c := range []struct {
					value  string
					nested bool
					want   string
				}{
					{strconv.FormatInt(b.Max+1, 10), false, strconv.FormatInt(b.Max+1, 10)},
					{"-1", false, "-1"},
					{strconv.FormatInt(b.Max+1, 10), true, strconv.FormatInt(b.Max+1, 10)},
					{"1e300", false, "1e+300"},
					{"1e400", false, "a number past what a float64 holds"},
				} {
					_, err := ParseConfig(configWith(field, c.value, c.nested))
					var be *BoundError
					if !errors.As(err, &be) {
						t.Fatalf("%s: %v, want a BoundError", c.value, err)
					}
					wantField := field
					if c.nested {
						wantField = "text_config." + field
					}
					msg := err.Error()
					if be.Field != wantField || be.Value != c.want || be.Bound.Max != b.Max ||
						!strings.HasPrefix(msg, wantField+" is "+c.want+", outside the 0 to "+strconv.FormatInt(b.Max, 10)+" gpusplit accepts") {
						t.Errorf("%s: %q (%+v)", c.value, msg, be)
					}
				}
			})
		}
	}
}

// TestHugeConfigValues are the config.json values that broke fit: 4e18 layers panicked
// in makeslice, 2e9 took gigabytes and a minute, a negative max_window_layers indexed
// before the first layer, and KV heads or a head_dim of 2^62 wrapped the KV cache's
// product into a verdict. Each is refused at once, through LoadConfig as fit reads it,
// naming the field.
func TestHugeConfigValues(t *testing.T) {
	for _, c := range []struct {
		name, config, want string
	}{
		{"4e18 layers", `{"num_hidden_layers": 4e18, "num_attention_heads": 8, "head_dim": 64}`, "num_hidden_layers is 4e+18, outside the 0 to 2048"},
		{"2e9 layers", `{"num_hidden_layers": 2e9, "num_attention_heads": 8, "head_dim": 64}`, "num_hidden_layers is 2000000000, outside the 0 to 2048"},
		{"2e9 layers nested", `{"text_config": {"num_hidden_layers": 2e9, "num_attention_heads": 8, "head_dim": 64}}`, "text_config.num_hidden_layers is 2000000000"},
		{"KV heads of 2^62", `{"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4611686018427387903, "head_dim": 64}`, "num_key_value_heads is 4.611686018427388e+18, outside the 0 to 2048"},
		{"head_dim of 2^62", `{"num_hidden_layers": 4, "num_attention_heads": 8, "head_dim": 4611686018427387903}`, "head_dim is 4.611686018427388e+18, outside the 0 to 8192"},
		{"negative max_window_layers", `{"num_hidden_layers": 4, "num_attention_heads": 8, "head_dim": 64, "sliding_window": 4096, "use_sliding_window": true, "max_window_layers": -5}`, "max_window_layers is -5, outside the 0 to 2048"},
		{"a window past any context", `{"num_hidden_layers": 4, "num_attention_heads": 8, "head_dim": 64, "sliding_window": 1e12}`, "sliding_window is 1000000000000, outside the 0 to 268435456"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := LoadConfig(dir)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want %q", err, c.want)
			}
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 || time.Since(start) > 5*time.Second {
				t.Errorf("%d bytes and %v to refuse it", grown, time.Since(start))
			}
		})
	}
}

// TestKeptConfigsWithinLargest: the published configs kept in testdata are within the
// largest values the bounds cite, so that no citation understates what is published.
func TestKeptConfigsWithinLargest(t *testing.T) {
	dirs, _ := filepath.Glob(models + "*/config.json")
	if len(dirs) < 8 {
		t.Fatalf("%d configs", len(dirs))
	}
	for _, p := range dirs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		top, err := parseObject(data)
		if err != nil {
			t.Fatal(err)
		}
		c := newTextConfig(top)
		for _, b := range Bounds {
			for _, f := range b.Fields {
				if o, ok := c.lookup(f); ok {
					if v, ok := number(o[f]); ok && v > float64(b.Largest) {
						t.Errorf("%s: %s is %v, more than the %d the bound cites (%s)", p, f, v, b.Largest, b.Seen)
					}
				}
			}
		}
	}
}

// TestConfigErrorsQuoteNothing: a config.json that is not JSON (the start of a password
// file) is refused without its bytes: the JSON decoder's own message would quote the
// character where the syntax breaks.
func TestConfigErrorsQuoteNothing(t *testing.T) {
	for _, c := range []struct {
		config  string
		want    string
		secrets []string
	}{
		{"root:$6$Zx9bQw1e$Kq8s0mVt3L:19000:0:99999:7:::\n", "not valid JSON (at byte 1)", []string{"'r'", "root", "Zx9b"}},
		{`{"num_hidden_layers": 4, "k": s3cret}`, "not valid JSON (at byte 31)", []string{"'s'", "s3cret"}},
		{`["s3cret"]`, "not a JSON object", []string{"s3cret"}},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(c.config), 0o644)
		_, err := LoadConfig(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.config, err, c.want)
			continue
		}
		for _, s := range c.secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%q quotes %q", err, s)
			}
		}
	}
}

// TestConfigNamesPrintable: the names config.json gives, which the text output prints
// as they are, reach it without control characters and cut short.
func TestConfigNamesPrintable(t *testing.T) {
	raw, _ := json.Marshal("\x1b]0;owned\x07\x1b[2J" + strings.Repeat("A", 1000))
	evil := string(raw)
	m, err := ParseConfig([]byte(fmt.Sprintf(`{"architectures": [%s], "model_type": %s, "torch_dtype": %s, "num_hidden_layers": 2, "num_attention_heads": 2, "head_dim": 64,
		"quantization_config": {"quant_method": %s}}`, evil, evil, evil, evil)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{m.Architecture, m.ModelType, m.DType, m.Quant.Scheme, m.Quant.Label()} {
		if strings.ContainsAny(s, "\x1b\x07") || len(s) > 120 {
			t.Errorf("%q", s)
		}
	}
}

// FuzzConfig feeds the config reader any JSON: it returns a model within the bounds, or
// an error, never a panic or an allocation a field asked for. The seeds are the kept
// public configs and each field at its bound, one past it, and past int64.
func FuzzConfig(f *testing.F) {
	dirs, _ := filepath.Glob(models + "*/config.json")
	for _, p := range dirs {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, b := range Bounds {
		for _, v := range []string{strconv.FormatInt(b.Max, 10), strconv.FormatInt(b.Max+1, 10), "4e18", "-9.3e18", "1e400"} {
			f.Add(configWith(b.Fields[0], v, false))
		}
	}
	f.Add([]byte(`{"num_hidden_layers": 2048, "num_attention_heads": 4096, "num_key_value_heads": 2048, "head_dim": 8192, "sliding_window": 268435456, "max_window_layers": 0, "use_sliding_window": true}`))
	f.Add([]byte(`{"num_hidden_layers": 2048, "full_attention_interval": 2048, "linear_num_key_heads": 256, "linear_num_value_heads": 1024, "linear_key_head_dim": 2048, "linear_value_head_dim": 2048, "linear_conv_kernel_dim": 64}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseConfig(data)
		if err != nil {
			if len(err.Error()) > 2048 {
				t.Fatalf("a message of %d bytes", len(err.Error()))
			}
			return
		}
		if m.Layers < 1 || m.Layers > MaxLayers || len(m.Kinds) != m.Layers {
			t.Fatalf("%d layers, %d kinds", m.Layers, len(m.Kinds))
		}
		for _, v := range []struct {
			field string
			n     int
		}{
			{"hidden_size", m.Hidden}, {"num_attention_heads", m.Heads}, {"num_key_value_heads", m.KVHeads}, {"head_dim", m.HeadDim},
			{"sliding_window", m.SlidingWindow}, {"num_experts", m.Experts}, {"max_position_embeddings", m.MaxContext},
		} {
			b, _ := boundOf(v.field)
			// head_dim may be hidden_size / num_attention_heads: within hidden_size's bound.
			if v.n < 0 || int64(v.n) > max(b.Max, 1<<18) {
				t.Fatalf("%s %d past its bound %d", v.field, v.n, b.Max)
			}
		}
	})
}

// boundOf returns the bound of field, by any of its names.
func boundOf(field string) (Bound, bool) {
	for _, b := range Bounds {
		for _, f := range b.Fields {
			if f == field {
				return b, true
			}
		}
	}
	return Bound{}, false
}
