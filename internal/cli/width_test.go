package cli

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/table"
)

// The table-printing commands on the sample host, as a user types them.
var tableCommands = []struct {
	name string
	args []string
}{
	{"inventory", []string{"inventory"}},
	{"plan", []string{"plan", "--vfio", "numa:1"}},
	{"apply-dry-run", []string{"apply", "--vfio", "numa:1", "--dry-run"}},
	{"status", []string{"status", "--vfio", "numa:1"}},
	{"topo", []string{"topo"}},
	{"pve-mappings", []string{"pve", "mappings"}},
	{"pve-cluster", []string{"pve", "cluster"}},
	{"fit", []string{"fit", "--model", "../../testdata/models/qwen3.5-397b-a17b-nvfp4-like", "--ct", "129"}},
}

// Every line of every table fits COLUMNS=100 (set by TestMain), TABs counted to their
// stop. fit's sentences are not a table and are left out.
func TestTablesFit100Columns(t *testing.T) {
	for _, c := range tableCommands {
		t.Run(c.name, func(t *testing.T) {
			// apply --dry-run and pve cluster exit 1 on the demo (holders, problems):
			// what they print is still to fit. A dry run makes the demo's scratch copy.
			freshDemo(t)
			out, stderr, _ := run(t, append([]string{"--demo"}, c.args...)...)
			if strings.TrimSpace(out) == "" {
				t.Fatalf("no output: %s", stderr)
			}
			for line := range strings.Lines(out) {
				line = strings.TrimSuffix(line, "\n")
				if f := strings.Fields(line); c.name == "fit" && (len(f) == 0 || f[0] != "PLACEMENT" && !strings.HasPrefix(f[0], "TP") || strings.HasSuffix(f[0], ":")) {
					continue
				}
				if n := table.TabLen(line); n > 100 {
					t.Errorf("%d columns: %q", n, line)
				}
			}
		})
	}
}

// At 100 columns the columns a user acts on stay, with every holder whole.
func TestNarrowTablesKeepWhatUsersActOn(t *testing.T) {
	out := mustRun(t, "--demo", "inventory")
	header := "GPU  ADDRESS         MODEL                    DRIVER         NUMA  GROUP  HELD BY\n"
	for _, want := range []string{header, "0000:e1:00.0", "└ 0000:e1:00.1", "RTX PRO 6000 Blackwell…", "snd_hda_intel", "nvidia-persistenced[2211];", "python3[48213] in CT 129", "  101  "} {
		if !strings.Contains(out, want) {
			t.Errorf("inventory at 100 columns lacks %q:\n%s", want, out)
		}
	}
	out = mustRun(t, "--demo", "plan", "--vfio", "numa:1")
	for _, want := range []string{"IOMMU  DEVICE        NAME", "NUMA  FROM           TO        HELD BY\n", "72     0000:81:00.0  RTX PRO 6000 Blackw…", "python3[48213] in CT 129", "pct stop 129"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan at 100 columns lacks %q:\n%s", want, out)
		}
	}
	// Narrower, the same columns, the model cut to its least (90 is about the least
	// these columns take).
	t.Setenv("COLUMNS", "90")
	out = mustRun(t, "--demo", "inventory")
	for line := range strings.Lines(out) {
		if n := table.Len(strings.TrimSuffix(line, "\n")); n > 90 {
			t.Errorf("inventory at COLUMNS=90: %d columns: %q", n, line)
		}
	}
	if !strings.Contains(out, "GPU  ADDRESS         MODEL          DRIVER         NUMA  GROUP  HELD BY\n") {
		t.Errorf("inventory at 90 columns:\n%s", out)
	}
}

// -o wide prints every column whole, as kubectl's does, whatever the width.
func TestWideShowsEveryColumn(t *testing.T) {
	t.Setenv("COLUMNS", "60")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"inventory"}, []string{
			"GPU  ADDRESS         MODEL                                       DRIVER         DEV           NUMA  GROUP  LINK      HOST BRIDGE  ROOT PORT     LARGEST BAR  HELD BY\n",
			"/dev/nvidia6", "0000:e0:01.1", "BAR1 128G", "Gen5 x16", "nvidia-persistenced[2211]; python3[48213] in CT 129\n",
		}},
		{[]string{"plan", "--vfio", "numa:1"}, []string{
			"IOMMU  DEVICE        ROLE      NAME                                        NUMA  FROM           TO        HELD BY\n",
			"0000:81:00.1  function  GB202 High Definition Audio Controller", "nvidia-persistenced[2211]; python3[48213] in CT 129\n",
			"  nvidia-persistenced[2211]: systemctl stop nvidia-persistenced (or nvidia-smi -pm 0 for the legacy persistence mode)\n",
		}},
		{[]string{"topo"}, []string{"\tGPU0\tGPU1", "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n", "GPU0\t X \tNODE", "\t0-31,64-95\t0\t\tN/A\n"}},
		{[]string{"pve", "mappings"}, []string{"pro6000   kpro6  0000:81:00    RTX PRO 6000 Blackwell Workstation Edition  nvidia  1     ok\n"}},
		{[]string{"fit", "--model", "../../testdata/models/qwen3.5-397b-a17b-nvfp4-like", "--ct", "129"}, []string{"RESERVE/GPU  KV/GPU    KV TOKENS   SEQUENCES  VERDICT\n"}},
	} {
		out, stderr, _ := run(t, append([]string{"--demo", "-o", "wide"}, c.args...)...)
		for _, want := range c.want {
			if !strings.Contains(out, want) {
				t.Errorf("%v -o wide lacks %q:\n%s%s", c.args, want, out, stderr)
			}
		}
	}
}
