package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/persist"
)

// poolSplit is the README's pool (docs/split-pool.toml): the four NUMA-1 GPUs rest on
// nvidia for container 129, which also keeps the NUMA-0 GPUs, and go to VM 131 while it
// runs.
func poolSplit(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../docs/split-pool.toml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), string(data)) {
		t.Error("README.md does not show docs/split-pool.toml as it is")
	}
	return string(data)
}

var numa1GPUs = []string{"0000:81:00.0", "0000:91:00.0", "0000:e1:00.0", "0000:f1:00.0"}

// poolRoot is the sample host with the pool in split.toml, a storage for snippets, and
// a kernel that shows each binding in the tree. Container 129 is stopped: its python3
// (pid 48213) is kept aside, and start puts it back.
func poolRoot(t *testing.T) (root string, k *simKernel, start func()) {
	t.Helper()
	root, h := hookRoot(t)
	fakeServices(t, root)
	for p, body := range map[string]string{
		// The boot files are persist's walkthrough, not this one's.
		"etc/gpusplit/split.toml": "persist = false\n" + poolSplit(t),
		"etc/pve/storage.cfg":     localSnippets,
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// gpusplit installed where the snippet runs it, a file of root's.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	putBinary(t, root, persist.DefaultBinary, 0o755)
	aside := filepath.Join(t.TempDir(), "48213")
	if err := os.Rename(filepath.Join(root, "proc/48213"), aside); err != nil {
		t.Fatal(err)
	}
	k = newSimKernel(t, h)
	k.mirrorTo(t, root)
	k.use(t)
	return root, k, func() {
		if err := os.Rename(aside, filepath.Join(root, "proc/48213")); err != nil {
			t.Fatal(err)
		}
	}
}

// qemuRuns writes the reservations qemu-server keeps for the running VMs' devices; with
// none, it takes them away, as its cleanup does when the VMs stop.
func qemuRuns(t *testing.T, root string, running map[string][]string) {
	t.Helper()
	res := filepath.Join(root, "run/qemu-server/pci-id-reservations")
	os.MkdirAll(filepath.Dir(res), 0o755)
	var lines []string
	for vm, devices := range running {
		for _, a := range devices {
			lines = append(lines, a+" "+vm+" time:"+itoa(time.Now().Add(time.Hour).Unix()))
		}
	}
	if err := os.WriteFile(res, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// devLines are a container config's devN lines.
func devLines(t *testing.T, conf string) []string {
	t.Helper()
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(strings.Split(string(data), "\n"), func(l string) bool { return !strings.HasPrefix(l, "dev") })
}

type statusPools struct {
	InSync bool `json:"in_sync"`
	// Drift is what is out of step beside the drivers, part by part.
	Drift []struct {
		Part  string   `json:"part"`
		Items []string `json:"items"`
	} `json:"drift"`
	Pools []struct {
		Name string `json:"name"`
		GPUs []struct {
			Device string `json:"device"`
			Driver string `json:"driver"`
			HeldBy int    `json:"held_by"`
		} `json:"gpus"`
	} `json:"pools"`
}

func poolStatus(t *testing.T, root string) statusPools {
	t.Helper()
	out, _, err := run(t, "--root", root, "status", "-o", "json")
	var s statusPools
	if jerr := json.Unmarshal([]byte(out), &s); jerr != nil {
		t.Fatalf("status: %v %v\n%s", err, jerr, out)
	}
	if (err == nil) != s.InSync {
		t.Errorf("status: in_sync %v but err %v", s.InSync, err)
	}
	return s
}

// The README's walkthrough of a pool, step by step: sync, hook install, a VM start
// takes the pool to vfio-pci, status names the VM, the container may not start; the
// stop gives the GPUs back with the minors the driver chose, and the container's devN
// entries follow; the container starts; a VM start while it runs is refused.
func TestPoolWalkthrough(t *testing.T) {
	root, k, ctStarts := poolRoot(t)
	ctConf := filepath.Join(root, "etc/pve/nodes/kpro6/lxc/129.conf")
	var made []int
	setDeviceNode(t, func(minor int) error {
		made = append(made, minor)
		return os.WriteFile(filepath.Join(root, "dev/nvidia"+itoa(int64(minor))), nil, 0o666)
	})

	// Proxmox in step with the pool: its mapping, VM 131 on it; then the hooks.
	mustRun(t, "--root", root, "pve", "sync", "--apply")
	vmConf, _ := os.ReadFile(filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server/131.conf"))
	if !strings.Contains(string(vmConf), "hostpci0: mapping=pro6000-numa1,pcie=1") {
		t.Fatalf("VM 131 after sync:\n%s", vmConf)
	}
	mustRun(t, "--root", root, "pve", "hook", "install", "--vm", "131", "--apply")
	mustRun(t, "--root", root, "pve", "hook", "install", "--ct", "129", "--apply")
	s := poolStatus(t, root)
	if !s.InSync || len(s.Pools) != 1 || len(s.Pools[0].GPUs) != 4 || s.Pools[0].GPUs[0].HeldBy != 0 {
		t.Fatalf("status at rest: %+v", s)
	}

	// VM start: the pool goes to vfio-pci, the NUMA-0 GPUs stay.
	mustRun(t, "--root", root, "hook", "131", "pre-start")
	for _, a := range numa1GPUs {
		if got := k.state(a); got != "vfio-pci/vfio-pci" {
			t.Errorf("after the VM start %s is %s", a, got)
		}
	}
	if got := k.state("0000:01:00.0"); got != "nvidia/" {
		t.Errorf("a NUMA-0 GPU is %s", got)
	}
	qemuRuns(t, root, map[string][]string{"131": numa1GPUs})
	s = poolStatus(t, root)
	if !s.InSync {
		t.Errorf("status while VM 131 holds the pool: %+v", s)
	}
	for _, gp := range s.Pools[0].GPUs {
		if gp.HeldBy != 131 || gp.Driver != "vfio-pci" {
			t.Errorf("status: %+v", gp)
		}
	}
	if out := mustRun(t, "--root", root, "status"); !strings.Contains(out, "in sync") || !strings.Contains(out, "0000:81:00.0  on vfio-pci, held by VM 131") {
		t.Errorf("status:\n%s", out)
	}
	if _, _, err := run(t, "--root", root, "hook", "129", "pre-start"); err == nil || !strings.Contains(err.Error(), "pool shared: GPU 0000:81:00.0 is held by running VM 131; stop it first (qm stop 131)") {
		t.Errorf("container start while the VM runs: %v", err)
	}
	if out := mustRun(t, "--root", root, "plan"); !strings.Contains(out, "nothing to do") {
		t.Errorf("plan while VM 131 holds the pool:\n%s", out)
	}
	// The boot-time files pin the pool's resting driver: no VM runs at boot.
	if out, _, _ := run(t, "--root", root, "persist", "show"); !strings.Contains(out, `KERNEL=="0000:81:00.0", ATTR{vendor}=="0x10de", ATTR{device}=="0x2bb1", ATTR{driver_override}="nvidia"`) {
		t.Errorf("persist show while VM 131 holds the pool:\n%s", out)
	}
	// A sync meanwhile leaves the container's entries for the VM's stop.
	before, _ := os.ReadFile(ctConf)
	if out := mustRun(t, "--root", root, "pve", "sync", "--apply"); !strings.Contains(out, "container 129 is left as it is while a VM holds GPUs of its pool") {
		t.Errorf("sync while the VM runs:\n%s", out)
	}
	if after, _ := os.ReadFile(ctConf); string(after) != string(before) {
		t.Errorf("sync changed container 129 while the VM held its pool:\n%s", after)
	}

	// VM 140 starts meanwhile with the NUMA-0 GPU 0000:71:00.0, which frees its minor 3.
	vm140 := "hostpci0: host=0000:71:00,pcie=1\nmachine: q35\nmemory: 65536\nname: eval01\n"
	if err := os.WriteFile(filepath.Join(root, "etc/pve/nodes/kpro6/qemu-server/140.conf"), []byte(vm140), 0o640); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "--root", root, "hook", "140", "pre-start")
	qemuRuns(t, root, map[string][]string{"131": numa1GPUs, "140": {"0000:71:00.0", "0000:71:00.1"}})
	if out, _, err := run(t, "--root", root, "status"); err == nil || !strings.Contains(out, "0000:71:00.0 (gpu): on vfio-pci, should be on nvidia") {
		t.Errorf("status while VM 140 holds a GPU of no pool: %v\n%s", err, out)
	}

	// VM 131 stops: the pool comes back, on the lowest free minors 3 to 6, and
	// container 129's devN entries follow: /dev/nvidia7 goes, 3 comes.
	qemuRuns(t, root, map[string][]string{"140": {"0000:71:00.0", "0000:71:00.1"}})
	out := mustRun(t, "--root", root, "hook", "131", "post-stop")
	for _, a := range numa1GPUs {
		// As apply leaves a GPU it sent to nvidia: bound, and pinned there.
		if got := k.state(a); got != "nvidia/nvidia" {
			t.Errorf("after the VM stop %s is %s", a, got)
		}
	}
	if slices.Sort(made); !slices.Equal(made, []int{3, 4, 5, 6}) {
		t.Errorf("device nodes made: %v", made)
	}
	nodes := func() string {
		var ns []string
		for _, l := range devLines(t, ctConf) {
			if m := regexp.MustCompile(`/dev/nvidia\d+`).FindString(l); m != "" {
				ns = append(ns, m)
			}
		}
		slices.Sort(ns)
		return strings.Join(ns, " ")
	}
	if got, want := nodes(), "/dev/nvidia0 /dev/nvidia1 /dev/nvidia2 /dev/nvidia3 /dev/nvidia4 /dev/nvidia5 /dev/nvidia6"; got != want {
		t.Errorf("container 129 passes %s, want %s", got, want)
	}
	if !strings.Contains(out, "/etc/pve/lxc/129.conf: written") {
		t.Errorf("post-stop:\n%s", out)
	}
	if s := poolStatus(t, root); s.Pools[0].GPUs[0].HeldBy != 0 || s.Pools[0].GPUs[0].Driver != "nvidia" {
		t.Errorf("status after the stop: %+v", s)
	}

	// VM 140 stops: its GPU comes back as minor 7, and the container gets it again.
	qemuRuns(t, root, nil)
	mustRun(t, "--root", root, "hook", "140", "post-stop")
	if got, want := nodes(), "/dev/nvidia0 /dev/nvidia1 /dev/nvidia2 /dev/nvidia3 /dev/nvidia4 /dev/nvidia5 /dev/nvidia6 /dev/nvidia7"; got != want {
		t.Errorf("container 129 passes %s, want %s", got, want)
	}
	// The drivers are back at rest; VM 140, written by hand above, lacks the NUMA
	// settings a sync gives a VM, and status says so (only that).
	if s := poolStatus(t, root); s.InSync || len(s.Drift) != 1 || s.Drift[0].Part != "proxmox" || strings.Join(s.Drift[0].Items, " ") != "/etc/pve/qemu-server/140.conf" {
		t.Errorf("status after both stops: %+v", s)
	}

	// Container start: every devN names a GPU on nvidia.
	out = mustRun(t, "--root", root, "hook", "129", "pre-start")
	if n := strings.Count(out, " on nvidia\n"); n != 8 {
		t.Errorf("container start: %d GPUs on nvidia:\n%s", n, out)
	}
	ctStarts()

	// A VM start while the container's python3 holds the GPUs: refused, nothing moved.
	k.writes = nil
	if _, _, err := run(t, "--root", root, "hook", "131", "pre-start"); err == nil || !strings.Contains(err.Error(), "VM 131 start refused") || !strings.Contains(err.Error(), "python3 (pid 48213) in container 129") || !strings.Contains(err.Error(), "pct stop 129") {
		t.Log(err)
		t.Errorf("VM start while the container runs: %v", err)
	}
	if len(k.writes) > 0 {
		t.Errorf("a refused start wrote to the kernel: %v", k.writes)
	}
}

// A VM killed without its post-stop leaves the pool on vfio-pci: status calls it drift,
// and apply with sync_proxmox brings it back to rest and makes the device nodes that the
// container's devN entries need before its sync.
func TestPoolApplyAfterAKilledVM(t *testing.T) {
	root, k, _ := poolRoot(t)
	cfg := filepath.Join(root, "etc/gpusplit/split.toml")
	data, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, append([]byte("sync_proxmox = true\n"), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	var made []int
	setDeviceNode(t, func(minor int) error {
		made = append(made, minor)
		return nil
	})
	mustRun(t, "--root", root, "pve", "sync", "--apply")
	mustRun(t, "--root", root, "hook", "131", "pre-start")
	if out, _, err := run(t, "--root", root, "status"); err == nil || !strings.Contains(out, "0000:81:00.0  on vfio-pci, no VM holds it: it belongs on its vendor's driver") {
		t.Errorf("status after the VM was killed: %v\n%s", err, out)
	}
	out := mustRun(t, "--root", root, "apply", "--yes")
	for _, a := range numa1GPUs {
		if got := k.state(a); got != "nvidia/nvidia" {
			t.Errorf("after apply %s is %s", a, got)
		}
	}
	if slices.Sort(made); !slices.Equal(made, []int{4, 5, 6, 7}) {
		t.Errorf("device nodes made: %v\n%s", made, out)
	}
	if s := poolStatus(t, root); !s.InSync {
		t.Errorf("status after apply: %+v", s)
	}
}
