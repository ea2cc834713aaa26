package persist

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gpusplit/gpusplit/internal/host"
)

// DefaultBinary is the gpusplit the boot unit runs when install is not given --binary:
// the installed one, never whatever file happened to run install (a copy in /tmp is gone
// after the next clean-up, and one a user can change would run as root at every boot).
// A package that installs gpusplit elsewhere sets its own path when it builds:
//
//	go build -ldflags "-X github.com/gpusplit/gpusplit/internal/persist.DefaultBinary=/usr/bin/gpusplit" ./cmd/gpusplit
var DefaultBinary = "/usr/local/bin/gpusplit"

// scratchDirs are where a file does not last (cleaned, or a tmpfs, at every boot) or
// belongs to a user: a unit that runs a binary from there breaks one day.
var scratchDirs = []string{"/tmp", "/var/tmp", "/dev/shm", "/run", "/home", "/root"}

// rootUID is the owner a root service may trust: the binary and every directory and link
// on its way must be owned by it. A variable so that a test run by another user can let
// that user play root.
var rootUID uint32

// Binary is the gpusplit a boot unit runs, as CheckBinary found it.
type Binary struct {
	Path     string   // as the unit names it
	Resolved string   // where its links lead, inside the root; Path when it has none
	Notes    []string // allowed, but worth saying
}

// BinaryError is a binary that a boot unit must not run, with every reason found.
type BinaryError struct {
	Path     string
	Problems []string
}

func (e *BinaryError) Error() string { return e.Message("") }

// Message is the refusal with more ways out after the first (", or ..."): the command
// line adds the one its flags give.
func (e *BinaryError) Message(more string) string {
	return fmt.Sprintf("the boot unit cannot run %s: %s. A root service at boot must run a file only root can change: "+
		"install it with 'install -o root -g root -m 0755 gpusplit %s'%s",
		e.Path, strings.Join(e.Problems, "; "), DefaultBinary, more)
}

// CheckBinary checks that a unit run as root at every boot can run p, under h's root, and
// that nobody but root can change what it runs: p must be a regular executable file, owned
// by root and not writable by group or others, and every directory on the way, "/" and
// those where its links lead included, must be owned by root and not writable by group
// or others, unless sticky (as /tmp is: there only the owner of an entry, root, can
// replace it). Links on the way must be owned by root too, since in a sticky directory
// their owner can replace them. These rules have no override.
//
// p, or where it leads, under /tmp, /var/tmp, /dev/shm, /run, /home or /root is refused
// too, unless named says the user named p and p itself lies there: then it is
// allowed, with a note, since a link from elsewhere into such a place is a surprise but a
// path named there is a choice.
//
// Every problem is reported at once, in a *BinaryError. A snapshot cannot be checked (it
// holds no binaries): the error is then host.ErrReadOnly's.
func CheckBinary(h *host.Host, p string, named bool) (Binary, error) {
	b := Binary{Path: p, Resolved: p}
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return b, &BinaryError{p, []string{"it is not a clean absolute path (the unit runs it as the host sees it, from /)"}}
	}
	if err := unitSafe("binary", p); err != nil {
		return b, &BinaryError{p, []string{err.Error()}}
	}
	root, err := h.OSPath("/")
	if err != nil {
		return b, err
	}
	resolved, whole, problems := walkBinary(root, p, trustedUID(h, root))
	if whole {
		b.Resolved = resolved
	}
	for _, d := range scratchDirs {
		switch {
		case !under(p, d) && !under(resolved, d):
		case named && under(p, d):
			b.Notes = append(b.Notes, fmt.Sprintf("%s is under %s, where files do not last or belong to a user: the unit fails at boot once it is gone; %s is the usual place", p, d, DefaultBinary))
		case under(p, d):
			problems = append(problems, fmt.Sprintf("%s is under %s, where files do not last or belong to a user (named as the binary to run, it may stay there)", p, d))
		default:
			problems = append(problems, fmt.Sprintf("it leads to %s, under %s, where files do not last or belong to a user (that path, named as the binary to run, may stay there)", resolved, d))
		}
	}
	if len(problems) > 0 {
		return b, &BinaryError{p, problems}
	}
	return b, nil
}

// trustedUID is the owner that plays root under h: root, but in a simulated host (the
// demo's scratch copy, which a user owns whole and where nothing runs) the owner of its
// root directory, so that the demo's stand-in binary passes as an installed one would.
func trustedUID(h *host.Host, root string) uint32 {
	if !h.Simulated() {
		return rootUID
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return rootUID
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return rootUID
}

// under reports whether the clean absolute path p is dir or lies below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// maxLinks bounds the links followed, as the kernel's MAXSYMLINKS does.
const maxLinks = 40

// walkBinary resolves p inside root one component at a time, as the kernel would at boot
// with root as "/", checking each directory, link and the file it ends at. It returns
// where p leads, whether it got to its end (it stops at the first component it cannot go
// past, and returns that one) and every problem.
func walkBinary(root, p string, trusted uint32) (string, bool, []string) {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	owned := func(name string, fi fs.FileInfo) {
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
			add("cannot tell who owns %s", name)
		case st.Uid != trusted:
			add("%s is owned by uid %d, not root: its owner can change what the unit runs (chown root:root %s)", name, st.Uid, name)
		}
	}
	dir := func(name string, fi fs.FileInfo) {
		owned(name, fi)
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			add("directory %s is writable by group or others (%s): they can replace what is in it (chmod go-w %s)", name, fi.Mode(), name)
		}
	}

	fi, err := os.Lstat(root)
	if err != nil {
		add("%v", err)
		return p, false, problems
	}
	dir("/", fi)
	cur, queue, links := "/", splitPath(p), 0
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		switch c {
		case ".":
			continue
		case "..":
			// cur has no link in it, so its parent is what the kernel finds; above
			// "/" is "/" itself.
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		osPath := filepath.Join(root, next)
		fi, err := os.Lstat(osPath)
		if errors.Is(err, fs.ErrNotExist) {
			add("%s does not exist", next)
			return next, false, problems
		}
		if err != nil {
			add("%s: %v", next, err)
			return next, false, problems
		}
		switch mode := fi.Mode(); {
		case mode&fs.ModeSymlink != 0:
			owned("link "+next, fi)
			if links++; links > maxLinks {
				add("%s: too many levels of symbolic links", p)
				return next, false, problems
			}
			target, err := os.Readlink(osPath)
			if err != nil || target == "" {
				add("link %s cannot be read: %v", next, err)
				return next, false, problems
			}
			if strings.HasPrefix(target, "/") {
				cur = "/"
			}
			queue = append(splitPath(target), queue...)
		case mode.IsDir():
			if len(queue) == 0 {
				add("%s is a directory, not the gpusplit executable", next)
				return next, false, problems
			}
			dir(next, fi)
			cur = next
		case len(queue) > 0:
			add("%s is not a directory", next)
			return next, false, problems
		case !mode.IsRegular():
			add("%s is not a regular file (%s)", next, mode)
			return next, false, problems
		default:
			owned(next, fi)
			if mode.Perm()&0o022 != 0 {
				add("%s is writable by group or others (%s): they can change what the unit runs (chmod go-w %s)", next, mode, next)
			}
			if mode.Perm()&0o111 == 0 {
				add("%s is not executable (%s): chmod 0755 %s", next, mode, next)
			}
			cur = next
		}
	}
	return cur, true, problems
}

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// unitSafe refuses a path that systemd would not take as one literal word in ExecStart=
// or ConditionPathExists=: it splits at spaces, takes quotes and backslashes as escapes,
// and expands % specifiers and $ variables.
func unitSafe(what, p string) error {
	for _, r := range p {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("/._+-,:@=~", r):
		default:
			return fmt.Errorf("the %s path %q has %q, which systemd would split or expand in the unit: use a path of letters, digits and /._+-,:@=~", what, p, r)
		}
	}
	return nil
}
