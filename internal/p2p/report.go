package p2p

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
)

// Pair returns the pair from the i-th GPU to the j-th, nil when the run stopped before it.
func (r *Report) Pair(i, j int) *Pair {
	for k := range r.Pairs {
		if p := &r.Pairs[k]; p.src == i && p.dst == j {
			return p
		}
	}
	return nil
}

// WriteText writes the report as p2pBandwidthLatencyTest lays out its matrices (source
// GPU in rows, destination in columns), then the pairs that are not ok and what follows
// for NCCL.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "GPUs")
	for i, g := range r.GPUs {
		fmt.Fprintf(w, "  GPU%d  %s  %s  sm %d  %s\n", i, g.Address, g.Name, g.SM, Size(g.Memory))
	}
	n := len(r.GPUs)
	matrix := func(title string, cell func(p *Pair) string) {
		fmt.Fprintf(w, "\n%s\n", title)
		tw.Flush()
		fmt.Fprint(tw, "D\\D\t")
		for j := range n {
			fmt.Fprintf(tw, "GPU%d\t", j)
		}
		fmt.Fprintln(tw)
		for i := range n {
			fmt.Fprintf(tw, "GPU%d\t", i)
			for j := range n {
				v := "-"
				if p := r.Pair(i, j); p != nil {
					v = cell(p)
				}
				fmt.Fprintf(tw, "%s\t", v)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	num := func(f float64, format string) string {
		if f == 0 {
			return "-"
		}
		return fmt.Sprintf(format, f)
	}
	matrix("Topology", func(p *Pair) string { return cmp.Or(p.Relation, "?") })
	matrix("Peer access (cuDeviceCanAccessPeer)", func(p *Pair) string {
		if p.src == p.dst {
			return "X"
		}
		return map[bool]string{true: "1", false: "0"}[p.PeerAccess]
	})
	matrix("Integrity", func(p *Pair) string { return cmp.Or(p.Verdict, "?") })
	measured := slices.ContainsFunc(r.Pairs, func(p Pair) bool { return p.Uni.Disabled > 0 })
	if measured {
		for _, f := range []struct {
			title string
			get   func(p *Pair) *Figures
		}{
			{"Unidirectional bandwidth, P2P %s (GB/s)", func(p *Pair) *Figures { return &p.Uni }},
			{"Bidirectional bandwidth, P2P %s (GB/s)", func(p *Pair) *Figures { return &p.Bi }},
			{"Latency, P2P %s, GPU (us)", func(p *Pair) *Figures { return &p.Latency }},
			{"Latency, P2P %s, CPU (us)", func(p *Pair) *Figures { return &p.HostLatency }},
		} {
			matrix(fmt.Sprintf(f.title, "disabled"), func(p *Pair) string { return num(f.get(p).Disabled, "%.2f") })
			matrix(fmt.Sprintf(f.title, "enabled"), func(p *Pair) string { return num(f.get(p).Enabled, "%.2f") })
		}
		fmt.Fprintln(w, "\nHost <-> GPU bandwidth (GB/s)")
		fmt.Fprint(tw, "\thost->GPU\tGPU->host\t\n")
		for i, h := range r.Host {
			fmt.Fprintf(tw, "GPU%d\t%.2f\t%.2f\t\n", i, h.HostToGPU, h.GPUToHost)
		}
		tw.Flush()
		if r.Method != nil {
			fmt.Fprintln(w, "\nHow")
			for _, l := range r.Method.legend() {
				fmt.Fprintf(w, "  %s\n", l)
			}
		}
	}
	fmt.Fprintln(w, "\nPairs")
	shown := 0
	for _, p := range r.Pairs {
		if p.Verdict == OK || p.Verdict == "" {
			continue
		}
		shown++
		fmt.Fprintf(w, "  GPU%d -> GPU%d (%s, %s): %s: %s\n", p.src, p.dst, cmp.Or(p.Relation, "?"), p.Src+" -> "+p.Dst, p.Verdict, p.Why)
	}
	if shown == 0 {
		fmt.Fprintf(w, "  all %d pairs ok\n", len(r.Pairs))
	}
	fmt.Fprintln(w, "\nNCCL")
	for _, k := range slices.Sorted(maps.Keys(r.Summary.Environment)) {
		fmt.Fprintf(w, "  export %s=%s\n", k, r.Summary.Environment[k])
	}
	for _, a := range r.Summary.Advice {
		fmt.Fprintf(w, "  %s\n", a)
	}
	return nil
}
