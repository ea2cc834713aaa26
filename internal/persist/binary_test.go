package persist

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// tree is a root directory laid out as an installed host: every directory 0755 and every
// file made by mk, all owned by whoever runs the test, who plays root for CheckBinary.
type tree struct {
	t    *testing.T
	root string
}

func newTree(t *testing.T) *tree {
	t.Helper()
	old := rootUID
	rootUID = uint32(os.Getuid())
	t.Cleanup(func() { rootUID = old })
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return &tree{t, root}
}

func (tr *tree) os(p string) string { return filepath.Join(tr.root, p) }

// file writes an executable-looking file at p, its directories 0755.
func (tr *tree) file(p string, mode os.FileMode) {
	tr.t.Helper()
	tr.dir(filepath.Dir(p), 0o755)
	if err := os.WriteFile(tr.os(p), []byte("#!/bin/sh\n"), mode); err != nil {
		tr.t.Fatal(err)
	}
	tr.chmod(p, mode)
}

// dir makes p and its parents, and gives p the mode (parents get 0755).
func (tr *tree) dir(p string, mode os.FileMode) {
	tr.t.Helper()
	if err := os.MkdirAll(tr.os(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	tr.chmod(p, mode)
}

// chmod sets p's mode, umask ignored; sticky is fs.ModeSticky.
func (tr *tree) chmod(p string, mode os.FileMode) {
	tr.t.Helper()
	if err := os.Chmod(tr.os(p), mode); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *tree) link(p, target string) {
	tr.t.Helper()
	tr.dir(filepath.Dir(p), 0o755)
	if err := os.Symlink(target, tr.os(p)); err != nil {
		tr.t.Fatal(err)
	}
}

// disown gives p to another user. Only root can; others skip the case.
func (tr *tree) disown(p string) {
	tr.t.Helper()
	if os.Getuid() != 0 {
		tr.t.Skip("giving a file to another user needs root")
	}
	if err := os.Lchown(tr.os(p), 65534, 65534); err != nil {
		tr.t.Fatal(err)
	}
}

func TestCheckBinary(t *testing.T) {
	const bin = "/usr/local/bin/gpusplit"
	installed := func(tr *tree) { tr.file(bin, 0o755) }
	for _, c := range []struct {
		name     string
		setup    func(*tree)
		path     string
		named    bool   // given with --binary
		problem  string // a problem the check must name; "" for a binary it accepts
		resolved string // where the path leads, when accepted
		note     string // a note it must give, when accepted
	}{
		{name: "installed", setup: installed},
		{name: "installed, named", setup: installed, named: true},
		{name: "packaged, through the merged /usr links", path: "/bin/gpusplit", resolved: "/usr/bin/gpusplit",
			setup: func(tr *tree) { tr.file("/usr/bin/gpusplit", 0o755); tr.link("/bin", "usr/bin") }},
		{name: "a link to /opt", resolved: "/opt/gpusplit/bin/gpusplit",
			setup: func(tr *tree) {
				tr.file("/opt/gpusplit/bin/gpusplit", 0o755)
				tr.link(bin, "../../../opt/gpusplit/bin/gpusplit")
			}},
		{name: "a sticky directory others can write, the file root's", path: "/srv/drop/gpusplit",
			setup: func(tr *tree) { tr.file("/srv/drop/gpusplit", 0o755); tr.chmod("/srv/drop", 0o777|os.ModeSticky) }},
		{name: "/tmp, named", path: "/tmp/x/gpusplit", named: true, note: "under /tmp",
			setup: func(tr *tree) { tr.file("/tmp/x/gpusplit", 0o755); tr.chmod("/tmp", 0o777|os.ModeSticky) }},

		{name: "/tmp, not named", path: "/tmp/x/gpusplit", problem: "/tmp/x/gpusplit is under /tmp",
			setup: func(tr *tree) { tr.file("/tmp/x/gpusplit", 0o755); tr.chmod("/tmp", 0o777|os.ModeSticky) }},
		{name: "/var/tmp", path: "/var/tmp/gpusplit", problem: "under /var/tmp",
			setup: func(tr *tree) { tr.file("/var/tmp/gpusplit", 0o755) }},
		{name: "/home", path: "/home/ops/bin/gpusplit", problem: "under /home",
			setup: func(tr *tree) { tr.file("/home/ops/bin/gpusplit", 0o755) }},
		{name: "/root", path: "/root/gpusplit", problem: "under /root",
			setup: func(tr *tree) { tr.file("/root/gpusplit", 0o700) }},
		{name: "/run", path: "/run/gpusplit", problem: "under /run",
			setup: func(tr *tree) { tr.file("/run/gpusplit", 0o755) }},
		{name: "/dev/shm", path: "/dev/shm/gpusplit", problem: "under /dev/shm",
			setup: func(tr *tree) { tr.file("/dev/shm/gpusplit", 0o755) }},
		{name: "named, but a link into /tmp", named: true, problem: "it leads to /tmp/x/gpusplit, under /tmp",
			setup: func(tr *tree) { tr.file("/tmp/x/gpusplit", 0o755); tr.link(bin, "/tmp/x/gpusplit") }},
		{name: "missing", problem: bin + " does not exist",
			setup: func(tr *tree) { tr.dir("/usr/local/bin", 0o755) }},
		{name: "missing directory", problem: "/usr/local does not exist",
			setup: func(tr *tree) { tr.dir("/usr", 0o755) }},
		{name: "a directory", problem: bin + " is a directory",
			setup: func(tr *tree) { tr.dir(bin, 0o755) }},
		{name: "a file on the way", problem: "/usr/local is not a directory",
			setup: func(tr *tree) { tr.file("/usr/local", 0o755) }},
		{name: "a fifo", problem: bin + " is not a regular file",
			setup: func(tr *tree) {
				tr.dir("/usr/local/bin", 0o755)
				if err := syscall.Mkfifo(tr.os(bin), 0o755); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "not executable", problem: bin + " is not executable",
			setup: func(tr *tree) { tr.file(bin, 0o644) }},
		{name: "group-writable file", problem: bin + " is writable by group or others (-rwxrwxr-x)",
			setup: func(tr *tree) { tr.file(bin, 0o775) }},
		{name: "other-writable file", problem: bin + " is writable by group or others (-rwxr-xrwx)",
			setup: func(tr *tree) { tr.file(bin, 0o757) }},
		{name: "other-writable parent", problem: "directory /usr/local/bin is writable by group or others (drwxrwxrwx)",
			setup: func(tr *tree) { installed(tr); tr.chmod("/usr/local/bin", 0o777) }},
		{name: "group-writable ancestor", problem: "directory /usr is writable by group or others (drwxrwxr-x)",
			setup: func(tr *tree) { installed(tr); tr.chmod("/usr", 0o775) }},
		{name: "other-writable /", problem: "directory / is writable by group or others",
			setup: func(tr *tree) { installed(tr); tr.chmod("/", 0o777) }},
		{name: "other-writable directory a link leads to", problem: "directory /opt/gpusplit is writable by group or others",
			setup: func(tr *tree) {
				tr.file("/opt/gpusplit/gpusplit", 0o755)
				tr.chmod("/opt/gpusplit", 0o777)
				tr.link(bin, "/opt/gpusplit/gpusplit")
			}},
		{name: "not root's", problem: bin + " is owned by uid 65534, not root",
			setup: func(tr *tree) { installed(tr); tr.disown(bin) }},
		{name: "parent not root's", problem: "/usr/local/bin is owned by uid 65534, not root",
			setup: func(tr *tree) { installed(tr); tr.disown("/usr/local/bin") }},
		{name: "a link not root's", problem: "link " + bin + " is owned by uid 65534, not root",
			setup: func(tr *tree) {
				tr.file("/opt/gpusplit", 0o755)
				tr.link(bin, "/opt/gpusplit")
				tr.disown(bin)
			}},
		{name: "a loop of links", problem: "too many levels of symbolic links",
			setup: func(tr *tree) { tr.link(bin, "gpusplit") }},
		{name: "relative", path: "gpusplit", named: true, problem: "not a clean absolute path",
			setup: installed},
		{name: "not clean", path: "/usr/local/bin/../bin/gpusplit", named: true, problem: "not a clean absolute path",
			setup: installed},
		{name: "a space", path: "/opt/my tools/gpusplit", named: true, problem: `has ' ', which systemd would split`,
			setup: func(tr *tree) { tr.file("/opt/my tools/gpusplit", 0o755) }},
		{name: "a specifier", path: "/opt/100%/gpusplit", named: true, problem: `has '%'`,
			setup: func(tr *tree) { tr.file("/opt/100%/gpusplit", 0o755) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := newTree(t)
			c.setup(tr)
			p := c.path
			if p == "" {
				p = bin
			}
			h, err := host.Open(tr.root)
			if err != nil {
				t.Fatal(err)
			}
			b, err := CheckBinary(h, p, c.named)
			if c.problem == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				want := c.resolved
				if want == "" {
					want = p
				}
				if b.Path != p || b.Resolved != want {
					t.Errorf("checked %s -> %s, want %s -> %s", b.Path, b.Resolved, p, want)
				}
				if notes := strings.Join(b.Notes, "\n"); (c.note == "") != (notes == "") || !strings.Contains(notes, c.note) {
					t.Errorf("notes %q, want one with %q", notes, c.note)
				}
				return
			}
			var be *BinaryError
			if !errors.As(err, &be) {
				t.Fatalf("accepted (%+v, %v), want a refusal naming %q", b, err, c.problem)
			}
			if !strings.Contains(be.Error(), c.problem) {
				t.Errorf("refusal %q does not name %q", be.Error(), c.problem)
			}
			if be.Path != p || !strings.Contains(be.Error(), "'install -o root -g root -m 0755 gpusplit "+DefaultBinary+"'") || strings.Contains(be.Error(), " --") {
				t.Errorf("refusal %q does not name the binary and the way out", be.Error())
			}
		})
	}
}

// Every problem is named at once, so that one round of fixes is enough.
func TestCheckBinaryAllProblems(t *testing.T) {
	tr := newTree(t)
	tr.file("/tmp/x/gpusplit", 0o666)
	tr.chmod("/tmp/x", 0o777)
	h, err := host.Open(tr.root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = CheckBinary(h, "/tmp/x/gpusplit", false)
	var be *BinaryError
	if !errors.As(err, &be) || len(be.Problems) != 4 {
		t.Fatalf("got %v, want 4 problems: the directory, the mode, not executable, under /tmp", err)
	}
}

// Without a test playing root, the owner must really be uid 0: a tree made by an
// unprivileged user is refused, and one made by root passes.
func TestCheckBinaryRealRoot(t *testing.T) {
	root := t.TempDir()
	os.Chmod(root, 0o755)
	p := filepath.Join(root, "usr/local/bin/gpusplit")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o755)
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = CheckBinary(h, DefaultBinary, false)
	if os.Getuid() == 0 && err != nil {
		t.Errorf("root's own file refused: %v", err)
	}
	if os.Getuid() != 0 && (err == nil || !strings.Contains(err.Error(), "not root")) {
		t.Errorf("uid %d's file: %v, want refused as not root's", os.Getuid(), err)
	}
}

func TestCheckBinarySnapshot(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckBinary(h, DefaultBinary, false); !errors.Is(err, host.ErrReadOnly) {
		t.Errorf("a snapshot: %v, want it said it cannot be checked", err)
	}
}

// In a simulated host (the demo's scratch copy) the owner of the copy plays root: a
// binary of theirs passes there, and the same tree without the record is refused.
func TestCheckBinarySimulatedOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the tree is given to another user")
	}
	tr := newTree(t)
	tr.file(DefaultBinary, 0o755)
	err := filepath.Walk(tr.root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func() error {
		h, err := host.Open(tr.root)
		if err != nil {
			t.Fatal(err)
		}
		_, err = CheckBinary(h, DefaultBinary, false)
		return err
	}
	if err := check(); err == nil || !strings.Contains(err.Error(), "owned by uid 65534, not root") {
		t.Errorf("a copy of another user's: %v", err)
	}
	if err := os.WriteFile(tr.os(host.SimulationRecord), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := check(); err != nil {
		t.Errorf("the simulated host's own binary: %v", err)
	}
}
