package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// splitFile writes a desired state file: the reference split of the sample host with
// the vfio-pci group's driver, and extra lines in that group.
func splitFile(t *testing.T, driver, extra string) string {
	t.Helper()
	text := `[[group]]
name = "inference"
select = ["numa:0"]
driver = "nvidia"
mapping = "pro6000"
containers = [129]

[[group]]
name = "vms"
select = ["numa:1"]
driver = "` + driver + `"
` + extra
	p := filepath.Join(t.TempDir(), "split.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The commands that read the desired state, each run as the admin would run it.
var desiredCommands = [][]string{
	{"plan"},
	{"status"},
	{"apply", "--dry-run"},
	{"persist", "show"},
	{"persist", "install", "--dry-run"},
	{"pve", "sync", "--dry-run"},
}

// A driver written the way lsmod spells its module (vfio_pci) matches no driver: the
// GPUs would be left without one and their audio functions on the host. Every command
// that reads the desired state refuses it, where it is written, with the name to use;
// so with a misspelt driver.
func TestDesiredDriverNames(t *testing.T) {
	cases := []struct {
		driver string
		want   []string
	}{
		{"vfio_pci", []string{`:11:10: group "vms": driver "vfio_pci" is not a driver name: did you mean vfio-pci?`, "the module is vfio_pci, its driver registers as vfio-pci"}},
		{"nvidai", []string{`:11:10: group "vms": no driver "nvidai" on this host (not in /sys/bus/pci/drivers`, "did you mean nvidia?"}},
		{"Vfio-Pci", []string{"did you mean vfio-pci?", "case-sensitive"}},
	}
	freshDemo(t) // the dry runs make the demo's scratch copy
	for _, c := range cases {
		config := splitFile(t, c.driver, "vms = [131]\n")
		for _, args := range desiredCommands {
			out, _, err := run(t, append(append([]string{"--demo"}, args...), "--config", config)...)
			if err == nil {
				t.Errorf("driver = %q: gpusplit %s succeeded:\n%s", c.driver, strings.Join(args, " "), out)
				continue
			}
			for _, w := range append([]string{config}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("driver = %q: gpusplit %s: %v\nwant it to hold %q", c.driver, strings.Join(args, " "), err, w)
				}
			}
		}
	}
	// The right spelling plans the reference split, audio functions included.
	out := mustRun(t, "--demo", "plan", "--config", splitFile(t, "vfio-pci", "vms = [131]\n"), "-o", "wide")
	if !strings.Contains(out, "8 moves in 4 IOMMU groups") || !strings.Contains(out, "0000:81:00.1  function") {
		t.Errorf("plan with vfio-pci:\n%s", out)
	}
}

// Each container and VM the file names is a guest of this node; a mapping name is one
// Proxmox accepts. Every problem is named, not only the first.
func TestDesiredGuests(t *testing.T) {
	cases := []struct {
		extra string
		want  []string
	}{
		{"vms = [132]\n", []string{`:12:8: group "vms": no VM 132 on this node kpro6 (no /etc/pve/nodes/kpro6/qemu-server/132.conf)`}},
		{"vms = [131, 120]\n", []string{`:12:13: group "vms": guest 120 is on node kpro5, not on this node kpro6`}},
		{"vms = [131]\ncontainers = [128]\n", []string{`:13:15: group "vms": no container 128 on this node kpro6`}},
		{"containers = [131]\n", []string{`:12:15: group "vms": 131 is a VM of node kpro6, not a container: list it under vms`}},
		{"vms = [99]\n", []string{":12:8:", "99 is not a Proxmox VM id"}},
		{`mapping = "pro6000 vm"` + "\nvms = [131]\n", []string{":12:11:", `mapping = "pro6000 vm" is not a Proxmox mapping id`}},
		{"vms = [132, 133]\n", []string{":12:8:", ":12:13:", "no VM 133"}},
	}
	freshDemo(t) // the dry runs make the demo's scratch copy
	for _, c := range cases {
		config := splitFile(t, "vfio-pci", c.extra)
		for _, args := range desiredCommands {
			_, _, err := run(t, append(append([]string{"--demo"}, args...), "--config", config)...)
			if err == nil {
				t.Errorf("%q: gpusplit %s succeeded", c.extra, strings.Join(args, " "))
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q: gpusplit %s: %v\nwant it to hold %q", c.extra, strings.Join(args, " "), err, w)
				}
			}
		}
	}
}

// Where Proxmox's files are not there (a host without Proxmox, or one whose cluster
// file system is not mounted yet, as at boot before pve-cluster), guests are not looked
// up: moving the GPUs does not need them. Drivers still are.
func TestDesiredWithoutProxmox(t *testing.T) {
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "etc/pve/nodes")); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "--root", root, "plan", "--config", splitFile(t, "vfio-pci", "vms = [132]\n"))
	if !strings.Contains(out, "8 moves") {
		t.Errorf("plan without /etc/pve/nodes:\n%s", out)
	}
	if _, _, err := run(t, "--root", root, "plan", "--config", splitFile(t, "vfio_pci", "vms = [132]\n")); err == nil || !strings.Contains(err.Error(), "did you mean vfio-pci?") {
		t.Errorf("vfio_pci without /etc/pve/nodes: %v", err)
	}
}

// The desired state file is documented by the binary itself: the example that
// gpusplit help split.toml prints, cut out as its text says, is a valid desired state.
func TestHelpSplitTOML(t *testing.T) {
	out := mustRun(t, "help", "split.toml")
	i := strings.Index(out, "\n# /etc/gpusplit/split.toml")
	if i < 0 {
		t.Fatalf("no example in:\n%s", out)
	}
	if _, err := plan.ParseFile("split.toml", []byte(out[i+1:])); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "--root", t.TempDir(), "plan"); err == nil || !strings.Contains(err.Error(), "gpusplit help split.toml shows how") {
		t.Errorf("no desired state: %v", err)
	}
}
