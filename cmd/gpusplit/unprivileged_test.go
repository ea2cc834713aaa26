package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Every command that changes the live host, run by a user who is not root, says that it
// needs root before it reads or changes anything, and exits 1. The binary runs as the
// user nobody (the tests run as root; run as another user, they are that user already).
func TestUnprivilegedWrites(t *testing.T) {
	// A directory the user nobody can enter (t.TempDir's parent is root's alone).
	dir, err := os.MkdirTemp("", "gpusplit-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "gpusplit")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pve", "sync", "--vfio", "numa:1", "--apply"}, "pve sync needs root (it writes /etc/pve and takes Proxmox's locks)"},
		{[]string{"pve", "vm-layout", "--vm", "131", "--apply"}, "pve vm-layout needs root"},
		{[]string{"persist", "install", "--vfio", "numa:1"}, "persist install needs root"},
		{[]string{"persist", "remove"}, "persist remove needs root"},
		{[]string{"apply", "--vfio", "numa:1", "--yes"}, "apply needs root (it rebinds PCI devices through /sys"},
		{[]string{"rollback", "--yes"}, "rollback needs root"},
		{[]string{"pve", "backups", "restore", "etc_pve_mapping_pci.cfg.20261201T101500.000000000Z"}, "pve backups restore needs root"},
		{[]string{"pve", "backups", "prune", "--keep", "1"}, "pve backups prune needs root"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Dir = dir
			if os.Geteuid() == 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "nothing was changed") {
				t.Fatalf("exit %v:\n%s", err, out)
			}
		})
	}
}
