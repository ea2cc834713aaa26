package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// heldSample is the sample host with its boot disk in use, as on a live node: the NVMe
// controller 0000:12:00.0 holds nvme0n1, whose p1 is /boot/efi and p2 /; and the HDMI
// audio function of GPU 0000:81:00.0 is held open by a sound server. Files and links are
// shaped as the kernel makes them.
func heldSample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	write := func(p, body string) {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, target string) {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	disk := "sys/devices/pci0000:10/0000:10:03.1/0000:12:00.0/nvme/nvme0/nvme0n1"
	write(disk+"/dev", "259:0\n")
	write(disk+"/nvme0n1p1/dev", "259:1\n")
	write(disk+"/nvme0n1p1/partition", "1\n")
	write(disk+"/nvme0n1p2/dev", "259:2\n")
	write(disk+"/nvme0n1p2/partition", "2\n")
	link("sys/block/nvme0n1", "../devices/pci0000:10/0000:10:03.1/0000:12:00.0/nvme/nvme0/nvme0n1")
	write("proc/self/mountinfo", "26 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro\n"+
		"27 26 259:1 / /boot/efi rw,relatime shared:2 - vfat /dev/nvme0n1p1 rw,fmask=0022\n"+
		"28 26 0:24 / /proc rw,nosuid,nodev,noexec,relatime shared:3 - proc proc rw\n")
	card := "sys/devices/pci0000:80/0000:80:01.1/0000:81:00.1/sound/card1"
	write(card+"/controlC1/uevent", "MAJOR=116\nMINOR=32\nDEVNAME=snd/controlC1\n")
	write(card+"/pcmC1D3p/uevent", "MAJOR=116\nMINOR=35\nDEVNAME=snd/pcmC1D3p\n")
	write("proc/1900/comm", "pipewire\n")
	write("proc/1900/cmdline", "/usr/bin/pipewire\x00")
	write("proc/1900/cgroup", "0::/user.slice/user-1000.slice/user@1000.service/session.slice/pipewire.service\n")
	link("proc/1900/fd/12", "/dev/snd/controlC1")
	return dir
}

// The root disk's controller is in use: plan says so, and apply, dry run or not,
// refuses with the holder named and the way to release it, changing nothing.
func TestPlanApplyRefuseMountedDisk(t *testing.T) {
	dir := heldSample(t)
	args := []string{"--root", dir, "--devices", "class:0x01"}

	// -o wide: the holders and release lines whole, as at any width that holds them.
	out := mustRun(t, append(args, "plan", "--vfio", "0000:12:00.0", "-o", "wide")...)
	for _, want := range []string{
		"mount /boot/efi (nvme0n1p1); mount / (nvme0n1p2)",
		"apply would stop, changing nothing:\n  drivers: in use: 0000:12:00.0; release what holds it, then run again:\n",
		"  mount / (nvme0n1p2): none while the host runs from it: it is the root file system",
		"  mount /boot/efi (nvme0n1p1): umount /boot/efi",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	var doc struct {
		Actions []struct {
			Device  string `json:"device"`
			Holders []struct {
				Kind    string  `json:"kind"`
				What    string  `json:"what"`
				Name    string  `json:"name"`
				Block   *string `json:"block_device"`
				Release string  `json:"release"`
				PID     *int    `json:"pid"`
			} `json:"holders"`
		} `json:"actions"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, append(args, "plan", "--vfio", "0000:12:00.0", "-o", "json")...)), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Actions) != 1 || len(doc.Actions[0].Holders) != 2 {
		t.Fatalf("plan JSON: %+v", doc)
	}
	if h := doc.Actions[0].Holders[0]; h.Kind != "mount" || h.Name != "/boot/efi" || h.Block == nil || *h.Block != "nvme0n1p1" ||
		h.What != "/boot/efi mounted from nvme0n1p1" || h.Release != "umount /boot/efi" || h.PID != nil {
		t.Errorf("holder in JSON: %+v", h)
	}

	for _, extra := range [][]string{{"--dry-run"}, {"--yes"}} {
		k := newSimKernel(t, mustHost(t, dir))
		k.use(t)
		stdout, _, err := run(t, append(append(args, "apply", "--vfio", "0000:12:00.0"), extra...)...)
		if err == nil {
			t.Fatalf("apply %v of the mounted root disk's controller succeeded:\n%s", extra, stdout)
		}
		for _, want := range []string{
			"nothing was changed",
			"drivers: in use: 0000:12:00.0; release what holds it, then run again:\n      mount /boot/efi (nvme0n1p1): umount /boot/efi\n      mount / (nvme0n1p2): none while the host runs from it",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("apply %v: error lacks %q:\n%v", extra, want, err)
			}
		}
		if len(k.writes) != 0 {
			t.Errorf("apply %v wrote %v", extra, k.writes)
		}
		if _, err := os.Stat(filepath.Join(dir, "var/lib/gpusplit/journal.json")); err == nil {
			t.Errorf("apply %v wrote a journal", extra)
		}
	}
}

// What moves with a GPU is checked too: its HDMI audio function held by a sound server
// makes the GPU's move refused, and inventory shows it on the function's row.
func TestFunctionHolders(t *testing.T) {
	dir := heldSample(t)
	// -o wide: every column whole, so that the row is read at fixed places.
	out := mustRun(t, "--root", dir, "plan", "--vfio", "0000:81:00.0", "-o", "wide")
	for _, want := range []string{
		"0000:81:00.1  function  GB202 High Definition Audio Controller      1     snd_hda_intel  vfio-pci  pipewire[1900]",
		"  pipewire[1900]: stop it (kill 1900) or the service that runs it",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := run(t, "--root", dir, "apply", "--vfio", "0000:81:00.0", "--dry-run"); err == nil || !strings.Contains(err.Error(), "in use: 0000:81:00.0, 0000:81:00.1; release what holds them") || !strings.Contains(err.Error(), "pipewire[1900]: stop it") {
		t.Errorf("apply --dry-run: %v", err)
	}
	inv := mustRun(t, "--root", dir, "inventory", "-o", "wide")
	for _, line := range strings.Split(inv, "\n") {
		if strings.Contains(line, "└ 0000:81:00.1") != strings.HasSuffix(line, "  72"+strings.Repeat(" ", 55)+"pipewire[1900]") {
			t.Errorf("inventory line %q: the function's holder belongs in the HELD BY column of its row, and only there", line)
		}
	}
	var doc struct {
		GPUs []struct {
			Address   string `json:"address"`
			Functions []struct {
				Address string `json:"address"`
				Holders []struct {
					Kind    string   `json:"kind"`
					PID     *int     `json:"pid"`
					Command string   `json:"command"`
					Files   []string `json:"files"`
				} `json:"holders"`
			} `json:"functions"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--root", dir, "inventory", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	for _, g := range doc.GPUs {
		for _, f := range g.Functions {
			held := len(f.Holders) > 0
			if held != (f.Address == "0000:81:00.1") {
				t.Errorf("%s: holders %+v", f.Address, f.Holders)
			}
			if held && (f.Holders[0].Kind != "process" || f.Holders[0].PID == nil || *f.Holders[0].PID != 1900 || f.Holders[0].Files[0] != "/dev/snd/controlC1") {
				t.Errorf("%s: holder %+v", f.Address, f.Holders[0])
			}
		}
	}
}

func mustHost(t *testing.T, dir string) *host.Host {
	t.Helper()
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
