package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// TestMain lets a test run gpusplit as another process of this test binary: with
// GPUSPLIT_TEST_ARGS set, the binary is gpusplit (runAsNobody). Tables are laid out at
// 100 columns (COLUMNS=100, as no test writes to a terminal), and standard input is no
// terminal, whatever the shell running the tests has set.
//
// The demo's cache is an empty directory of the tests', so that --demo reads the
// embedded sample host and not a scratch copy of the user's; a test that writes under
// --demo gives itself a cache of its own (freshDemo), and one that does not is caught.
func TestMain(m *testing.M) {
	if a, ok := os.LookupEnv("GPUSPLIT_TEST_ARGS"); ok {
		os.Exit(Main(strings.Split(a, "\x1f")))
	}
	cache, err := os.MkdirTemp("", "gpusplit-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	os.Setenv("COLUMNS", "100")
	// No test asks a question: standard input is no terminal, whatever runs the tests.
	if null, err := os.Open(os.DevNull); err == nil {
		os.Stdin = null
	}
	code := m.Run()
	if _, err := os.Lstat(filepath.Join(cache, "gpusplit")); err == nil {
		fmt.Fprintln(os.Stderr, "a test wrote under --demo to the package's demo cache: give it its own (freshDemo)")
		code = 1
	}
	os.RemoveAll(cache)
	os.Exit(code)
}

// runAsNobody runs gpusplit with args as user nobody (uid and gid 65534), from a copy of
// this test binary that nobody may run, and returns its output and exit status.
func runAsNobody(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return runAsNobodyWith(t, nil, args...)
}

// runAsNobodyWith is runAsNobody with more of the environment (NAME=value).
func runAsNobodyWith(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs gpusplit as user nobody")
	}
	bin := filepath.Join(openTempDir(t), "gpusplit")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"GPUSPLIT_TEST_ARGS=" + strings.Join(args, "\x1f"), "HOME=/nonexistent", "PATH=/usr/bin:/bin"}, env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v as nobody: %v", args, err)
	}
	return string(out), code
}

// openTempDir is a temporary directory that user nobody may enter (t.TempDir's are 0700).
func openTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gpusplit-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A user other than root is stopped before anything starts, with the directory that
// cannot be written named with its owner: on a copy of the host that root extracted,
// by each command that writes; on the live host reached by another spelling of /, by
// "needs root". On a copy that user owns, the same commands run.
func TestUnprivilegedRunsStopBeforeStarting(t *testing.T) {
	rootOwned := filepath.Join(openTempDir(t), "host")
	if err := samplehost.Unpack(rootOwned); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rootOwned, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pve", "sync", "--apply"}, "pve sync cannot write /etc/pve/qemu-server under --root " + rootOwned + ": directory " + rootOwned + "/etc/pve/nodes/kpro6/qemu-server (owner uid 0, mode 0755) is not writable by uid 65534"},
		{[]string{"pve", "vm-layout", "--vm", "131", "--apply"}, "pve vm-layout cannot write /etc/pve/qemu-server"},
		{[]string{"pve", "p2p-clique", "--vm", "131", "--apply"}, "pve p2p-clique cannot write /etc/pve/qemu-server"},
		{[]string{"pve", "hook", "install", "--vm", "131", "--apply"}, "pve hook install cannot write /etc/pve/qemu-server"},
		{[]string{"pve", "backups", "prune"}, "pve backups prune cannot write /var/lib/gpusplit/backup under --root " + rootOwned + ": it does not exist, and " + rootOwned + " (owner uid 0, mode 0755), where it would be made, is not writable by uid 65534"},
		{[]string{"hook", "release", "0000:01:00.0"}, "hook release cannot write /run/gpusplit/quarantine"},
		{[]string{"persist", "install"}, "persist install cannot write /etc/udev/rules.d"},
	} {
		out, code := runAsNobody(t, append([]string{"--root", rootOwned}, c.args...)...)
		if code == 0 || !strings.Contains(out, c.want) || !strings.Contains(out, "nothing was changed") || strings.Count(out, "\n") != 1 {
			t.Errorf("gpusplit %s as nobody on root's copy: exit %d, want one line saying %q:\n%s", strings.Join(c.args, " "), code, c.want, out)
		}
	}
	// The live host, by a spelling of / other than "/".
	for _, root := range []string{"/.", "//", "/proc/self/root"} {
		out, code := runAsNobody(t, "--root", root, "pve", "sync", "--apply")
		if code == 0 || !strings.Contains(out, "pve sync needs root") {
			t.Errorf("pve sync --apply as nobody with --root %s: exit %d\n%s", root, code, out)
		}
	}
	// nobody's own copy: the check lets the command run and write.
	owned := filepath.Join(openTempDir(t), "host")
	if err := samplehost.Unpack(owned); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(owned, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	}); err != nil {
		t.Fatal(err)
	}
	out, code := runAsNobody(t, "--root", owned, "pve", "vm-layout", "--vm", "131", "--apply")
	if code != 0 || !strings.Contains(out, "wrote /etc/pve/qemu-server/131.conf") {
		t.Errorf("vm-layout --apply as nobody on nobody's copy: exit %d\n%s", code, out)
	}
}
