package fit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/hfmodel"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// TestVerdictTableAndJSON holds the table and the JSON to one verdict per placement,
// over a range of serving conditions on the sample host (both engines, concurrencies
// from 1 to 64, contexts from 8,192 to 262,144 tokens, FP8 and BF16 caches): the
// table's VERDICT column, its "NAME: verdict: why" line and the JSON's verdict agree,
// and each is Judge's verdict of a headroom the test works out again from the JSON's
// own stage figures (kv_bytes, bytes_per_sequence) and the sequences asked for.
func TestVerdictTableAndJSON(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := hfmodel.Load("../../testdata/models/qwen3.5-397b-a17b-nvfp4-like")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, engine := range []Engine{VLLM, SGLang} {
		for _, kvName := range []string{"auto", "fp8"} {
			for _, ctx := range []int{8192, 131072, 262144} {
				for _, conc := range []int{1, 8, 15, 16, 17, 28, 30, 31, 64} {
					kv, err := ParseKVDType(kvName, m)
					if err != nil {
						t.Fatal(err)
					}
					rep, err := Run(Request{
						Root: "/", Model: m, Inventory: inv, Engine: engine, KV: kv,
						Context: ctx, Concurrency: conc, ContextSet: true, ConcurrencySet: true,
						P2PChecks: []string{"p2p-topology"}, P2PAgainst: func() ([]string, error) { return nil, nil },
						Measured: func() map[pci.Address]int64 { return nil },
					})
					if err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("%s %s %d×%d", engine, kvName, conc, ctx)
					for _, v := range checkVerdicts(t, name, rep) {
						seen[v]++
					}
				}
			}
		}
	}
	// The range must reach every verdict, or the test proves less than it says.
	for _, v := range []Verdict{Fits, Tight, DoesNotFit} {
		if seen[string(v)] == 0 {
			t.Errorf("no placement was judged %q over the range: %v", v, seen)
		}
	}
}

// tableRow is a row of a placement table: its name first, its verdict last, columns
// two spaces or more apart.
var tableRow = regexp.MustCompile(`^  (TP\S+)\s{2,}.*\s{2,}(fits|tight|does not fit)( \(recommended\))?$`)

// checkVerdicts compares one report's text and JSON and returns the verdicts it saw.
func checkVerdicts(t *testing.T, name string, rep *Report) []string {
	t.Helper()
	var text bytes.Buffer
	if err := rep.WriteText(&text, 1000); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Concurrency int `json:"concurrency"`
		Sets        []struct {
			Placements []struct {
				Name       string  `json:"name"`
				Replicas   int     `json:"replicas"`
				Verdict    string  `json:"verdict"`
				Why        string  `json:"why"`
				KVHeadroom float64 `json:"kv_headroom"`
				Stages     []struct {
					KV          int64 `json:"kv_bytes"`
					PerSequence int64 `json:"bytes_per_sequence"`
				} `json:"stages"`
			} `json:"placements"`
		} `json:"sets"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	table := map[string]string{}
	for _, line := range strings.Split(text.String(), "\n") {
		if m := tableRow.FindStringSubmatch(line); m != nil {
			table[m[1]] = m[2]
		}
	}
	var seen []string
	for _, s := range doc.Sets {
		if len(s.Placements) != len(table) {
			t.Errorf("%s: %d placements in the JSON, %d rows in the table", name, len(s.Placements), len(table))
		}
		for _, p := range s.Placements {
			ok := true
			headroom := 1e308
			for _, st := range p.Stages {
				if st.KV <= 0 {
					ok = false
					continue
				}
				headroom = min(headroom, Headroom(st.KV, st.PerSequence, doc.Concurrency, p.Replicas))
			}
			rule := string(Judge(ok, headroom))
			if p.Verdict != rule {
				t.Errorf("%s %s: the JSON says %q, the rule %q (headroom %g)", name, p.Name, p.Verdict, rule, headroom)
			}
			if ok && p.KVHeadroom != headroom {
				t.Errorf("%s %s: kv_headroom %g, from the stages %g", name, p.Name, p.KVHeadroom, headroom)
			}
			if got := table[p.Name]; got != p.Verdict {
				t.Errorf("%s %s: the table says %q, the JSON %q", name, p.Name, got, p.Verdict)
			}
			if line := fmt.Sprintf("  %s: %s: %s\n", p.Name, p.Verdict, p.Why); !strings.Contains(text.String(), line) {
				t.Errorf("%s: no %q in the text", name, line)
			}
			seen = append(seen, p.Verdict)
		}
	}
	return seen
}
