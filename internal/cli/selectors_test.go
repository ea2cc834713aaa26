package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The GPU that topo and inventory label 4 is the one --vfio GPU4 moves; Proxmox's slot,
// nvidia-smi's bus id and the mapping that holds the GPUs are accepted wherever
// selectors are: --vfio, --devices and split.toml.
func TestSelectorFormsOnTheSampleHost(t *testing.T) {
	var topo struct {
		GPUs []string `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--demo", "topo", "-o", "json")), &topo); err != nil {
		t.Fatal(err)
	}
	var inv struct {
		GPUs []struct {
			Index   int    `json:"index"`
			Address string `json:"address"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--demo", "inventory", "-o", "json")), &inv); err != nil {
		t.Fatal(err)
	}
	if len(topo.GPUs) != 8 || len(inv.GPUs) != 8 || inv.GPUs[4].Index != 4 || inv.GPUs[4].Address != topo.GPUs[4] {
		t.Fatalf("topo's GPUs %v, inventory's %+v", topo.GPUs, inv.GPUs)
	}
	gpu4 := topo.GPUs[4]
	moved := func(args ...string) []string {
		t.Helper()
		var doc struct {
			Actions []struct {
				Device string `json:"device"`
			} `json:"actions"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, append(args, "-o", "json")...)), &doc); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range doc.Actions {
			out = append(out, a.Device)
		}
		return out
	}
	slot := strings.TrimSuffix(gpu4, ".0")
	for _, sel := range []string{"GPU4", "gpu:4", slot, strings.TrimPrefix(slot, "0000:"), "0000" + strings.ToUpper(gpu4)} {
		if got := moved("--demo", "plan", "--vfio", sel); strings.Join(got, " ") != gpu4+" "+slot+".1" {
			t.Errorf("plan --vfio %s moves %v, want %s and its audio function", sel, got, gpu4)
		}
	}
	if got := moved("--demo", "plan", "--vfio", "mapping:pro6000"); len(got) != 16 {
		t.Errorf("plan --vfio mapping:pro6000 moves %v, want the 8 GPUs of pro6000 on kpro6 and their functions", got)
	}
	config := filepath.Join(t.TempDir(), "split.toml")
	os.WriteFile(config, []byte("[[group]]\nname = \"vms\"\nselect = [\"mapping:pro6000,numa:1\"]\ndriver = \"vfio-pci\"\n"), 0o644)
	if got := moved("--demo", "plan", "--config", config); len(got) != 8 || got[0] != gpu4 {
		t.Errorf("split.toml select mapping:pro6000,numa:1 moves %v", got)
	}

	// --devices: the slot is one GPU with its function; the number and the mapping too.
	for sels, want := range map[string]string{"GPU4": gpu4, slot: gpu4, "mapping:pro6000,numa:1,count:1": gpu4} {
		out := mustRun(t, "--demo", "--devices", sels, "topo", "-o", "json")
		var doc struct {
			GPUs []string `json:"gpus"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || strings.Join(doc.GPUs, " ") != want {
			t.Errorf("--devices %s topo: %v %v, want %s", sels, doc.GPUs, err, want)
		}
	}
	if out := mustRun(t, "--demo", "--devices", slot, "inventory"); !strings.Contains(out, "1 GPU,") || !strings.Contains(out, "└ "+slot+".1") {
		t.Errorf("--devices %s inventory:\n%s", slot, out)
	}

	// What does not match says what there is.
	os.WriteFile(config, []byte("[[group]]\nname = \"vms\"\nselect = [\"numa:1\", \"mapping:a6000-ws\"]\ndriver = \"vfio-pci\"\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--vfio", "GPU8"}, "selector GPU8 matches no GPU (there are 8 GPUs, GPU0 (0000:01:00.0) to GPU7 (0000:f1:00.0)"},
		{[]string{"--devices", "gpu:9", "topo"}, "selector gpu:9 matches no GPU (there are 8 GPUs"},
		{[]string{"plan", "--vfio", "mapping:pro600"}, `--vfio: selector mapping:pro600: no PCI mapping "pro600" in /etc/pve/mapping/pci.cfg (the mappings of this node kpro6: pro6000)`},
		{[]string{"--devices", "mapping:a6000-ws", "inventory"}, `--devices: selector mapping:a6000-ws: PCI mapping "a6000-ws" has no device on this node kpro6, only on kpro5`},
		{[]string{"plan", "--config", config}, config + `:3:21: group "vms": selector mapping:a6000-ws: PCI mapping "a6000-ws" has no device on this node kpro6`},
		{[]string{"plan", "--vfio", "0000:81:0"}, "unknown form"},
	} {
		_, _, err := run(t, append([]string{"--demo"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gpusplit %v: %v\nwant %q", c.args, err, c.want)
		}
	}
}

// The help topic lists every form.
func TestHelpSelectors(t *testing.T) {
	out := mustRun(t, "help", "selectors")
	for _, want := range []string{"0000:81:00 ", "81:00 ", "GPU4", "gpu:4", "00000000:81:00.0", "mapping:pro6000", "numa:1", "class:0x0300"} {
		if !strings.Contains(out, want) {
			t.Errorf("help selectors lacks %q", want)
		}
	}
}
