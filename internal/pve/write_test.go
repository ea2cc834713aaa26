package pve

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// refCase is the reference case laid out in a directory: the sample host, and the edits
// of pve sync --vfio numa:1 (pci.cfg, container 129, VM 131).
type refCase struct {
	root  string
	h     *host.Host
	edits []Edit
	// before is every file of the root's etc/pve and var/lib/gpusplit as it was.
	before map[string]string
}

// refEdits are the reference case's edits, computed once from the embedded sample host:
// a directory laid out from it holds the same files.
var refEdits = sync.OnceValues(func() ([]Edit, error) {
	h, err := samplehost.Open()
	if err != nil {
		return nil, err
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		return nil, err
	}
	sels, err := pci.ParseSelectors("numa:1")
	if err != nil {
		return nil, err
	}
	d := plan.ForVFIO([][]pci.Selector{sels})
	p, err := plan.Make(inv, d)
	if err != nil {
		return nil, err
	}
	changes, _, err := Sync(h, inv, p, d, SyncOptions{})
	if err != nil {
		return nil, err
	}
	var edits []Edit
	for _, c := range changes {
		edits = append(edits, Edit{Path: c.Path, Old: c.Old, New: c.New})
	}
	if len(edits) != 3 {
		return nil, fmt.Errorf("the reference case changes %d files, want 3", len(edits))
	}
	return edits, nil
})

// refTemplate is the sample host laid out once; each case copies its /etc, all that the
// writer reads or writes.
var refTemplate = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "gpusplit-pve-ref-")
	if err != nil {
		return "", err
	}
	refTemplateDir = dir
	return dir, samplehost.Unpack(dir)
})

var refTemplateDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if refTemplateDir != "" {
		os.RemoveAll(refTemplateDir)
	}
	os.Exit(code)
}

func newRefCase(t *testing.T) *refCase {
	t.Helper()
	edits, err := refEdits()
	if err != nil {
		t.Fatal(err)
	}
	template, err := refTemplate()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(template, "etc"), root).CombinedOutput(); err != nil {
		t.Fatalf("copying the sample host's /etc: %v %s", err, out)
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	rc := &refCase{root: root, h: h, edits: slices.Clone(edits)}
	rc.before = rc.files(t)
	return rc
}

// files reads every regular file under etc/pve and var/lib/gpusplit, and the lock
// directories, so that a test sees any file written, left behind or removed.
func (rc *refCase) files(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, top := range []string{"etc/pve", "var/lib/gpusplit", "var/lock", "run/lock"} {
		filepath.Walk(filepath.Join(rc.root, top), func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(rc.root, p)
			switch {
			case fi.Mode().IsRegular() && strings.Contains(p, "/lock/"):
				// Lock files are made by whoever locks first, and stay, as Proxmox leaves them.
			case fi.Mode().IsRegular():
				b, _ := os.ReadFile(p)
				out[rel] = string(b)
			case fi.IsDir() && strings.HasPrefix(rel, "etc/pve/priv/lock/"):
				out[rel] = "(lock directory)"
			}
			return nil
		})
	}
	return out
}

// unchanged fails the test unless every file is byte for byte as it was.
func (rc *refCase) unchanged(t *testing.T) {
	t.Helper()
	now := rc.files(t)
	for p, was := range rc.before {
		if is, ok := now[p]; !ok {
			t.Errorf("%s was removed", p)
		} else if is != was {
			t.Errorf("%s changed:\n%s", p, Diff(p, was, is))
		}
	}
	for p := range now {
		if _, ok := rc.before[p]; !ok {
			t.Errorf("%s was left behind", p)
		}
	}
}

func (rc *refCase) writer() *Writer {
	return &Writer{H: rc.h, LockTimeout: 300 * time.Millisecond}
}

func outcomes(res []FileResult) string {
	var out []string
	for _, r := range res {
		out = append(out, fmt.Sprintf("%s=%s", filepath.Base(r.Path), r.Outcome))
	}
	return strings.Join(out, " ")
}

// The transaction on the reference case writes all three files, with backups.
func TestCommitReferenceCase(t *testing.T) {
	rc := newRefCase(t)
	res, err := rc.writer().Commit(rc.edits)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); got != "pci.cfg=written 129.conf=written 131.conf=written" {
		t.Fatalf("outcomes %s", got)
	}
	for i, e := range rc.edits {
		got, err := rc.h.ReadFile(e.Path)
		if err != nil || string(got) != e.New {
			t.Errorf("%s is not the new version (%v)", e.Path, err)
		}
		b, err := os.ReadFile(filepath.Join(rc.root, res[i].Backup))
		if err != nil || string(b) != e.Old {
			t.Errorf("%s: backup %s is not the previous version (%v)", e.Path, res[i].Backup, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(rc.root, "etc/pve/*/*.tmp.*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if _, err := os.Stat(filepath.Join(rc.root, "etc/pve/priv/lock/file-mapping_pci_cfg")); err == nil {
		t.Error("the cluster lock was not released")
	}
	// Again: nothing to do, nothing written.
	res, err = rc.writer().Commit([]Edit{{Path: MappingPath, Old: rc.edits[0].New, New: rc.edits[0].New}})
	if err != nil || len(res) != 0 {
		t.Errorf("a no-op commit: %v %v", res, err)
	}
}

// Every lock, write and rename of the reference case, failed in turn: every file stays
// byte for byte as it was, and the report says what happened to each.
func TestCommitFaultInjection(t *testing.T) {
	// Count the steps of a clean run first.
	counts := map[string]int{}
	rc := newRefCase(t)
	w := rc.writer()
	w.fault = func(step string, n int) error { counts[step] = n; return nil }
	if _, err := w.Commit(rc.edits); err != nil {
		t.Fatal(err)
	}
	// One cluster lock and two guest locks; three staged files and three backups; three renames.
	if counts[stepLock] != 3 || counts[stepWrite] != 6 || counts[stepRename] != 3 {
		t.Fatalf("steps of a clean run: %v", counts)
	}
	injected := errors.New("injected failure")
	for _, step := range []string{stepLock, stepWrite, stepRename} {
		for k := 1; k <= counts[step]; k++ {
			t.Run(fmt.Sprintf("%s-%d", step, k), func(t *testing.T) {
				rc := newRefCase(t)
				w := rc.writer()
				w.fault = func(s string, n int) error {
					if s == step && n == k {
						return injected
					}
					return nil
				}
				res, err := w.Commit(rc.edits)
				var tx *TxError
				if !errors.As(err, &tx) {
					t.Fatalf("error %v, want a transaction error", err)
				}
				rc.unchanged(t)
				want := "pci.cfg=untouched 129.conf=untouched 131.conf=untouched"
				if step == stepRename {
					// The files renamed before the failing one are put back.
					parts := strings.Fields(want)
					for i := 0; i < k-1; i++ {
						parts[i] = strings.Replace(parts[i], "untouched", "restored", 1)
					}
					want = strings.Join(parts, " ")
				}
				if got := outcomes(res); got != want {
					t.Errorf("outcomes %s, want %s", got, want)
				}
				msg := err.Error()
				if !strings.Contains(msg, "injected failure") && step != stepLock {
					t.Errorf("the error hides the failure: %s", msg)
				}
				if !strings.Contains(msg, "nothing was written") && !strings.Contains(msg, "every file is as it was") {
					t.Errorf("the error does not say the files are as they were: %s", msg)
				}
				if strings.Contains(msg, "NOT put back") {
					t.Errorf("%s", msg)
				}
			})
		}
	}
}

// A file that cannot be put back is reported as such, with its backup.
func TestCommitRestoreFails(t *testing.T) {
	rc := newRefCase(t)
	w := rc.writer()
	w.fault = func(s string, n int) error {
		// The third rename (VM 131) fails, and so does the first rename back (container 129's).
		if s == stepRename && (n == 3 || n == 4) {
			return errors.New("injected failure")
		}
		return nil
	}
	res, err := w.Commit(rc.edits)
	if err == nil {
		t.Fatal("no error")
	}
	if got := outcomes(res); got != "pci.cfg=restored 129.conf=not restored 131.conf=untouched" {
		t.Fatalf("outcomes %s", got)
	}
	msg := err.Error()
	if !strings.Contains(msg, "NOT put back: /etc/pve/lxc/129.conf") || strings.Contains(msg, "every file is as it was") {
		t.Errorf("message: %s", msg)
	}
	b, berr := os.ReadFile(filepath.Join(rc.root, res[1].Backup))
	if berr != nil || string(b) != rc.edits[1].Old {
		t.Errorf("the backup of the file not put back (%q): %v", res[1].Backup, berr)
	}
	got, _ := rc.h.ReadFile(MappingPath)
	if string(got) != rc.edits[0].Old {
		t.Error("pci.cfg was not put back")
	}
}

// holdLock runs a second process that holds one of Proxmox's locks until the test ends
// (or release is called), as another Proxmox tool would.
func holdLock(t *testing.T, lockFile string) (release func()) {
	t.Helper()
	os.MkdirAll(filepath.Dir(lockFile), 0o755)
	cmd := exec.Command("flock", lockFile, "sh", "-c", "echo locked; read x")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("flock(1), from util-linux, is needed for this test: %v", err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("flock did not take %s: %q", lockFile, line)
	}
	// A test may release it from a goroutine of its own while the cleanup does too.
	var once sync.Once
	release = func() {
		once.Do(func() {
			stdin.Close()
			cmd.Wait()
		})
	}
	t.Cleanup(release)
	return release
}

func setFlags(t *testing.T, p string, flags uint32) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const fsIocSet = 0x40086602
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIocSet, uintptr(unsafe.Pointer(&flags))); e != 0 {
		t.Fatalf("setting the inode flags of %s (needs root and a file system with chattr): %v", p, e)
	}
}

// Real conditions that stop a transaction before its first write: each leaves every
// file as it was, names the file and the reason, and marks every file untouched.
func TestCommitRefusals(t *testing.T) {
	vmConf := "etc/pve/nodes/kpro6/qemu-server/131.conf"
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, rc *refCase)
		want  string
	}{
		{"VM locked by a backup", func(t *testing.T, rc *refCase) {
			p := filepath.Join(rc.root, vmConf)
			b, _ := os.ReadFile(p)
			locked := "lock: backup\n" + string(b)
			os.WriteFile(p, []byte(locked), 0o640)
			rc.edits[2].Old = locked
			rc.edits[2].New = "lock: backup\n" + rc.edits[2].New
			rc.before = rc.files(t)
		}, "131.conf: has lock: backup"},
		{"cluster lock held by another process", func(t *testing.T, rc *refCase) {
			if out, err := exec.Command("mkdir", "-p", filepath.Join(rc.root, "etc/pve/priv/lock/file-mapping_pci_cfg")).CombinedOutput(); err != nil {
				t.Fatal(err, string(out))
			}
			rc.before = rc.files(t)
		}, "pci.cfg is locked by another writer for more than"},
		{"VM's lock held by another process", func(t *testing.T, rc *refCase) {
			holdLock(t, filepath.Join(rc.root, "var/lock/qemu-server/lock-131.conf"))
			rc.before = rc.files(t)
		}, "lock-131.conf: held by another Proxmox tool for more than"},
		{"container's config immutable", func(t *testing.T, rc *refCase) {
			p := filepath.Join(rc.root, "etc/pve/nodes/kpro6/lxc/129.conf")
			setFlags(t, p, fsImmutable)
			t.Cleanup(func() { setFlags(t, p, 0) })
		}, "129.conf: is immutable (chattr +i)"},
		{"VM's config changed while waiting for its lock", func(t *testing.T, rc *refCase) {
			release := holdLock(t, filepath.Join(rc.root, "var/lock/qemu-server/lock-131.conf"))
			go func() {
				time.Sleep(100 * time.Millisecond)
				p := filepath.Join(rc.root, vmConf)
				b, _ := os.ReadFile(p)
				os.WriteFile(p, append(b, "tags: edited\n"...), 0o640)
				release()
			}()
			time.Sleep(200 * time.Millisecond)
			rc.before = rc.files(t)
		}, "131.conf: changed since gpusplit read it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newRefCase(t)
			tc.setup(t, rc)
			res, err := rc.writer().Commit(rc.edits)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "nothing was written") {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if got := outcomes(res); got != "pci.cfg=untouched 129.conf=untouched 131.conf=untouched" {
				t.Errorf("outcomes %s", got)
			}
			rc.unchanged(t)
		})
	}
}

// A directory on a full file system: staging the new version fails before any file was
// replaced.
func TestCommitFullFileSystem(t *testing.T) {
	rc := newRefCase(t)
	dir := filepath.Join(rc.root, "etc/pve/nodes/kpro6/qemu-server")
	saved := map[string][]byte{}
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		saved[n.Name()], _ = os.ReadFile(filepath.Join(dir, n.Name()))
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16k"); err != nil {
		t.Fatalf("mounting a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	for n, b := range saved {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	// Fill it up.
	fill, _ := os.Create(filepath.Join(dir, "fill"))
	fill.Write(make([]byte, 64<<10))
	fill.Close()
	rc.before = rc.files(t)
	res, err := rc.writer().Commit(rc.edits)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "every file is as it was") {
		t.Fatalf("error %v", err)
	}
	if got := outcomes(res); got != "pci.cfg=untouched 129.conf=untouched 131.conf=untouched" {
		t.Errorf("outcomes %s", got)
	}
	rc.unchanged(t)
}

// The dry run's check reports every reason at once, and takes no lock.
func TestCheckReportsEveryProblem(t *testing.T) {
	rc := newRefCase(t)
	holdLock(t, filepath.Join(rc.root, "var/lock/qemu-server/lock-131.conf"))
	os.MkdirAll(filepath.Join(rc.root, "etc/pve/priv/lock/file-mapping_pci_cfg"), 0o700)
	ct := filepath.Join(rc.root, "etc/pve/nodes/kpro6/lxc/129.conf")
	setFlags(t, ct, fsImmutable)
	t.Cleanup(func() { setFlags(t, ct, 0) })
	rc.edits = append(rc.edits, Edit{Path: "/etc/pve/qemu-server/131.conf", Old: rc.edits[2].Old, New: "x"})
	rc.before = rc.files(t)
	probs := rc.writer().Check(rc.edits)
	var got []string
	for _, p := range probs {
		got = append(got, p.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"file-mapping_pci_cfg: is held by another writer",
		"lock-131.conf: is held by another Proxmox tool now",
		"129.conf: is immutable",
		"131.conf: changed twice in one transaction",
		"131.conf: the new version would not read back",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	rc.unchanged(t)
}

// Too large a result is refused before any lock.
func TestCommitTooLarge(t *testing.T) {
	rc := newRefCase(t)
	rc.edits[1].New += "description: " + strings.Repeat("x", MaxFile) + "\n"
	if _, err := rc.writer().Commit(rc.edits); err == nil || !strings.Contains(err.Error(), "129.conf: would be larger than 1 MiB") {
		t.Fatalf("error %v", err)
	}
	rc.unchanged(t)
}

// A cluster lock older than pmxcfs keeps one is stale and taken over.
func TestCommitTakesOverStaleLock(t *testing.T) {
	rc := newRefCase(t)
	lock := filepath.Join(rc.root, "etc/pve/priv/lock/file-mapping_pci_cfg")
	os.MkdirAll(lock, 0o700)
	os.Chtimes(lock, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
	if _, err := rc.writer().Commit(rc.edits); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lock); err == nil {
		t.Error("the lock is left")
	}
}
