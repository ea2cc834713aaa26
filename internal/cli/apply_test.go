package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
)

// probeHook is a simulated kernel that runs a function at the first probe: something
// that happens on the host while the GPUs move.
type probeHook struct {
	*simKernel
	first sync.Once // the groups probe at once
	once  func()
}

func (k *probeHook) Probe(a pci.Address) error {
	k.first.Do(k.once)
	return k.simKernel.Probe(a)
}

// apply with sync_proxmox is one change of GPUs and Proxmox: a sync that would stop
// stops apply before the first GPU moves, and a sync that fails after the move (here a
// container config made immutable while the GPUs moved) puts the GPUs back.
func TestApplySyncProxmox(t *testing.T) {
	root, reset := pveRoot(t)
	// Nobody holds the GPUs: the sample host's processes are taken out.
	for _, pid := range []string{"2211", "48213"} {
		if err := os.RemoveAll(filepath.Join(root, "proc", pid)); err != nil {
			t.Fatal(err)
		}
	}
	// What apply's journal records of the host.
	for p, body := range map[string]string{"proc/sys/kernel/random/boot_id": "0b2f6c1e-5d7a-4c43-9f1e-2a8d3b6e7c10\n", "etc/machine-id": "5f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(body), 0o644)
	}
	config := filepath.Join(t.TempDir(), "split.toml")
	os.WriteFile(config, []byte("sync_proxmox = true\npersist = false\n\n[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\n"), 0o644)
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(t *testing.T, k bind.Kernel, args ...string) (string, string, error) {
		saved := openKernel
		t.Cleanup(func() { openKernel = saved })
		openKernel = func(*host.Host) (bind.Kernel, error) { return k, nil }
		return run(t, append([]string{"--root", root, "apply", "--config", config}, args...)...)
	}
	gpus := []string{"0000:81:00.0", "0000:91:00.0", "0000:e1:00.0", "0000:f1:00.0"}
	states := func(k *simKernel) string {
		var out []string
		for _, a := range gpus {
			out = append(out, k.state(a))
		}
		return strings.Join(out, " ")
	}

	t.Run("a VM locked by a backup", func(t *testing.T) {
		defer reset()
		edit(t, root, vm131, func(s string) string { return "lock: backup\n" + s })
		before := pveFiles(t, root)
		k := newSimKernel(t, h)
		_, _, err := apply(t, k, "--dry-run")
		if err == nil || !strings.Contains(err.Error(), "131.conf: has lock: backup") {
			t.Errorf("dry run: %v", err)
		}
		_, _, err = apply(t, k, "--yes")
		if err == nil || !strings.HasPrefix(err.Error(), "nothing was changed:\n  proxmox: ") || !strings.Contains(err.Error(), "131.conf: has lock: backup") {
			t.Errorf("apply: %v", err)
		}
		if len(k.writes) > 0 {
			t.Errorf("the kernel was written: %v", k.writes)
		}
		samePVEFiles(t, root, before) // no journal either
	})

	t.Run("the sync fails after the move", func(t *testing.T) {
		defer reset()
		before := pveFiles(t, root)
		sim := newSimKernel(t, h)
		was := states(sim)
		ct := filepath.Join(root, "etc/pve/nodes/kpro6/lxc/129.conf")
		k := &probeHook{simKernel: sim, once: func() { setImmutable(t, ct, true) }}
		t.Cleanup(func() { setImmutable(t, ct, false) })
		_, _, err := apply(t, k, "--yes")
		if err == nil || !strings.HasPrefix(err.Error(), "writing Proxmox's files failed, so everything done before it was put back") || !strings.Contains(err.Error(), "129.conf: is immutable") {
			t.Fatalf("apply: %v", err)
		}
		if got := states(sim); got != was {
			t.Errorf("GPUs %s, were %s", got, was)
		}
		// Every Proxmox file as it was, no backup left; only apply's journal is new.
		if err := os.Remove(filepath.Join(root, "var/lib/gpusplit/journal.json")); err != nil {
			t.Error(err)
		}
		samePVEFiles(t, root, before)
	})

	t.Run("all goes well", func(t *testing.T) {
		defer reset()
		k := newSimKernel(t, h)
		out, stderr, err := apply(t, k, "--yes")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if got := states(k); got != "vfio-pci/vfio-pci vfio-pci/vfio-pci vfio-pci/vfio-pci vfio-pci/vfio-pci" {
			t.Errorf("GPUs %s", got)
		}
		if !strings.Contains(out, "written       /etc/pve/mapping/pci.cfg") || !strings.Contains(out, "wrote 3 files") {
			t.Errorf("output:\n%s", out)
		}
	})
}

// setImmutable sets or clears a file's immutable flag (chattr +i), as an administrator
// or a tool protecting a config would.
func setImmutable(t *testing.T, p string, on bool) {
	t.Helper()
	flag := "-i"
	if on {
		flag = "+i"
	}
	if out, err := exec.Command("chattr", flag, p).CombinedOutput(); err != nil {
		t.Fatalf("chattr %s %s (needs root): %v %s", flag, p, err, out)
	}
}
