package cli

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// persistRoot is a writable copy of the sample host, owned by root as an installed host is,
// and a function that takes away what a test put in it besides the sample host's files
// (which it has no /usr, /opt, /tmp or persist's files of), so that the tests can share
// one copy: unpacking takes seconds.
func persistRoot(t *testing.T) (string, func()) {
	t.Helper()
	if os.Getuid() != 0 {
		// The boot unit's binary must be root's; persist's own tests cover every rule
		// for any user.
		t.Skip("needs root: the files of the copy must be root's")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := samplehost.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	return dir, func() {
		for _, p := range []string{"usr", "opt", "tmp", "etc/gpusplit", "etc/systemd", "etc/udev", "etc/modprobe.d"} {
			if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// putBinary writes an executable at p under root, its directories 0755, then gives it mode.
func putBinary(t *testing.T, root, p string, mode os.FileMode) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(full, mode); err != nil {
		t.Fatal(err)
	}
}

// treeSum is every path under root with its kind, mode, owner and contents, to tell that
// nothing changed.
func treeSum(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPersistBinary(t *testing.T) {
	root, reset := persistRoot(t)
	t.Run("refused", func(t *testing.T) { testInstallRefusesBinary(t, root, reset) })
	t.Run("accepted", func(t *testing.T) { testInstallBinary(t, root, reset) })
	t.Run("show", func(t *testing.T) { testShowBinary(t, root, reset) })
	t.Run("sync_proxmox", func(t *testing.T) { testInstallSyncProxmox(t, root, reset) })
}

// persist install refuses, with nothing written, a unit that would run a binary that is
// gone at the next boot or that someone but root can change.
func testInstallRefusesBinary(t *testing.T, root string, reset func()) {
	for _, c := range []struct {
		name   string
		setup  func(t *testing.T, root string)
		binary string // --binary; "" for the default
		want   string
	}{
		{name: "not installed", want: "/usr does not exist",
			setup: func(t *testing.T, root string) {}},
		{name: "the default, a link into /tmp", want: "it leads to /tmp/x/gpusplit, under /tmp",
			setup: func(t *testing.T, root string) {
				putBinary(t, root, "/tmp/x/gpusplit", 0o755)
				os.MkdirAll(filepath.Join(root, "usr/local/bin"), 0o755)
				if err := os.Symlink("/tmp/x/gpusplit", filepath.Join(root, persist.DefaultBinary)); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "not root's", binary: "/opt/gpusplit", want: "/opt/gpusplit is owned by uid 65534, not root",
			setup: func(t *testing.T, root string) {
				putBinary(t, root, "/opt/gpusplit", 0o755)
				if err := os.Chown(filepath.Join(root, "opt/gpusplit"), 65534, 65534); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "group-writable", want: persist.DefaultBinary + " is writable by group or others",
			setup: func(t *testing.T, root string) { putBinary(t, root, persist.DefaultBinary, 0o775) }},
		{name: "in a directory others can write", binary: "/opt/drop/gpusplit", want: "directory /opt/drop is writable by group or others",
			setup: func(t *testing.T, root string) {
				putBinary(t, root, "/opt/drop/gpusplit", 0o755)
				os.Chmod(filepath.Join(root, "opt/drop"), 0o777)
			}},
		{name: "a directory", binary: "/opt/gpusplit", want: "/opt/gpusplit is a directory",
			setup: func(t *testing.T, root string) { os.MkdirAll(filepath.Join(root, "opt/gpusplit"), 0o755) }},
		{name: "relative", binary: "gpusplit", want: "not a clean absolute path",
			setup: func(t *testing.T, root string) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer reset()
			c.setup(t, root)
			before := treeSum(t, root)
			args := []string{"--root", root, "persist", "install", "--vfio", "numa:1"}
			if c.binary != "" {
				args = append(args, "--binary", c.binary)
			}
			for _, dry := range []bool{true, false} {
				a := args
				if dry {
					a = append(a, "--dry-run")
				}
				out, _, err := run(t, a...)
				// The command line adds the way out that its flag gives.
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was written") || !strings.HasSuffix(err.Error(), "0755 gpusplit "+persist.DefaultBinary+"', or name such a file with --binary PATH") {
					t.Errorf("dry run %v: %v, want a refusal naming %q\n%s", dry, err, c.want, out)
				}
				after := treeSum(t, root)
				for p, v := range after {
					if before[p] != v {
						t.Errorf("dry run %v: %s was written", dry, p)
					}
				}
			}
		})
	}
}

func testInstallBinary(t *testing.T, root string, reset func()) {
	for _, c := range []struct {
		name, binary, put, runs, warning string
	}{
		{name: "the default", put: persist.DefaultBinary, runs: persist.DefaultBinary},
		{name: "packaged", binary: "/usr/bin/gpusplit", put: "/usr/bin/gpusplit", runs: "/usr/bin/gpusplit"},
		// Named, a scratch place is allowed, and said.
		{name: "named in /tmp", binary: "/tmp/x/gpusplit", put: "/tmp/x/gpusplit", runs: "/tmp/x/gpusplit", warning: "under /tmp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer reset()
			putBinary(t, root, c.put, 0o755)
			args := []string{"--root", root, "persist", "install", "--vfio", "numa:1", "--yes"}
			if c.binary != "" {
				args = append(args, "--binary", c.binary)
			}
			out, stderr, err := run(t, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			warned := strings.Contains(stderr, "warning: ")
			if !strings.Contains(out, "The unit runs "+c.runs+".") || warned != (c.warning != "") || !strings.Contains(stderr, c.warning) {
				t.Errorf("install said:\n%s\n%s", out, stderr)
			}
			unit, err := os.ReadFile(filepath.Join(root, persist.Unit))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(unit), "\nExecStart="+c.runs+" apply --config ") {
				t.Errorf("the unit does not run %s:\n%s", c.runs, unit)
			}
		})
	}
}

// persist show names the binary, in text and JSON, and what install would find wrong.
func testShowBinary(t *testing.T, root string, reset func()) {
	defer reset()
	putBinary(t, root, "/usr/bin/gpusplit", 0o755)
	if err := os.MkdirAll(filepath.Join(root, "usr/local/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/gpusplit", filepath.Join(root, "usr/local/bin/gpusplit")); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "--root", root, "persist", "show", "--vfio", "numa:1")
	if !strings.HasPrefix(out, "The unit runs /usr/local/bin/gpusplit (-> /usr/bin/gpusplit): root's") {
		t.Errorf("show says:\n%s", out)
	}
	// A refused binary is shown as install's error says it, with the flag's way out.
	out = mustRun(t, "--root", root, "persist", "show", "--vfio", "numa:1", "--binary", "/opt/none")
	if !strings.HasPrefix(out, "The unit would run /opt/none, which install refuses: the boot unit cannot run /opt/none: /opt does not exist.") ||
		!strings.Contains(out, "0755 gpusplit "+persist.DefaultBinary+"', or name such a file with --binary PATH\n") {
		t.Errorf("show of a refused binary says:\n%s", out)
	}
	var doc persist.ShowReport
	if err := json.Unmarshal([]byte(mustRun(t, "--root", root, "persist", "show", "--vfio", "numa:1", "--binary", "/opt/none", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	b := doc.Binary
	if b.Path != "/opt/none" || !b.Checked || b.OK || len(b.Problems) != 1 || !strings.Contains(b.Problems[0], "/opt does not exist") {
		t.Errorf("binary %+v", b)
	}
	if len(doc.Files) != 4 || doc.Files[3].Path != persist.Unit || doc.Files[3].State != "absent" || !strings.Contains(doc.Files[3].Content, "ExecStart=/opt/none ") {
		t.Errorf("files %+v", doc.Files)
	}
	// The sample host is a snapshot: nothing to check, and said.
	demo := mustRun(t, "--demo", "persist", "show", "--vfio", "numa:1")
	if !strings.HasPrefix(demo, "The unit runs "+persist.DefaultBinary+" (not checked") {
		t.Errorf("--demo show says:\n%s", demo)
	}
	if _, _, err := run(t, "--root", sampleArchive(t), "persist", "install", "--vfio", "numa:1", "--dry-run"); err == nil || !strings.Contains(err.Error(), "snapshot cannot be changed") {
		t.Errorf("install --dry-run on a snapshot: %v, want the reason install would stop", err)
	}
}

// With sync_proxmox, the unit waits for pve-cluster.service, which mounts /etc/pve.
func testInstallSyncProxmox(t *testing.T, root string, reset func()) {
	for _, sync := range []bool{false, true} {
		reset()
		putBinary(t, root, persist.DefaultBinary, 0o755)
		config := filepath.Join(t.TempDir(), "split.toml")
		text := "[[group]]\nname = \"vms\"\nselect = [\"numa:1\"]\ndriver = \"vfio-pci\"\n"
		// The fixture is a Proxmox node, where sync_proxmox is on unless the file says no.
		text = fmt.Sprintf("sync_proxmox = %t\n", sync) + text
		if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, stderr, err := run(t, "--root", root, "persist", "install", "--config", config, "--yes"); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		unit, err := os.ReadFile(filepath.Join(root, persist.Unit))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(unit), "\nAfter=pve-cluster.service\n"); got != sync {
			t.Errorf("sync_proxmox %v: unit\n%s", sync, unit)
		}
	}
}
