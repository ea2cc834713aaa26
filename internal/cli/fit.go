package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/doctor"
	"github.com/gpusplit/gpusplit/internal/fit"
	"github.com/gpusplit/gpusplit/internal/hfmodel"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/p2p"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/split"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// fitFlags are fit's serving conditions.
type fitFlags struct {
	model         string
	ct, vm        int
	config        string
	engine        string
	fraction      float64
	kvDType       string
	kvPerToken    int64
	context       int
	concurrency   int
	gpuMemory     string
	noP2P         bool
	contextSet    bool
	concurrentSet bool
}

func newFit(g *globals) *cobra.Command {
	var f fitFlags
	cmd := &cobra.Command{
		Use:   "fit",
		Short: "Will a model fit on a guest's GPUs, and how to place it (TP × PP), before and after the split",
		Long: `Work out whether a model fits on a set of GPUs, and how to place it.

The model is a Hugging Face model directory (--model): config.json gives its layers,
attention (GQA, MLA, sliding-window and linear-attention layers) and experts; the
safetensors headers give the exact bytes of every tensor, whatever the quantisation. No
tensor is read. Without safetensors files the weights are estimated from config.json's
architecture, marked ~ in the table and "estimate" in the JSON, with the estimate's
error (docs/fit.md). The GPUs are this host's (--devices narrows them), a container's
(--ct, the GPUs its config passes through) or a VM's (--vm, those qemu-server will give
it); for a guest, the GPUs it keeps after the split of the desired state file
(` + plan.DefaultConfig + `, or --config) are worked out too. Each GPU's memory comes from
a table of known GPUs by PCI id, or --gpu-memory.

For each placement the GPUs allow (TP 1, 2, 4, 8; TP × PP with each TP group inside a
NUMA node; the rest as replicas) it gives the weights per GPU, what the engine keeps
(--engine vllm: gpu_memory_utilization 0.92 and 2 GiB of context and activations;
sglang: its mem_fraction_static formula), the KV cache left, the tokens it holds at
--kv-dtype and the sequences of --context it serves at once; a verdict against
--concurrency sequences: does not fit when it holds fewer (or no KV cache is left),
tight when it holds them with less than 10% of the KV cache to spare, fits otherwise;
and the placement to use: the fewest GPUs per replica that fit, TP groups inside a NUMA node, and without
peer-to-peer between the GPUs the fewest collectives across nodes.

--context and --concurrency default to the context and concurrency the guest's group
of the desired state gives, else the model's max_position_embeddings and 1.
docs/fit.md has the formulas and their sources.`,
		Example: `  gpusplit --demo fit --model testdata/models/qwen3.5-397b-a17b-nvfp4-like --ct 129
  gpusplit fit --model /tank/models/Llama-3.1-70B-Instruct --vm 131 --context 32768 --concurrency 8
  gpusplit fit --model ./DeepSeek-V3 --devices numa:0 --engine sglang --kv-dtype fp8 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.contextSet = cmd.Flags().Changed("context")
			f.concurrentSet = cmd.Flags().Changed("concurrency")
			doc, err := runFit(g, &f)
			if err != nil {
				return err
			}
			if g.json() {
				return g.writeJSON(doc)
			}
			return doc.WriteText(g.stdout, g.width())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "the model's directory: config.json, and the safetensors files if there (only their headers are read; without them the weights are estimated)")
	fl.IntVar(&f.ct, "ct", 0, "the Proxmox container whose GPUs to fit the model on: now, and after the split")
	fl.IntVar(&f.vm, "vm", 0, "the Proxmox VM whose GPUs to fit the model on: now, and after the split")
	fl.StringVar(&f.config, "config", "", "the desired state file the split comes from (default "+plan.DefaultConfig+" of the host)")
	fl.StringVar(&f.engine, "engine", "vllm", "the inference server: vllm or sglang, which keep different shares of the GPU")
	fl.Float64Var(&f.fraction, "memory-fraction", 0, "the engine's share of GPU memory for weights and KV cache (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static; default: the engine's)")
	fl.StringVar(&f.kvDType, "kv-dtype", "auto", "the KV cache's dtype: auto (the model's), bf16, fp16, fp8, fp8_e4m3, fp8_e5m2")
	fl.Int64Var(&f.kvPerToken, "kv-bytes-per-token", 0, "the model's KV cache bytes per token (all layers, TP 1), for an architecture gpusplit cannot size")
	fl.IntVar(&f.context, "context", 0, "the tokens of one sequence (default: the guest's group in the desired state, else the model's max_position_embeddings)")
	fl.IntVar(&f.concurrency, "concurrency", 0, "the sequences served at once (default: the guest's group in the desired state, else 1)")
	fl.StringVar(&f.gpuMemory, "gpu-memory", "", "the memory of each GPU, with its unit (97887MiB, 96GB), for GPUs the table does not know or to override it")
	fl.BoolVar(&f.noP2P, "no-p2p", false, "peer copies between the GPUs do not work (rank placements by fewest cross-node collectives); by default the doctor's checks, and for a VM its gpudirect cliques, decide")
	return cmd
}

func runFit(g *globals, f *fitFlags) (*fit.Report, error) {
	switch {
	case f.model == "":
		return nil, errors.New("--model names the model's directory (config.json, and its safetensors files if there)")
	case f.ct != 0 && f.vm != 0:
		return nil, errors.New("--ct and --vm each name the guest to fit the model on; use one of them")
	case f.fraction < 0 || f.fraction >= 1:
		return nil, fmt.Errorf("--memory-fraction %g: a share of the GPU's memory, above 0 and below 1", f.fraction)
	case f.kvPerToken < 0 || f.context < 0 || f.concurrency < 0:
		return nil, errors.New("--kv-bytes-per-token, --context and --concurrency are positive")
	}
	engine, err := fit.ParseEngine(f.engine)
	if err != nil {
		return nil, fmt.Errorf("--engine %w", err)
	}
	var memOverride int64
	if f.gpuMemory != "" {
		if memOverride, err = fit.ParseSize(f.gpuMemory); err != nil {
			return nil, fmt.Errorf("--gpu-memory: %w", err)
		}
	}
	m, err := hfmodel.Load(f.model)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	kv, err := fit.ParseKVDType(f.kvDType, m)
	if err != nil {
		return nil, fmt.Errorf("--kv-dtype %w", err)
	}
	h, err := g.host()
	if err != nil {
		return nil, err
	}
	var guest *fit.Guest
	switch {
	case f.ct != 0:
		guest = &fit.Guest{Kind: fit.Container, ID: f.ct}
	case f.vm != 0:
		guest = &fit.Guest{Kind: fit.VM, ID: f.vm}
	}
	var desired *fit.Split
	if guest != nil || f.config != "" {
		if desired, err = split.FitSplit(h, f.config, g.demo); err != nil {
			return nil, desiredErr(err)
		}
	}
	devices := g.devices
	if devices == "" && desired != nil {
		devices = desired.File.Devices
	}
	sels, err := parseSelectors(h, devices)
	if err != nil {
		return nil, fmt.Errorf("devices: %w", err)
	}
	inv, err := inventory.Build(h, sels)
	if err != nil {
		return nil, err
	}
	g.warn(inv.Warnings)

	doc, err := fit.Run(fit.Request{
		Root: h.Root(), Model: m, Inventory: inv, Engine: engine, KV: kv,
		MemoryFraction: f.fraction, KVBytesPerToken: f.kvPerToken,
		Context: f.context, Concurrency: f.concurrency, ContextSet: f.contextSet, ConcurrencySet: f.concurrentSet,
		GPUMemory: memOverride, NoP2P: f.noP2P, Guest: guest, Split: desired,
		P2PChecks: doctor.P2PChecks,
		P2PAgainst: func() ([]string, error) {
			_, reasons, err := doctor.P2PAdvice(h, inv, doctor.P2PChecks...)
			var titles []string
			for _, r := range reasons {
				titles = append(titles, r.Title)
			}
			return titles, err
		},
		Now:      func(guest fit.Guest) (fit.GuestNow, error) { return vmlayout.GuestNow(h, inv, guest) },
		Measured: measuredMemory,
	})
	var modelErr *fit.ModelError
	var kvErr *fit.KVBytesError
	switch {
	case errors.As(err, &modelErr):
		return nil, fmt.Errorf("--model: %w", modelErr.Err)
	case errors.Is(err, fit.ErrNoContext):
		return nil, fmt.Errorf("%w: give --context", err)
	case errors.As(err, &kvErr):
		return nil, fmt.Errorf("--kv-bytes-per-token %d is more than the %d (1 GiB) gpusplit accepts: BLOOM-176B's multi-head attention takes 4,014,080", kvErr.Bytes, fit.MaxKVBytesPerToken)
	case err != nil:
		return nil, fitAdvice(err)
	}
	return doc, nil
}

// fitAdvice adds to an error of fit's the flag that gets past it.
func fitAdvice(err error) error {
	var unknown *fit.UnknownGPUError
	var seq *fit.SequenceError
	switch {
	case errors.As(err, &seq):
		return fmt.Errorf("%w; give a shorter --context", err)
	case errors.Is(err, fit.ErrUnsized):
		return fmt.Errorf("%w; give --kv-bytes-per-token (the model's KV cache per token, all layers, at TP 1) to size it anyway", err)
	case errors.As(err, &unknown):
		return fmt.Errorf("%w: give its memory with --gpu-memory (nvidia-smi --query-gpu=memory.total shows it)", err)
	}
	return err
}

// measuredMemory is each GPU's memory as the CUDA driver reports it, by address, where
// this is the CUDA build and a driver runs: the GPUs on nvidia. Elsewhere (the static
// build, no driver, GPUs on vfio-pci) it is empty and the table of GPUs serves.
var measuredMemory = func() map[pci.Address]int64 {
	d, err := openCUDA()
	if err != nil {
		return map[pci.Address]int64{}
	}
	defer d.Close()
	return p2p.Memory(d)
}
