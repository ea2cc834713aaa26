package p2p

import "fmt"

// Method is how a run's figures were taken, carried in the report so that its numbers
// can be set beside another tool's (p2pBandwidthLatencyTest, nvbandwidth) without
// guessing what each counts.
type Method struct {
	GB            int64  `json:"gb_bytes"` // GB/s is this many bytes a second: 10^9
	BandwidthUnit string `json:"bandwidth_unit"`
	LatencyUnit   string `json:"latency_unit"`
	// Every figure is the Statistic of Runs timed runs, after WarmupRuns untimed ones.
	Statistic  string `json:"statistic"`
	Runs       int    `json:"runs"`
	WarmupRuns int    `json:"warmup_runs"`
	// A bandwidth run copies BandwidthBytes BandwidthRepeat times, a latency run
	// LatencyBytes LatencyRepeat times.
	BandwidthBytes  int64 `json:"bandwidth_copy_bytes"`
	BandwidthRepeat int   `json:"bandwidth_copies_per_run"`
	LatencyBytes    int64 `json:"latency_copy_bytes"`
	LatencyRepeat   int   `json:"latency_copies_per_run"`
	// WithinGPUFactor is how many times a byte copied within a GPU counts: 2, read and
	// written, as p2pBandwidthLatencyTest counts it (nvbandwidth's device_local_copy
	// counts 1).
	WithinGPUFactor int `json:"within_gpu_bytes_factor"`
	// The conventions in words.
	Bidirectional string `json:"bidirectional"`
	WithinGPU     string `json:"within_gpu"`
	Latency       string `json:"latency"`
	HostLatency   string `json:"host_latency"`
	Disabled      string `json:"p2p_disabled"`
	Enabled       string `json:"p2p_enabled"`
}

func method(opt Options) *Method {
	return &Method{
		GB: 1e9, BandwidthUnit: UnitGBps, LatencyUnit: UnitUs,
		Statistic: "median", Runs: opt.Runs, WarmupRuns: 1,
		BandwidthBytes: opt.BandwidthSize, BandwidthRepeat: opt.Repeat,
		LatencyBytes: opt.LatencySize, LatencyRepeat: opt.LatencyRepeat,
		WithinGPUFactor: 2,
		Bidirectional:   "both directions at once, each on a stream of its own: the sum of the two",
		WithinGPU:       "a GPU with itself (the diagonal): bytes read plus bytes written, twice the bytes copied; in both the P2P disabled and enabled figures",
		Latency: fmt.Sprintf("GPU time of one %d-byte copy: a run of %d queued while the stream is held back, then timed by the GPU's events, over %d",
			opt.LatencySize, opt.LatencyRepeat, opt.LatencyRepeat),
		HostLatency: "host time to queue one of those copies: the calls of a run over their number",
		Disabled:    "cuMemcpyPeer(Async) between contexts without peer access: the driver stages the bytes through host memory",
		Enabled:     "the same copies with peer access enabled both ways: the GPUs move the bytes themselves",
	}
}

// legend is the Method in lines for the text report.
func (m *Method) legend() []string {
	return []string{
		fmt.Sprintf("GB = 10^9 bytes; each figure the %s of %d runs after %d untimed; bandwidth runs copy %s %d times",
			m.Statistic, m.Runs, m.WarmupRuns, Size(m.BandwidthBytes), m.BandwidthRepeat),
		"bidirectional: " + m.Bidirectional,
		"within a GPU: " + m.WithinGPU,
		"GPU latency: " + m.Latency,
		"CPU latency: " + m.HostLatency,
		"P2P disabled: " + m.Disabled,
		"P2P enabled: " + m.Enabled,
		"-: not measured (no peer access between the two)",
	}
}
