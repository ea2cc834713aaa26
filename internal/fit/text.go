package fit

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpusplit/gpusplit/internal/hfmodel"
	"github.com/gpusplit/gpusplit/internal/table"
)

// WriteText prints the report for a person: the model, then each set of GPUs with its
// placements, in tables at most width columns wide (table.Wide: every column).
func (d *Report) WriteText(w io.Writer, width int) error {
	m := d.Model
	fmt.Fprintf(w, "%s: %s (%s), %s: %s", m.Name, orDash(m.Architecture), orDash(m.ModelType), m.Attention, layersText(m))
	if m.Experts > 0 {
		fmt.Fprintf(w, "; %d experts, %d per token", m.Experts, m.ExpertsPerToken)
	}
	fmt.Fprintln(w)
	if m.WeightsSource == hfmodel.WeightsEstimate {
		fmt.Fprintf(w, "  weights: %s (%s), estimated from config.json (no safetensors files; %s on the checkpoints measured, docs/fit.md); quantization %s\n", hfmodel.GB(m.WeightBytes), GiBText(m.WeightBytes), hfmodel.ErrorText(m.WeightsError), m.Quantization)
	} else {
		fmt.Fprintf(w, "  weights: %s (%s), exact, from the headers of %d safetensors shards; quantization %s\n", hfmodel.GB(m.WeightBytes), GiBText(m.WeightBytes), m.Shards, m.Quantization)
	}
	if m.KVBytesPerToken > 0 {
		fmt.Fprintf(w, "  KV cache: %s (%s), %s bytes per token at TP 1 (%s)", d.KVDType, d.KVDTypeFrom, Thousands(m.KVBytesPerToken), m.KVBytesPerTokenFrom)
		if m.StateBytesPerSeq > 0 {
			fmt.Fprintf(w, ", plus %s of linear-attention state per sequence", mibText(m.StateBytesPerSeq))
		}
		fmt.Fprintln(w)
	}
	for _, n := range m.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintf(w, "serving: %s, %s of %s tokens", d.Engine, sequencesText(int64(d.Concurrency)), Thousands(int64(d.Context)))
	if d.ServingFrom != "" {
		fmt.Fprintf(w, " (%s)", d.ServingFrom)
	}
	if f := firstFraction(d); f != "" {
		fmt.Fprintf(w, "; %s", f)
	}
	fmt.Fprintln(w)
	for _, n := range d.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, s := range d.Sets {
		fmt.Fprintf(w, "\n%s: %s\n", s.Label, gpusText(s.GPUs))
		fmt.Fprintf(w, "  GPUs from %s\n", s.From)
		if len(s.GPUs) == 0 {
			continue
		}
		p2p := "available"
		if !s.P2P {
			p2p = "unavailable"
		}
		fmt.Fprintf(w, "  peer-to-peer: %s (%s)\n\n", p2p, s.P2PWhy)
		// KV TOKENS and RESERVE/GPU go first: SEQUENCES and the verdict say what they
		// add up to.
		t := table.New(
			table.Column{Header: "PLACEMENT"},
			table.Column{Header: "GPUS"},
			table.Column{Header: "REPLICAS"},
			table.Column{Header: "WEIGHTS/GPU"},
			table.Column{Header: "RESERVE/GPU", Drop: 2},
			table.Column{Header: "KV/GPU"},
			table.Column{Header: "KV TOKENS", Drop: 1},
			table.Column{Header: "SEQUENCES"},
			table.Column{Header: "VERDICT"},
		)
		t.Indent = "  "
		for _, p := range s.Placements {
			kvText, tok, seq := "-", "-", "-"
			if p.KVBytesPerGPU > 0 {
				kvText, tok, seq = GiBText(p.KVBytesPerGPU), Thousands(p.KVTokens), Thousands(p.Sequences)
			}
			v := p.Verdict
			if p.Recommended {
				v += " (recommended)"
			}
			weights := GiBText(p.WeightBytesPerGPU)
			if m.WeightsSource == hfmodel.WeightsEstimate {
				weights = "~" + weights // an estimate, as the weights line says
			}
			t.Add(p.Name, fmt.Sprint(p.GPUsPerReplica), fmt.Sprint(p.Replicas), weights, GiBText(p.ReserveBytesPerGPU), kvText, tok, seq, v)
		}
		if err := t.Write(w, width); err != nil {
			return err
		}
		fmt.Fprintln(w)
		for _, p := range s.Placements {
			fmt.Fprintf(w, "  %s: %s: %s\n", p.Name, p.Verdict, p.Why)
			for _, n := range p.Notes {
				fmt.Fprintf(w, "    %s\n", n)
			}
		}
		if s.Recommended != "" {
			fmt.Fprintf(w, "  recommended: %s: %s\n", s.Recommended, s.Why)
		} else {
			fmt.Fprintf(w, "  recommended: none: %s\n", s.Why)
		}
		for _, x := range s.Impossible {
			fmt.Fprintf(w, "  not possible: %s\n", x)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	return nil
}

// firstFraction words the engine's share of the GPU, as the first placement worked it
// out (SGLang's changes with the placement; the table's RESERVE column has each).
func firstFraction(d *Report) string {
	for _, s := range d.Sets {
		for _, p := range s.Placements {
			st := p.Stages[0]
			if d.Engine == string(SGLang) && st.FractionFrom != "--memory-fraction" {
				return "mem_fraction_static from SGLang's formula, per placement"
			}
			return fmt.Sprintf("%.3g of each GPU for weights and KV cache (%s)", st.MemoryFraction, st.FractionFrom)
		}
	}
	return ""
}

func layersText(m ModelReport) string {
	var parts []string
	if m.FullLayers > 0 {
		parts = append(parts, fmt.Sprintf("%d full", m.FullLayers))
	}
	if m.SlidingLayers > 0 {
		parts = append(parts, fmt.Sprintf("%d sliding (window %s)", m.SlidingLayers, Thousands(int64(m.SlidingWindow))))
	}
	if m.LinearLayers > 0 {
		parts = append(parts, fmt.Sprintf("%d linear", m.LinearLayers))
	}
	s := fmt.Sprintf("%d layers (%s)", m.Layers, strings.Join(parts, ", "))
	switch {
	case m.KVLoraRank > 0:
		s += fmt.Sprintf(", a latent of %d + %d per token", m.KVLoraRank, m.RopeDim)
	case m.KVHeads > 0:
		s += fmt.Sprintf(", %d KV heads of %d", m.KVHeads, m.HeadDim)
	}
	return s
}

// gpusText words a set: "8 × RTX PRO 6000 … (97,887 MiB each); NUMA 0: 4, NUMA 1: 4".
func gpusText(gpus []GPUReport) string {
	if len(gpus) == 0 {
		return "no GPUs"
	}
	names := map[string]int{}
	var order []string
	nodes := map[string]int{}
	var nodeOrder []string
	for _, g := range gpus {
		key := fmt.Sprintf("%s (%s)", g.Name, MiBText(g.Memory))
		if names[key] == 0 {
			order = append(order, key)
		}
		names[key]++
		node := "NUMA ?"
		if g.NUMANode != nil {
			node = fmt.Sprintf("NUMA %d", *g.NUMANode)
		}
		if nodes[node] == 0 {
			nodeOrder = append(nodeOrder, node)
		}
		nodes[node]++
	}
	var parts, byNode []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d × %s", names[k], k))
	}
	for _, n := range nodeOrder {
		byNode = append(byNode, fmt.Sprintf("%s: %d", n, nodes[n]))
	}
	return strings.Join(parts, ", ") + "; " + strings.Join(byNode, ", ")
}

func sequencesText(n int64) string {
	if n == 1 {
		return "1 sequence"
	}
	return Thousands(n) + " sequences"
}

func mibText(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/float64(MiB)) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
