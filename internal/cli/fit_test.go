package cli

import (
	"encoding/json"
	"github.com/gpusplit/gpusplit/internal/p2p"
	"github.com/gpusplit/gpusplit/internal/testutils/p2ptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/docs"
	"github.com/gpusplit/gpusplit/internal/fit"
	"github.com/gpusplit/gpusplit/internal/hfmodel"
	"github.com/gpusplit/gpusplit/internal/safetensors"
)

const referenceModel = "../../testdata/models/qwen3.5-397b-a17b-nvfp4-like"

// referenceFigures works out, by hand, the reference model's figures per GPU for a
// single-stage placement of tp ranks on RTX PRO 6000s under vLLM: its weights (the
// layers' matrices and experts and the embeddings split tp ways, norms and routers
// whole), the KV cache left, and the sequences of 262,144 tokens it holds.
func referenceFigures(tp int64) (weights, kv, sequences int64) {
	const h, mem = 4096, 97887 << 20
	nvfp4 := func(out, in int64) int64 { return out*in/2 + out*in/16 + 8 }
	experts := 512 * (nvfp4(2*1024, h) + nvfp4(h, 1024))
	shared := int64(2 * 3 * 1024 * h)
	qkv, v := int64(2*16*128+64*128), int64(64*128)
	full := int64(2*(2*32*256*h+2*2*256*h+32*256*h)) + experts + shared
	linear := 2*(qkv*h+v*h+2*64*h+h*v+qkv*4) + experts + shared
	vision := int64(2*(1152*3*2*16*16+1152+2304*1152) +
		27*2*(4*1152+3*1152*1152+3*1152+1152*1152+1152+4304*1152+4304+1152*4304+1152) +
		2*(2*1152+4608*4608+4608+4096*4608+4096))
	split := 15*full + 45*linear + 2*(2*248320*h) + vision
	whole := int64(15*(2*2*h+2*(512*h+h)+2*2*256) + 45*(2*2*h+2*(512*h+h)+64*4+64*2+128*2) + 2*h)
	weights = (split+tp-1)/tp + whole
	utilization := 0.92
	reserve := mem - int64(utilization*float64(mem)) + 2<<30
	kv = mem - weights - reserve
	perToken := 15 * 2 * max(1, 2/tp) * 256 * 2
	state := 45 * (qkv/tp*3*2 + 64/tp*128*128*4)
	return weights, kv, kv / (perToken*262144 + state)
}

// TestFitReferenceCase is the "done when": on the sample host, the reference
// model on container 129 gives, before the split (8 GPUs) and after it (the 4 of node 0
// that docs/split.toml leaves it), the placements with their KV cache and verdict, at
// the 16 sequences of 262,144 tokens the split gives the container; the figures are
// the hand calculation's.
func TestFitReferenceCase(t *testing.T) {
	out := mustRun(t, "--demo", "fit", "--model", referenceModel, "--ct", "129")
	for _, want := range []string{
		"weights: 237.9 GB (221.6 GiB), exact, from the headers of 62 safetensors shards; quantization NVFP4",
		`serving: vllm, 16 sequences of 262,144 tokens (group "inference" of docs/split.toml)`,
		"container 129 now: 8 × RTX PRO 6000 Blackwell Workstation Edition (97,887 MiB); NUMA 0: 4, NUMA 1: 4",
		"container 129 after the split: 4 × RTX PRO 6000 Blackwell Workstation Edition (97,887 MiB); NUMA 0: 4",
		"recommended: TP2×PP2: the fewest GPUs per replica that fit (4, 2 replicas)",
		"TP4: does not fit: holds 8 of the 16 sequences of 262,144 tokens asked",
		"recommended: none: no placement holds the 16 sequences of 262,144 tokens asked; the most is 15, at TP2×PP2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	var doc fit.Report
	if err := json.Unmarshal([]byte(mustRun(t, "--demo", "fit", "--model", referenceModel, "--ct", "129", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Sets) != 2 || doc.Context != 262144 || doc.Concurrency != 16 || doc.Model.WeightBytes != 237_943_824_992 {
		t.Fatalf("%d sets, %d × %d, %d bytes", len(doc.Sets), doc.Concurrency, doc.Context, doc.Model.WeightBytes)
	}
	byName := func(s fit.SetReport, name string) fit.PlacementReport {
		for _, p := range s.Placements {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("%s: no %s", s.Label, name)
		return fit.PlacementReport{}
	}
	for _, c := range []struct {
		set      int
		tp       int64
		replicas int64
		verdict  string
	}{{0, 4, 2, "tight"}, {0, 8, 1, "does not fit"}, {1, 4, 1, "does not fit"}} {
		weights, kv, seqs := referenceFigures(c.tp)
		p := byName(doc.Sets[c.set], map[int64]string{4: "TP4", 8: "TP8"}[c.tp])
		if p.WeightBytesPerGPU != weights || p.KVBytesPerGPU != kv || p.Sequences != seqs*c.replicas || p.Verdict != c.verdict {
			t.Errorf("%s %s: weights %d, KV %d, %d sequences, %s; by hand %d, %d, %d, %s", doc.Sets[c.set].Label, p.Name,
				p.WeightBytesPerGPU, p.KVBytesPerGPU, p.Sequences, p.Verdict, weights, kv, seqs*c.replicas, c.verdict)
		}
	}
	// 8 sequences a replica at TP4: 16 on the 8 GPUs (tight: all 16, nothing to spare),
	// 8 of the 16 on the 4 left (does not fit).
	if _, _, seqs := referenceFigures(4); seqs != 8 {
		t.Errorf("TP4 holds %d sequences", seqs)
	}
	if doc.Sets[0].Recommended != "TP2×PP2" || doc.Sets[1].Recommended != "" || byName(doc.Sets[1], "TP2×PP2").Verdict != "does not fit" {
		t.Errorf("recommended %q and %q", doc.Sets[0].Recommended, doc.Sets[1].Recommended)
	}
	if doc.Sets[0].Container == nil || *doc.Sets[0].Container != 129 || doc.Sets[0].VM != nil {
		t.Errorf("guest %v %v", doc.Sets[0].Container, doc.Sets[0].VM)
	}
}

// TestFitConfigOnly: a model directory with config.json alone is fitted, its weights
// estimated from the architecture and marked so in the table (~) and the JSON
// (weights_source, weights_error); the headers' figures say "safetensors" and 0. A
// directory with neither config.json nor safetensors is refused with what to give, in
// at most two lines.
func TestFitConfigOnly(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../../testdata/models/llama-3.1-70b-instruct/config.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644)
	out := mustRun(t, "--demo", "fit", "--model", dir, "--context", "32768", "--concurrency", "8")
	for _, want := range []string{
		"weights: 141.1 GB (131.4 GiB), estimated from config.json (no safetensors files; " + hfmodel.ErrorText(hfmodel.EstimateError) + " on the checkpoints measured",
		"  TP2        2     4         ~65.7 GiB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	var doc fit.Report
	if err := json.Unmarshal([]byte(mustRun(t, "--demo", "fit", "--model", dir, "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	// The estimate of Llama 3.1 70B is its published 141,107,412,992 bytes.
	if doc.Model.WeightsSource != "estimate" || doc.Model.WeightsError != hfmodel.EstimateError || doc.Model.WeightBytes != 141_107_412_992 {
		t.Errorf("weights %d from %q, error %g", doc.Model.WeightBytes, doc.Model.WeightsSource, doc.Model.WeightsError)
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--demo", "fit", "--model", referenceModel, "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Model.WeightsSource != "safetensors" || doc.Model.WeightsError != 0 {
		t.Errorf("headers: weights from %q, error %g", doc.Model.WeightsSource, doc.Model.WeightsError)
	}
	_, _, err = run(t, "--demo", "fit", "--model", t.TempDir())
	if err == nil || strings.Count(err.Error(), "\n") > 1 || !strings.Contains(err.Error(), "has no config.json: give the Hugging Face model's directory, the one with config.json (safetensors files optional)") {
		t.Errorf("empty directory: %v", err)
	}
}

// TestFitFlags: the command line's serving conditions override the split's, and its
// mistakes are refused with what to do.
func TestFitFlags(t *testing.T) {
	var doc fit.Report
	out := mustRun(t, "--demo", "fit", "--model", referenceModel, "--ct", "129", "--context", "32768", "--concurrency", "4", "--kv-dtype", "fp8", "--engine", "sglang", "--no-p2p", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Context != 32768 || doc.Concurrency != 4 || doc.KVDType != "fp8" || doc.Engine != "sglang" || doc.Sets[0].P2P || doc.Sets[0].P2PWhy != "--no-p2p" {
		t.Errorf("%+v", doc)
	}
	// FP8 halves the cache per token: 15 full layers × 2 × 2 heads × 256 × 1 byte.
	if doc.Model.KVBytesPerToken != 15*2*2*256 {
		t.Errorf("per token %d", doc.Model.KVBytesPerToken)
	}
	// SGLang's fraction for TP4 on this GPU is 0.849 (the reference's example).
	for _, p := range doc.Sets[0].Placements {
		if p.Name == "TP4" && p.MemoryFraction != 0.849 {
			t.Errorf("TP4 fraction %v", p.MemoryFraction)
		}
	}
	mustRun(t, "--demo", "fit", "--model", referenceModel, "--gpu-memory", "48GB", "-o", "json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--demo", "fit"}, "--model names the model's directory"},
		{[]string{"--demo", "fit", "--model", referenceModel, "--ct", "129", "--vm", "131"}, "use one of them"},
		{[]string{"--demo", "fit", "--model", referenceModel, "--gpu-memory", "96"}, "give a number and a unit"},
		{[]string{"--demo", "fit", "--model", referenceModel, "--engine", "tgi"}, "it is vllm or sglang"},
		{[]string{"--demo", "fit", "--model", referenceModel, "--kv-dtype", "int4"}, "--kv-dtype \"int4\""},
		{[]string{"--demo", "fit", "--model", referenceModel, "--memory-fraction", "1.5"}, "above 0 and below 1"},
		{[]string{"--demo", "fit", "--model", referenceModel, "--ct", "999"}, "no container 999 on this node"},
		{[]string{"--demo", "fit", "--model", referenceModel + "/config.json"}, "is not a directory"},
	} {
		if _, _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestFitUnsized: a model whose config.json lacks the KV cache's fields is refused with
// them named; --kv-bytes-per-token sizes it all the same.
func TestFitUnsized(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"num_hidden_layers": 2, "max_position_embeddings": 4096, "layer_types": ["mamba", "full_attention"]}`), 0o644)
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := safetensors.WriteHeader(f, []safetensors.Spec{{Name: "model.layers.0.mixer.in_proj.weight", DType: "BF16", Shape: []int64{4096, 4096}}}, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, _, err = run(t, "--demo", "fit", "--model", dir)
	if err == nil || !strings.Contains(err.Error(), `layer_types holds "mamba"`) || !strings.Contains(err.Error(), "--kv-bytes-per-token") {
		t.Fatalf("%v", err)
	}
	out := mustRun(t, "--demo", "fit", "--model", dir, "--kv-bytes-per-token", "8192")
	if !strings.Contains(out, "TP1 ") || !strings.Contains(out, "fits") {
		t.Errorf("%s", out)
	}
}

// TestPlanModel: plan says whether a group's model still fits on what it keeps, and says
// nothing more when no group names a model.
func TestPlanModel(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs(referenceModel)
	with := strings.Replace(docs.SplitTOML, `model = "/tank/models/Qwen3.5-397B-A17B-NVFP4"`, `model = "`+abs+`"`, 1)
	os.WriteFile(filepath.Join(dir, "with.toml"), []byte(with), 0o644)
	out := mustRun(t, "--demo", "plan", "--config", filepath.Join(dir, "with.toml"))
	if want := `model of group "inference" (container 129) after the split: ` + abs + ` on 4 GPUs does not fit: no placement holds the 16 sequences of 262,144 tokens asked; the most is 15, at TP2×PP2`; !strings.Contains(out, want) {
		t.Errorf("no %q in\n%s", want, out)
	}
	var doc planDoc
	json.Unmarshal([]byte(mustRun(t, "--demo", "plan", "--config", filepath.Join(dir, "with.toml"), "-o", "json")), &doc)
	if len(doc.Models) != 1 || doc.Models[0].Recommended != "" || doc.Models[0].Verdict != "does not fit" || len(doc.Models[0].GPUs) != 4 || doc.Models[0].Concurrency != 16 {
		t.Errorf("%+v", doc.Models)
	}
	// A relative path is relative to the file's directory.
	rel, _ := filepath.Rel(dir, abs)
	os.WriteFile(filepath.Join(dir, "rel.toml"), []byte(strings.Replace(with, abs, rel, 1)), 0o644)
	if out := mustRun(t, "--demo", "plan", "--config", filepath.Join(dir, "rel.toml")); !strings.Contains(out, "on 4 GPUs does not fit: no placement holds the 16 sequences") {
		t.Errorf("relative path:\n%s", out)
	}
	// No model: the plan as it always was, and no models in its JSON.
	var without []string
	for _, line := range strings.Split(docs.SplitTOML, "\n") {
		if !strings.HasPrefix(line, "model =") && !strings.HasPrefix(line, "context =") && !strings.HasPrefix(line, "concurrency =") {
			without = append(without, line)
		}
	}
	os.WriteFile(filepath.Join(dir, "without.toml"), []byte(strings.Join(without, "\n")), 0o644)
	if out := mustRun(t, "--demo", "plan", "--config", filepath.Join(dir, "without.toml")); strings.Contains(out, "model of") {
		t.Errorf("a model line without a model:\n%s", out)
	}
	if out := mustRun(t, "--demo", "plan", "--config", filepath.Join(dir, "without.toml"), "-o", "json"); strings.Contains(out, `"models"`) {
		t.Errorf("models in the JSON without a model")
	}
	// A model that is not on this machine is said, and the plan goes on.
	if out := mustRun(t, "--demo", "plan", "--config", "../../docs/split.toml"); !strings.Contains(out, "/tank/models/Qwen3.5-397B-A17B-NVFP4: not worked out: model /tank/models/Qwen3.5-397B-A17B-NVFP4 is not on this machine") {
		t.Errorf("a model elsewhere:\n%s", out)
	}
	if out := mustRun(t, "--demo", "plan", "--vfio", "numa:1"); strings.Contains(out, "model of") {
		t.Errorf("--vfio names no model:\n%s", out)
	}
	os.WriteFile(filepath.Join(dir, "bad.toml"), []byte(strings.Replace(with, "context = 262144", "context = -1", 1)), 0o644)
	if _, _, err := run(t, "--demo", "plan", "--config", filepath.Join(dir, "bad.toml")); err == nil || !strings.Contains(err.Error(), `group "inference": context = -1`) {
		t.Errorf("negative context: %v", err)
	}
}

// pve sync says the same of the split's models as plan, in its text and its JSON.
func TestPVESyncModel(t *testing.T) {
	freshDemo(t) // a dry run under --demo makes the scratch copy
	dir := t.TempDir()
	abs, _ := filepath.Abs(referenceModel)
	with := strings.Replace(docs.SplitTOML, `model = "/tank/models/Qwen3.5-397B-A17B-NVFP4"`, `model = "`+abs+`"`, 1)
	os.WriteFile(filepath.Join(dir, "with.toml"), []byte(with), 0o644)
	out, _, _ := run(t, "--demo", "pve", "sync", "--dry-run", "--config", filepath.Join(dir, "with.toml"))
	if want := `model of group "inference" (container 129) after the split: ` + abs + ` on 4 GPUs does not fit: no placement holds the 16 sequences`; !strings.Contains(out, want) {
		t.Errorf("no %q in\n%s", want, out)
	}
	js, _, _ := run(t, "--demo", "pve", "sync", "--dry-run", "--config", filepath.Join(dir, "with.toml"), "-o", "json")
	var doc struct {
		Models []planModelJSON `json:"models"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc.Models) != 1 || doc.Models[0].Verdict != "does not fit" {
		t.Errorf("%v %+v\n%s", err, doc.Models, js)
	}
	if out, _, _ := run(t, "--demo", "pve", "sync", "--dry-run", "--vfio", "numa:1"); strings.Contains(out, "model of") {
		t.Errorf("--vfio names no model:\n%s", out)
	}
}

// With the CUDA build and a driver, the memory of the GPUs it drives is what the driver
// reports (cuDeviceTotalMem), before the table.
func TestFitMeasuredMemory(t *testing.T) {
	withDriver(t, sampleGPUs{p2ptest.New(1)}, nil)
	js := mustRun(t, "--demo", "fit", "--model", referenceModel, "-o", "json")
	if !strings.Contains(js, "the CUDA driver (cuDeviceTotalMem)") {
		t.Errorf("the driver's figure is not used:\n%.3000s", js)
	}
}

// sampleGPUs is the fake driver with one GPU at the sample host's 0000:01:00.0.
type sampleGPUs struct{ *p2ptest.Fake }

func (s sampleGPUs) GPUs() ([]p2p.GPU, error) {
	return []p2p.GPU{{Index: 0, Name: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", Address: "0000:01:00.0", SM: 120, Memory: 95 << 30}}, nil
}

// TestFitRefusesUntrustedModel: fit trusts nothing of a model directory a user filled,
// as root may run it on one. Each case was a crash, a wrapped verdict or a leak:
// num_hidden_layers 4e18 panicked in makeslice; KV heads of 2^62 printed "fits" on a
// product wrapped past int64; a config within every bound whose KV cache of one
// sequence passes int64 gave a verdict; model.safetensors linked to a file outside the
// directory printed that file's first 8 bytes as a header length.
func TestFitRefusesUntrustedModel(t *testing.T) {
	model := func(t *testing.T, config string) string {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644)
		f, err := os.Create(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		n, err := safetensors.WriteHeader(f, []safetensors.Spec{{Name: "model.layers.0.self_attn.q_proj.weight", DType: "BF16", Shape: []int64{64, 64}}}, nil)
		off, _ := f.Seek(0, 1)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		os.Truncate(f.Name(), off+n)
		return dir
	}
	const shape = `"num_attention_heads": 8, "head_dim": 64, "max_position_embeddings": 4096`
	for _, c := range []struct {
		name, config string
		want         string
	}{
		{"4e18 layers", `{"num_hidden_layers": 4e18, ` + shape + `}`, "num_hidden_layers is 4e+18, outside the 0 to 2048 gpusplit accepts"},
		{"2e9 layers", `{"num_hidden_layers": 2e9, ` + shape + `}`, "num_hidden_layers is 2000000000, outside the 0 to 2048 gpusplit accepts"},
		{"KV heads of 2^62", `{"num_hidden_layers": 2, "num_key_value_heads": 4611686018427387905, ` + shape + `}`, "num_key_value_heads is 4.611686018427388e+18, outside the 0 to 2048"},
		{"head_dim of 2^62", `{"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 4611686018427387905, "max_position_embeddings": 4096}`, "head_dim is 4.611686018427388e+18, outside the 0 to 8192"},
		{"a sequence past int64", `{"num_hidden_layers": 2048, "num_attention_heads": 4096, "num_key_value_heads": 2048, "head_dim": 8192, "max_position_embeddings": 268435456}`, "one sequence of 268435456 tokens at 137438953472 bytes of KV cache per token on one GPU"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := run(t, "--demo", "fit", "--model", model(t, c.config))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want %q\n%s", err, c.want, out)
			}
		})
	}
	t.Run("a link out of the directory", func(t *testing.T) {
		dir := model(t, `{"num_hidden_layers": 2, `+shape+`}`)
		shadow := filepath.Join(t.TempDir(), "shadow")
		os.WriteFile(shadow, []byte("root:$6$Zx9bQw1e$Kq8s0mVt3L:19000:0:99999:7:::\n"), 0o600)
		os.Remove(filepath.Join(dir, "model.safetensors"))
		os.Symlink(shadow, filepath.Join(dir, "model.safetensors"))
		_, _, err := run(t, "--demo", "fit", "--model", dir)
		if err == nil || !strings.Contains(err.Error(), "a link out of the model's directory") || strings.Contains(err.Error(), "2609312867587944306") {
			t.Errorf("%v", err)
		}
	})
	t.Run("a GPU memory past int64", func(t *testing.T) {
		_, _, err := run(t, "--demo", "fit", "--model", referenceModel, "--gpu-memory", "99999999999999999999TB")
		if err == nil || !strings.Contains(err.Error(), "1 byte to 8 TiB") {
			t.Errorf("%v", err)
		}
	})
	t.Run("--kv-bytes-per-token past its bound", func(t *testing.T) {
		_, _, err := run(t, "--demo", "fit", "--model", referenceModel, "--kv-bytes-per-token", "4611686018427387904")
		if err == nil || !strings.Contains(err.Error(), "--kv-bytes-per-token 4611686018427387904 is more than the 1073741824 (1 GiB) gpusplit accepts") {
			t.Errorf("%v", err)
		}
	})
}
