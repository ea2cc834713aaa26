package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// run executes gpusplit with args and returns its standard output, standard error and error.
func run(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := New(&out, &errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func mustRun(t testing.TB, args ...string) string {
	t.Helper()
	out, stderr, err := run(t, args...)
	if err != nil {
		t.Fatalf("gpusplit %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// The README's first command: the matrix of the sample host shows NODE within each NUMA
// node and SYS across them.
func TestDemoTopo(t *testing.T) {
	// -o wide: nvidia-smi's TAB layout, which is wider than the 100 columns of the tests.
	out := mustRun(t, "--demo", "topo", "-o", "wide")
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) > 1 && strings.HasPrefix(f[0], "GPU") {
			rows[f[0]] = f[1:]
		}
	}
	if len(rows) != 8 {
		t.Fatalf("got %d GPU rows, want 8:\n%s", len(rows), out)
	}
	for i := range 8 {
		row := rows["GPU"+string(rune('0'+i))]
		for j := range 8 {
			want := "SYS"
			switch {
			case i == j:
				want = " X "
			case i/4 == j/4:
				want = "NODE"
			}
			if row[j] != want {
				t.Errorf("GPU%d/GPU%d = %q, want %q", i, j, row[j], want)
			}
		}
		cpus, numa := "0-31,64-95", "0"
		if i >= 4 {
			cpus, numa = "32-63,96-127", "1"
		}
		if got := strings.Join(row[10:], "\t"); got != cpus+"\t"+numa+"\t\tN/A" {
			t.Errorf("GPU%d affinity columns %q", i, got)
		}
	}
	for _, want := range []string{"Legend:", "NIC0: mlx5_0", "NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "every GPU pair is PHB") {
		t.Error("the sample host is not a flat VM guest, yet the note says so")
	}
}

func TestDemoInventoryJSON(t *testing.T) {
	var doc struct {
		Host      string `json:"host"`
		NUMANodes int    `json:"numa_nodes"`
		GPUs      []struct {
			Address     string   `json:"address"`
			Vendor      string   `json:"vendor"`
			Device      string   `json:"device"`
			NUMANode    int      `json:"numa_node"`
			IOMMUGroup  int      `json:"iommu_group"`
			Members     []string `json:"iommu_group_members"`
			Driver      string   `json:"driver"`
			HostBridge  string   `json:"host_bridge"`
			RootPort    *string  `json:"root_port"`
			Minor       *int     `json:"minor"`
			CPUAffinity string   `json:"cpu_affinity"`
			DeviceNodes []string `json:"device_nodes"`
			Functions   []struct {
				Address string `json:"address"`
				Device  string `json:"device"`
				Driver  string `json:"driver"`
			} `json:"functions"`
			Link struct {
				Gen   int `json:"gen"`
				Width int `json:"width"`
			} `json:"link"`
			BARs []struct {
				Name string `json:"name"`
				Size uint64 `json:"size"`
			} `json:"bars"`
			Holders []struct {
				PID       int  `json:"pid"`
				Container *int `json:"container"`
			} `json:"holders"`
		} `json:"gpus"`
	}
	out := mustRun(t, "--demo", "inventory", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if doc.Host != samplehost.Name || doc.NUMANodes != 2 || len(doc.GPUs) != 8 {
		t.Fatalf("host %q, %d NUMA nodes, %d GPUs", doc.Host, doc.NUMANodes, len(doc.GPUs))
	}
	wantAddr := []string{"0000:01:00.0", "0000:11:00.0", "0000:61:00.0", "0000:71:00.0", "0000:81:00.0", "0000:91:00.0", "0000:e1:00.0", "0000:f1:00.0"}
	wantGroup := []int{10, 28, 42, 61, 72, 90, 101, 117}
	for i, g := range doc.GPUs {
		rc := wantAddr[i][5:7]
		rcBus := string(rc[0]) + "0"
		switch {
		case g.Address != wantAddr[i]:
			t.Errorf("gpu %d address %s, want %s", i, g.Address, wantAddr[i])
		case g.Vendor != "10de" || g.Device != "2bb1":
			t.Errorf("%s: id %s:%s", g.Address, g.Vendor, g.Device)
		case g.NUMANode != i/4:
			t.Errorf("%s: numa %d", g.Address, g.NUMANode)
		case g.IOMMUGroup != wantGroup[i]:
			t.Errorf("%s: group %d, want %d", g.Address, g.IOMMUGroup, wantGroup[i])
		case g.Driver != "nvidia" || g.Minor == nil || *g.Minor != i:
			t.Errorf("%s: driver %s minor %v", g.Address, g.Driver, g.Minor)
		case g.HostBridge != "pci0000:"+rcBus:
			t.Errorf("%s: host bridge %s", g.Address, g.HostBridge)
		case g.RootPort == nil || *g.RootPort != "0000:"+rcBus+":01.1":
			t.Errorf("%s: root port %v", g.Address, g.RootPort)
		case len(g.Functions) != 1 || g.Functions[0].Device != "22e8" || g.Functions[0].Address != wantAddr[i][:11]+"1":
			t.Errorf("%s: functions %+v", g.Address, g.Functions)
		case len(g.Members) != 2:
			t.Errorf("%s: group members %v", g.Address, g.Members)
		case g.Link.Gen != 5 || g.Link.Width != 16:
			t.Errorf("%s: link %+v", g.Address, g.Link)
		case len(g.BARs) != 5 || g.BARs[1].Name != "BAR1" || g.BARs[1].Size != 128<<30:
			t.Errorf("%s: BARs %+v", g.Address, g.BARs)
		case len(g.DeviceNodes) != 1 || g.DeviceNodes[0] != "/dev/nvidia"+string(rune('0'+i)):
			t.Errorf("%s: device nodes %v", g.Address, g.DeviceNodes)
		}
		var inCT bool
		for _, h := range g.Holders {
			inCT = inCT || (h.Container != nil && *h.Container == 129 && h.PID == 48213)
		}
		if !inCT || len(g.Holders) != 2 {
			t.Errorf("%s: holders %+v, want the vLLM process of CT 129 and nvidia-persistenced", g.Address, g.Holders)
		}
	}
}

func TestDemoInventoryTable(t *testing.T) {
	// -o wide: DEV, ROOT PORT and LARGEST BAR are dropped at the tests' 100 columns.
	out := mustRun(t, "--demo", "inventory", "-o", "wide")
	for _, want := range []string{
		"demo:kpro6: 8 GPUs, 2 NUMA nodes",
		"0000:e1:00.0", "RTX PRO 6000 Blackwell Workstation Edition", "/dev/nvidia6", "0000:e0:01.1",
		"└ 0000:e1:00.1", "python3[48213] in CT 129", "nvidia-persistenced[2211]", "BAR1 128G",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	long := mustRun(t, "--demo", "inventory", "--long")
	for _, want := range []string{"pci0000:e0 → 0000:e0:01.1 → 0000:e1:00.0", "BAR1 128G (64-bit, prefetchable)", "group 101: 0000:e1:00.0, 0000:e1:00.1"} {
		if !strings.Contains(long, want) {
			t.Errorf("--long lacks %q", want)
		}
	}
}

func TestDevicesSelector(t *testing.T) {
	out := mustRun(t, "--demo", "--devices", "numa:1", "topo", "-o", "json")
	var doc struct {
		GPUs   []string   `json:"gpus"`
		Matrix [][]string `json:"matrix"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if strings.Join(doc.GPUs, " ") != "0000:81:00.0 0000:91:00.0 0000:e1:00.0 0000:f1:00.0" {
		t.Errorf("numa:1 selected %v", doc.GPUs)
	}
	if doc.Matrix[0][0] != "X" || doc.Matrix[0][1] != "NODE" {
		t.Errorf("matrix %v", doc.Matrix)
	}
	// --devices can count any device as a GPU, here the ConnectX-7 ports.
	out = mustRun(t, "--demo", "--devices", "15b3:1021", "inventory", "-o", "json")
	if !strings.Contains(out, `"address": "0000:82:00.0"`) || !strings.Contains(out, `"address": "0000:82:00.1"`) {
		t.Errorf("15b3:1021 did not select both ports:\n%s", out)
	}
}

func TestDOT(t *testing.T) {
	out := mustRun(t, "--demo", "topo", "--format", "dot")
	if !strings.HasPrefix(out, "graph topology {") || strings.Count(out, "{") != strings.Count(out, "}") {
		t.Fatalf("not a DOT graph:\n%s", out)
	}
	for _, want := range []string{`"pci0000:e0" -- "0000:e0:01.1"`, `"0000:e0:01.1" -- "0000:e1:00.0"`, "cluster_numa1"} {
		if !strings.Contains(out, want) {
			t.Errorf("DOT lacks %s", want)
		}
	}
}

// Every command runs unchanged on a snapshot archive and on a directory tree.
func TestRootArchiveAndDirectory(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "kpro6.tar.gz")
	if err := os.WriteFile(archive, samplehost.Archive(), 0o644); err != nil {
		t.Fatal(err)
	}
	demo := mustRun(t, "--demo", "topo")
	fromArchive := mustRun(t, "--root", archive, "topo")
	if demo != fromArchive {
		t.Errorf("--root archive differs from --demo")
	}
}

func TestBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-root")
	empty := t.TempDir()
	cases := []struct {
		args []string
		want []string // all must appear in the error
	}{
		{[]string{"--root", missing, "inventory"}, []string{missing, "no such file"}},
		{[]string{"--root", empty, "topo"}, []string{"/sys/bus/pci/devices", empty}},
		{[]string{"--demo", "--root", "/x", "inventory"}, []string{"--demo", "--root"}},
		{[]string{"--demo", "-o", "xml", "inventory"}, []string{"xml", "table, wide or json"}},
		{[]string{"--demo", "--devices", "numa:x", "inventory"}, []string{"--devices", "numa:x"}},
		{[]string{"--demo", "--devices", "numa:5", "inventory"}, []string{"numa:5", "0, 1"}},
		{[]string{"--demo", "--devices", "0000:99:00.0", "topo"}, []string{"0000:99:00.0"}},
		{[]string{"--demo", "topo", "--format", "png"}, []string{"png", "matrix, svg or dot"}},
		{[]string{"--demo", "inventory", "extra"}, []string{"extra"}},
	}
	for _, c := range cases {
		out, _, err := run(t, c.args...)
		if err == nil {
			t.Errorf("gpusplit %v succeeded:\n%s", c.args, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("gpusplit %v: error %q lacks %q", c.args, err, w)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	out := mustRun(t, "--version")
	if !strings.HasPrefix(out, "gpusplit version ") {
		t.Errorf("--version printed %q", out)
	}
}

func TestExitError(t *testing.T) {
	inner := errors.New("drift")
	var err error = &ExitError{Code: 3, Err: inner}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || !errors.Is(err, inner) || err.Error() != "drift" {
		t.Errorf("ExitError does not wrap: %v", err)
	}
}

// The reference case: --vfio numa:1 moves the four NUMA-1 GPUs and their audio functions.
func TestDemoPlan(t *testing.T) {
	// -o wide: ROLE is dropped at the tests' 100 columns.
	out := mustRun(t, "--demo", "plan", "--vfio", "numa:1", "-o", "wide")
	for _, bus := range []string{"81", "91", "e1", "f1"} {
		for _, want := range []string{"0000:" + bus + ":00.0  gpu", "0000:" + bus + ":00.1  function"} {
			if !strings.Contains(out, want) {
				t.Errorf("plan lacks %q:\n%s", want, out)
			}
		}
	}
	for _, bus := range []string{"01", "11", "61", "71"} {
		if strings.Contains(out, "0000:"+bus+":00.0") {
			t.Errorf("plan moves the NUMA-0 GPU %s", bus)
		}
	}
	if !strings.Contains(out, "pct stop 129") || !strings.Contains(out, "systemctl stop nvidia-persistenced") {
		t.Errorf("plan does not say how to release the holders:\n%s", out)
	}
	var doc struct {
		Empty   bool `json:"empty"`
		Actions []struct {
			Device string `json:"device"`
			From   string `json:"from"`
			To     string `json:"to"`
		} `json:"actions"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--demo", "plan", "--vfio", "numa:1", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Empty || len(doc.Actions) != 8 || doc.Actions[0].Device != "0000:81:00.0" || doc.Actions[0].From != "nvidia" || doc.Actions[0].To != "vfio-pci" {
		t.Errorf("plan JSON %+v", doc)
	}
	// When everything is in place the plan is empty and says so.
	config := filepath.Join(t.TempDir(), "split.toml")
	os.WriteFile(config, []byte("rest = \"keep\"\n[[group]]\nname = \"inference\"\nselect = [\"numa:0\"]\ndriver = \"nvidia\"\n"), 0o644)
	if out := mustRun(t, "--demo", "plan", "--config", config); !strings.Contains(out, "nothing to do, all 8 devices are where they belong") {
		t.Errorf("empty plan printed:\n%s", out)
	}
}

func TestPlanErrors(t *testing.T) {
	config := filepath.Join(t.TempDir(), "split.toml")
	os.WriteFile(config, []byte("[[group]]\nname = \"vms\"\nselect = [\"numa:x\"]\n"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--demo", "plan"}, "no desired state"},
		{[]string{"--demo", "plan", "--vfio", "numa:9"}, "numa:9"},
		{[]string{"--demo", "plan", "--vfio", "0000:99:00.0"}, "0000:99:00.0"},
		{[]string{"--demo", "plan", "--config", config}, config + ":3:11"},
		{[]string{"--demo", "plan", "--config", config, "--vfio", "numa:1"}, "use one of them"},
		{[]string{"--demo", "plan", "--config", "/nonexistent/split.toml"}, "/nonexistent/split.toml"},
	}
	for _, c := range cases {
		_, _, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gpusplit %v: %v, want %q", c.args, err, c.want)
		}
	}
}

// A split.toml's own mistakes and the names the host lacks come in one run: fixing the
// first round used to uncover the second.
func TestPlanFileErrorsInOneRound(t *testing.T) {
	config := filepath.Join(t.TempDir(), "split.toml")
	os.WriteFile(config, []byte("colour = \"blue\"\n[[group]]\nname = \"ct\"\nselect = [\"numa:0\"]\ndriver = \"nvidia\"\ncontainers = [999]\n"), 0o644)
	_, _, err := run(t, "--demo", "plan", "--config", config)
	for _, want := range []string{config + `:1:1: unknown key "colour"`, config + `:6:15: group "ct": no container 999`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("plan --config: %v, want %q", err, want)
		}
	}
}

func TestDemoPVE(t *testing.T) {
	freshDemo(t) // the dry run makes the demo's scratch copy
	out := mustRun(t, "--demo", "pve", "mappings")
	if strings.Count(out, " ok\n") != 8 || !strings.Contains(out, "(other node)") {
		t.Errorf("pve mappings:\n%s", out)
	}
	out = mustRun(t, "--demo", "pve", "sync", "--vfio", "numa:1", "--dry-run")
	for _, want := range []string{
		"--- /etc/pve/mapping/pci.cfg", "+pro6000-vm\n",
		"\tmap id=10de:2bb1,iommugroup=72,node=kpro6,path=0000:81:00,subsystem-id=10de:204b\n",
		"--- /etc/pve/lxc/129.conf", "-dev4: /dev/nvidia4,gid=44,mode=0666\n",
		"--- /etc/pve/qemu-server/131.conf", "+hostpci0: mapping=pro6000-vm,pcie=1\n", "+numa0: cpus=0-63,hostnodes=1,memory=262144,policy=bind\n",
		"dry run: nothing was written",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pve sync lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := run(t, "--root", sampleArchive(t), "pve", "sync", "--vfio", "numa:1", "--apply"); err == nil || !strings.Contains(err.Error(), "snapshot") {
		t.Errorf("--apply on a snapshot: %v", err)
	}
}

func TestDoctorExitStatus(t *testing.T) {
	out := mustRun(t, "--demo", "doctor")
	if !strings.Contains(out, "0 errors, 0 warnings") {
		t.Errorf("doctor on the sample host:\n%s", out)
	}
	fixture := filepath.Join("..", "..", "testdata", "hosts", "q35-guest-8gpu-bar-failure.tar.gz")
	out, _, err := run(t, "--root", fixture, "doctor")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitErrors || !strings.Contains(out, "ERROR  bar-unassigned") || !strings.Contains(out, "fix: ") {
		t.Errorf("doctor on the failed VM: %v\n%s", err, out)
	}
	out, _, err = run(t, "--root", fixture, "doctor", "--only", "grub-override", "-o", "json")
	var doc struct {
		Findings []struct {
			ID       string   `json:"id"`
			Severity string   `json:"severity"`
			Evidence []string `json:"evidence"`
			Remedy   string   `json:"remedy"`
		} `json:"findings"`
	}
	if !errors.As(err, &ee) || ee.Code != ExitWarnings || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Findings) != 1 ||
		doc.Findings[0].Severity != "warning" || len(doc.Findings[0].Evidence) == 0 || doc.Findings[0].Remedy == "" {
		t.Errorf("doctor --only grub-override -o json: %v\n%s", err, out)
	}
	if _, _, err := run(t, "--demo", "doctor", "--only", "nonsense"); err == nil || !strings.Contains(err.Error(), "nonsense") {
		t.Errorf("unknown check: %v", err)
	}
	log := filepath.Join(t.TempDir(), "dmesg.txt")
	os.WriteFile(log, []byte("[   12.5] nvidia 0000:e1:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]\n"), 0o644)
	if out, _, err := run(t, "--demo", "doctor", "--kernel-log", log, "--only", "iommu-page-faults"); !errors.As(err, &ee) || ee.Code != ExitErrors || !strings.Contains(out, "0000:e1:00.0") {
		t.Errorf("--kernel-log: %v\n%s", err, out)
	}
}
