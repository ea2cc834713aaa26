package metrics

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// With GPUSPLIT_METRICS_ROOT set, the test binary collects the metrics of that root and
// prints them: what TestWithoutRoot runs as another user.
func TestMain(m *testing.M) {
	if root, ok := os.LookupEnv("GPUSPLIT_METRICS_ROOT"); ok {
		h, err := host.Open(root)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := Collect(h, Options{}).WriteText(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The sample host's GPUs: address and NUMA node.
var sampleGPUs = []struct{ addr, numa, group string }{
	{"0000:01:00.0", "0", "10"}, {"0000:11:00.0", "0", "28"}, {"0000:61:00.0", "0", "42"}, {"0000:71:00.0", "0", "61"},
	{"0000:81:00.0", "1", "72"}, {"0000:91:00.0", "1", "90"}, {"0000:e1:00.0", "1", "101"}, {"0000:f1:00.0", "1", "117"},
}

// values are a set's samples as the text format writes them, "name{labels}" → value.
func values(t *testing.T, s *Set) map[string]float64 {
	t.Helper()
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return parseText(t, b.String())
}

func parseText(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("not a sample: %q", line)
		}
		if _, dup := out[line[:i]]; dup {
			t.Errorf("sample written twice: %s", line[:i])
		}
		out[line[:i]] = v
	}
	return out
}

// want checks samples: each key with its value, or absent for a negative value.
func want(t *testing.T, got map[string]float64, w map[string]float64) {
	t.Helper()
	for k, v := range w {
		g, ok := got[k]
		switch {
		case v < 0 && ok:
			t.Errorf("%s = %v, want no such sample", k, g)
		case v >= 0 && !ok:
			t.Errorf("no sample %s", k)
		case v >= 0 && g != v:
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
}

// named counts the samples of a family.
func named(got map[string]float64, name string) int {
	n := 0
	for k := range got {
		if k == name || strings.HasPrefix(k, name+"{") {
			n++
		}
	}
	return n
}

// sampleDir lays the sample host out in a directory, as the demo's scratch copy (a
// simulated host, whose hooks keep records) when simulated.
func sampleDir(t *testing.T, simulated bool, files map[string]string) (string, *host.Host) {
	t.Helper()
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	if simulated {
		files[host.SimulationRecord] = "{}\n"
	}
	for p, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, h
}

// loadSplit loads split.toml as status does on a node that is not Proxmox's.
func loadSplit(h *host.Host) (plan.Desired, *inventory.Inventory, error) {
	data, err := h.ReadFile(plan.DefaultConfig)
	if err != nil {
		return plan.Desired{}, nil, err
	}
	d, file, err := plan.FromFile(plan.DefaultConfig, data, nil)
	if err != nil {
		return plan.Desired{}, nil, err
	}
	plan.Defaults(&d, file, pve.NewNames(h).Proxmox)
	inv, err := inventory.Build(h, nil)
	return d, inv, err
}

// The sample host as --demo shows it: eight GPUs on nvidia, each held by
// nvidia-persistenced and by a python3 of container 129, at full link width; no desired
// state, nothing quarantined, no hand-off, nothing left out.
func TestSampleHost(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	s := Collect(h, Options{Split: loadSplit, Version: "v1.2.3"})
	got := values(t, s)
	w := map[string]float64{
		`gpusplit_split_configured`:    0,
		`gpusplit_split_in_sync`:       -1,
		`gpusplit_quarantined_devices`: 0,
		`gpusplit_build_info{version="v1.2.3",goversion="` + runtimeVersion() + `"}`: 1,
		`gpusplit_doctor_findings{check="p2p-topology",severity="info"}`:             1,
		`gpusplit_doctor_findings{check="iommu-off",severity="error"}`:               0,
	}
	for i, g := range sampleGPUs {
		a := g.addr
		w[fmt.Sprintf(`gpusplit_gpu_info{address="%s",index="%d",vendor_id="10de",device_id="2bb1",model="GB202GL [RTX PRO 6000 Blackwell Workstation Edition]",numa_node="%s",iommu_group="%s"}`, a, i, g.numa, g.group)] = 1
		w[`gpusplit_gpu_driver_info{address="`+a+`",driver="nvidia",desired="",target=""}`] = 1
		w[`gpusplit_gpu_holders{address="`+a+`",device="`+a+`",kind="process",name="nvidia-persistenced",guest=""}`] = 1
		w[`gpusplit_gpu_holders{address="`+a+`",device="`+a+`",kind="process",name="python3",guest="lxc/129"}`] = 1
		w[`gpusplit_gpu_link_width_lanes{address="`+a+`"}`] = 16
		w[`gpusplit_gpu_link_max_speed_transfers_per_second{address="`+a+`"}`] = 32e9
		w[`gpusplit_gpu_in_place{address="`+a+`"}`] = -1
	}
	for _, p := range parts {
		w[`gpusplit_collect_errors{part="`+p+`"}`] = 0
		w[`gpusplit_collect_left_out{part="`+p+`"}`] = 0
	}
	want(t, got, w)
	for name, n := range map[string]int{"gpusplit_gpu_info": 8, "gpusplit_gpu_holders": 16, "gpusplit_gpu_aer_errors_total": 0, "gpusplit_handoff_last_info": 0, "gpusplit_split_drift": 0, "gpusplit_doctor_findings": 3 * 33} {
		if named(got, name) != n {
			t.Errorf("%d samples of %s, want %d", named(got, name), name, n)
		}
	}
	if len(s.Warnings) != 0 {
		t.Errorf("warnings %q", s.Warnings)
	}
	if d := got["gpusplit_collect_duration_seconds"]; d <= 0 || d > 60 {
		t.Errorf("the collection took %v s", d)
	}
	if ts := got["gpusplit_collect_timestamp_seconds"]; ts < float64(time.Now().Add(-time.Minute).Unix()) || ts > float64(time.Now().Unix()+1) {
		t.Errorf("collected at %v, not now", ts)
	}
}

// A desired state that sends NUMA node 1 to vfio-pci, not applied yet: each GPU says
// where it goes and whether it is there, and the drivers' drift counts the eight
// devices apply would move (four GPUs and their audio functions), as status does.
func TestSplitDrift(t *testing.T) {
	_, h := sampleDir(t, false, map[string]string{
		plan.DefaultConfig: "sync_proxmox = false\npersist = false\n[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\n",
	})
	got := values(t, Collect(h, Options{Split: loadSplit}))
	w := map[string]float64{
		`gpusplit_split_configured`:             1,
		`gpusplit_split_in_sync`:                0,
		`gpusplit_split_drift{part="drivers"}`:  8,
		`gpusplit_split_drift{part="proxmox"}`:  -1,
		`gpusplit_split_drift{part="boot"}`:     -1,
		`gpusplit_collect_errors{part="split"}`: 0,
	}
	for _, g := range sampleGPUs {
		desired, target, in := "nvidia", "rest", 1.0
		if g.numa == "1" {
			desired, target, in = "vfio-pci", "vms", 0
		}
		w[`gpusplit_gpu_driver_info{address="`+g.addr+`",driver="nvidia",desired="`+desired+`",target="`+target+`"}`] = 1
		w[`gpusplit_gpu_in_place{address="`+g.addr+`"}`] = in
	}
	want(t, got, w)

	// A desired state that cannot be loaded is an error of the split; the GPUs are
	// still there.
	broken := func(*host.Host) (plan.Desired, *inventory.Inventory, error) {
		return plan.Desired{}, nil, errors.New("split.toml: line 1: nonsense")
	}
	s := Collect(h, Options{Split: broken})
	got = values(t, s)
	want(t, got, map[string]float64{
		`gpusplit_split_configured`:             1,
		`gpusplit_split_in_sync`:                -1,
		`gpusplit_collect_errors{part="split"}`: 1,
		`gpusplit_gpu_driver_info{address="0000:81:00.0",driver="nvidia",desired="",target=""}`: 1,
	})
	if !strings.Contains(strings.Join(s.Warnings, "\n"), "line 1: nonsense") {
		t.Errorf("warnings %q do not say why", s.Warnings)
	}
}

// A host in sync reads as status's exit 0; a quarantined GPU takes it out of sync.
func TestSplitInSync(t *testing.T) {
	_, h := sampleDir(t, false, map[string]string{
		plan.DefaultConfig: "sync_proxmox = false\npersist = false\nrest = \"keep\"\n[[group]]\nname = \"ct\"\nselect = [\"numa:0\"]\ndriver = \"nvidia\"\n",
	})
	want(t, values(t, Collect(h, Options{Split: loadSplit})), map[string]float64{
		`gpusplit_split_in_sync`:                        1,
		`gpusplit_split_drift{part="drivers"}`:          0,
		`gpusplit_gpu_in_place{address="0000:01:00.0"}`: 1,
		`gpusplit_gpu_in_place{address="0000:81:00.0"}`: -1, // rest = "keep": not the split's
	})
	a, _ := pci.ParseAddress("0000:81:00.0")
	if err := health.Quarantine(h, health.Record{Device: a, GPU: a, Guest: 131, Phase: hook.PostStop}); err != nil {
		t.Fatal(err)
	}
	want(t, values(t, Collect(h, Options{Split: loadSplit})), map[string]float64{
		`gpusplit_split_in_sync`:               0,
		`gpusplit_split_drift{part="drivers"}`: 0,
		`gpusplit_quarantined_devices`:         1,
	})
}

// The quarantine and each guest's last hand-off, from the records the hooks wrote on
// a simulated host: a container's start that passed, a VM's start that failed.
func TestQuarantineAndHandOffs(t *testing.T) {
	_, h := sampleDir(t, true, map[string]string{})
	gpu, _ := pci.ParseAddress("0000:81:00.0")
	audio, _ := pci.ParseAddress("0000:81:00.1")
	when := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := health.Quarantine(h, health.Record{Device: audio, GPU: gpu, Guest: 131, Phase: hook.PostStop, Time: when}); err != nil {
		t.Fatal(err)
	}
	if _, err := hook.Run(context.Background(), hook.Config{H: h}, 129, hook.PreStart); err != nil {
		t.Fatal(err)
	}
	refuse := func(*host.Host) (bind.Kernel, error) { return nil, errors.New("no kernel here") }
	for range 2 {
		if _, err := hook.Run(context.Background(), hook.Config{H: h, Kernel: refuse}, 131, hook.PreStart); err == nil {
			t.Fatal("VM 131 started without a kernel")
		}
	}
	recs, _, err := hook.HandOffs(h)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%v %+v", err, recs)
	}
	got := values(t, Collect(h, Options{}))
	want(t, got, map[string]float64{
		`gpusplit_quarantined_devices`: 1,
		`gpusplit_quarantine_info{address="0000:81:00.1",gpu="0000:81:00.0",guest="qemu/131",phase="post-stop"}`: 1,
		`gpusplit_quarantine_timestamp_seconds{address="0000:81:00.1"}`:                                          float64(when.Unix()),
		`gpusplit_handoff_last_info{guest="lxc/129",phase="pre-start",result="ok"}`:                              1,
		`gpusplit_handoff_last_info{guest="qemu/131",phase="pre-start",result="failed"}`:                         1,
		`gpusplit_handoff_last_success{guest="lxc/129",phase="pre-start"}`:                                       1,
		`gpusplit_handoff_last_success{guest="qemu/131",phase="pre-start"}`:                                      0,
		`gpusplit_handoff_last_duration_seconds{guest="lxc/129",phase="pre-start"}`:                              recs[0].Seconds,
		`gpusplit_handoff_last_timestamp_seconds{guest="qemu/131",phase="pre-start"}`:                            float64(recs[1].Start.UnixNano()) / 1e9,
		`gpusplit_handoffs_total{guest="qemu/131",phase="pre-start",result="failed"}`:                            2,
		`gpusplit_handoffs_total{guest="qemu/131",phase="pre-start",result="ok"}`:                                0,
		`gpusplit_handoffs_total{guest="lxc/129",phase="pre-start",result="ok"}`:                                 1,
		`gpusplit_handoffs_total{guest="lxc/129",phase="post-stop",result="ok"}`:                                 -1,
		`gpusplit_doctor_findings{check="gpu-quarantined",severity="error"}`:                                     1,
		`gpusplit_collect_errors{part="handoffs"}`:                                                               0,
	})
}

// sysfs of one of the sample host's GPUs, and of the root port above it.
const (
	gpuDir  = "/sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0/"
	portDir = "/sys/devices/pci0000:80/0000:80:01.1/"
)

// AER counters of a GPU and of its port, as the kernel writes them; a GPU whose link
// trained narrower and slower; a GPU whose counters cannot be read is an error of its
// own, and the others are collected all the same.
func TestLinksAndAER(t *testing.T) {
	_, h := sampleDir(t, false, map[string]string{
		gpuDir + "aer_dev_correctable":  "RxErr 5\nBadTLP 2\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 7\n",
		gpuDir + "aer_dev_nonfatal":     "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 1\nTOTAL_ERR_NONFATAL 1\n",
		gpuDir + "aer_dev_fatal":        "Undefined 0\nDLP 0\nSDES 0\nTOTAL_ERR_FATAL 0\n",
		portDir + "aer_dev_correctable": "RxErr 40\nTOTAL_ERR_COR 40\n",
		portDir + "aer_dev_nonfatal":    "TOTAL_ERR_NONFATAL 0\n",
		portDir + "aer_dev_fatal":       "SDES 3\nTOTAL_ERR_FATAL 3\n",
		"/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/current_link_width":  "8\n",
		"/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/current_link_speed":  "2.5 GT/s PCIe\n",
		"/sys/devices/pci0000:10/0000:10:01.1/0000:11:00.0/current_link_speed":  "Unknown\n",
		"/sys/devices/pci0000:60/0000:60:01.1/0000:61:00.0/aer_dev_correctable": "garbage\n",
		"/sys/devices/pci0000:60/0000:60:01.1/0000:61:00.0/aer_dev_nonfatal":    "TOTAL_ERR_NONFATAL 0\n",
		"/sys/devices/pci0000:60/0000:60:01.1/0000:61:00.0/aer_dev_fatal":       "TOTAL_ERR_FATAL 0\n",
	})
	s := Collect(h, Options{})
	got := values(t, s)
	want(t, got, map[string]float64{
		`gpusplit_gpu_aer_errors_total{address="0000:81:00.0",severity="correctable",seen_by="gpu"}`:  7,
		`gpusplit_gpu_aer_errors_total{address="0000:81:00.0",severity="nonfatal",seen_by="gpu"}`:     1,
		`gpusplit_gpu_aer_errors_total{address="0000:81:00.0",severity="fatal",seen_by="gpu"}`:        0,
		`gpusplit_gpu_aer_errors_total{address="0000:81:00.0",severity="correctable",seen_by="port"}`: 40,
		`gpusplit_gpu_aer_errors_total{address="0000:81:00.0",severity="fatal",seen_by="port"}`:       3,
		`gpusplit_gpu_aer_errors_total{address="0000:61:00.0",severity="fatal",seen_by="gpu"}`:        -1,
		`gpusplit_gpu_link_width_lanes{address="0000:01:00.0"}`:                                       8,
		`gpusplit_gpu_link_max_width_lanes{address="0000:01:00.0"}`:                                   16,
		`gpusplit_gpu_link_speed_transfers_per_second{address="0000:01:00.0"}`:                        2.5e9,
		`gpusplit_gpu_link_max_speed_transfers_per_second{address="0000:01:00.0"}`:                    32e9,
		`gpusplit_gpu_link_speed_transfers_per_second{address="0000:11:00.0"}`:                        0,
		`gpusplit_collect_errors{part="aer"}`:                                                         1,
	})
	if named(got, "gpusplit_gpu_aer_errors_total") != 6 {
		t.Errorf("%d AER samples, want 6: the GPU's and its port's", named(got, "gpusplit_gpu_aer_errors_total"))
	}
	if w := strings.Join(s.Warnings, "\n"); !strings.Contains(w, "0000:61:00.0") || !strings.Contains(w, "TOTAL_ERR_COR") {
		t.Errorf("warnings %q do not name the device and its file", s.Warnings)
	}
}

// Without root, what only root may read is left out and counted, and nothing is made
// up in its place: other users' processes (the holders), the quarantine and hand-off
// records. Root, on the same tree, sees it all.
func TestWithoutRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test collects as root and as user nobody")
	}
	base, err := os.MkdirTemp("", "gpusplit-metrics-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	root := filepath.Join(base, "host")
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, host.SimulationRecord), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := pci.ParseAddress("0000:81:00.0")
	if err := health.Quarantine(h, health.Record{Device: a, GPU: a, Guest: 131, Phase: hook.PostStop}); err != nil {
		t.Fatal(err)
	}
	if _, err := hook.Run(context.Background(), hook.Config{H: h}, 129, hook.PreStart); err != nil {
		t.Fatal(err)
	}
	// The two processes that hold the GPUs are root's: their open files are root's to
	// list. The records' directory is made root's alone by the hooks themselves.
	for _, pid := range []string{"2211", "48213"} {
		if err := os.Chmod(filepath.Join(root, "proc", pid, "fd"), 0o500); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{base, root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	asRoot := values(t, Collect(h, Options{}))
	want(t, asRoot, map[string]float64{
		`gpusplit_collect_left_out{part="holders"}`:    0,
		`gpusplit_collect_left_out{part="quarantine"}`: 0,
		`gpusplit_collect_left_out{part="handoffs"}`:   0,
		`gpusplit_quarantined_devices`:                 1,
		`gpusplit_gpu_holders{address="0000:81:00.0",device="0000:81:00.0",kind="process",name="python3",guest="lxc/129"}`: 1,
		`gpusplit_handoff_last_success{guest="lxc/129",phase="pre-start"}`:                                                 1,
	})

	// The test binary, copied where user nobody may run it, collects as nobody.
	bin := filepath.Join(base, "metrics.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{"GPUSPLIT_METRICS_ROOT=" + root, "HOME=/nonexistent", "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("collecting as nobody: %v\n%s", err, stderr.String())
	}
	asNobody := parseText(t, string(out))
	want(t, asNobody, map[string]float64{
		`gpusplit_collect_left_out{part="holders"}`:                                             2,
		`gpusplit_collect_left_out{part="quarantine"}`:                                          1,
		`gpusplit_collect_left_out{part="handoffs"}`:                                            1,
		`gpusplit_collect_errors{part="quarantine"}`:                                            0,
		`gpusplit_collect_errors{part="handoffs"}`:                                              0,
		`gpusplit_quarantined_devices`:                                                          -1,
		`gpusplit_gpu_driver_info{address="0000:81:00.0",driver="nvidia",desired="",target=""}`: 1,
	})
	for _, name := range []string{"gpusplit_gpu_holders", "gpusplit_handoff_last_info", "gpusplit_quarantine_info"} {
		if n := named(asNobody, name); n != 0 {
			t.Errorf("as nobody, %d samples of %s: what cannot be read must not be reported", n, name)
		}
	}
	if named(asNobody, "gpusplit_gpu_info") != 8 {
		t.Errorf("as nobody, the GPUs are not all there:\n%s", out)
	}
}

// WriteTextfile replaces DIR/gpusplit.prom with what WriteText writes, readable by
// node_exporter's user, and leaves no temporary file; a directory that is not there is
// refused with the way out.
func TestWriteTextfile(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	s := Collect(h, Options{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, TextfileName), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := WriteTextfile(dir, s)
	if err != nil || p != filepath.Join(dir, TextfileName) || s.Textfile != p {
		t.Fatalf("WriteTextfile = %q, %v (set says %q)", p, err, s.Textfile)
	}
	var b strings.Builder
	s.WriteText(&b)
	got, err := os.ReadFile(p)
	if err != nil || string(got) != b.String() {
		t.Errorf("the file holds\n%.300s\nwant\n%.300s", got, b.String())
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %s, want 0644: node_exporter runs as its own user", fi.Mode().Perm())
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("the directory holds %v", names)
	}
	_, err = WriteTextfile(filepath.Join(dir, "missing"), s)
	if err == nil || !regexp.MustCompile(`no such file or directory; it is node_exporter's --collector.textfile.directory`).MatchString(err.Error()) {
		t.Errorf("a missing directory: %v", err)
	}
	if _, err = WriteTextfile(p, s); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file for a directory: %v", err)
	}
}

func runtimeVersion() string { return runtime.Version() }

// The dashboard names only metrics gpusplit writes, and every panel has a query that
// chooses the nodes ($instance): one node or many.
func TestDashboardNamesMetrics(t *testing.T) {
	known := map[string]bool{}
	for _, f := range Collect(richHost(t), Options{Split: loadSplit}).Families {
		known[f.Name] = true
	}
	queries := dashboardQueries(t)
	if len(queries) < 10 {
		t.Fatalf("%d queries in the dashboard", len(queries))
	}
	used := map[string]bool{}
	for _, q := range queries {
		for _, name := range regexp.MustCompile(`gpusplit_[a-z_]+`).FindAllString(q.expr, -1) {
			used[name] = true
			if !known[name] {
				t.Errorf("panel %q queries %s, which gpusplit does not write", q.panel, name)
			}
		}
		if !strings.Contains(q.expr, `instance=~"$instance"`) {
			t.Errorf("panel %q: %s does not choose the nodes", q.panel, q.expr)
		}
	}
	for _, name := range []string{"gpusplit_gpu_driver_info", "gpusplit_gpu_holders", "gpusplit_split_drift", "gpusplit_gpu_aer_errors_total", "gpusplit_handoff_last_info", "gpusplit_quarantined_devices", "gpusplit_doctor_findings"} {
		if !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
}

// docs/metrics.md lists every metric gpusplit writes, with its type and every label,
// and no metric it does not write.
func TestDocsListEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := regexp.MustCompile("^\\| `(gpusplit_[a-z_]+)` \\|").FindStringSubmatch(l); m != nil {
			rows[m[1]] = l
		}
	}
	for _, f := range Collect(richHost(t), Options{Split: loadSplit}).Families {
		row, ok := rows[f.Name]
		if !ok {
			t.Errorf("docs/metrics.md does not list %s", f.Name)
			continue
		}
		delete(rows, f.Name)
		cells := strings.Split(row, "|")
		if strings.TrimSpace(cells[2]) != f.Type {
			t.Errorf("docs/metrics.md says %s is a %s; it is a %s", f.Name, strings.TrimSpace(cells[2]), f.Type)
		}
		var labels []string
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cells[3], -1) {
			labels = append(labels, m[1])
		}
		if strings.Join(labels, ",") != strings.Join(f.labels, ",") {
			t.Errorf("docs/metrics.md gives %s the labels %v; it has %v", f.Name, labels, f.labels)
		}
	}
	for name := range rows {
		t.Errorf("docs/metrics.md lists %s, which gpusplit does not write", name)
	}
}
