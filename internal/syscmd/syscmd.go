// Package syscmd runs the host's own commands (systemctl, modprobe, nvidia-modprobe) the
// way a program that runs as root, unattended, must: found in root's directories by an
// absolute path, never through $PATH, which a hookscript inherits from whoever started
// the guest; and bounded in time, since a command that hangs would hang a guest's start,
// which Proxmox gives no limit.
package syscmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Dirs are where a command is looked for, in order: where Debian and Proxmox VE install
// systemctl, kmod's modprobe and the NVIDIA driver's nvidia-modprobe. Tests set their own.
var Dirs = []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// ErrNotInstalled is wrapped by the error for a command that is in none of Dirs.
var ErrNotInstalled = errors.New("not installed")

// Timeout bounds one command when the caller's context has no earlier deadline.
const Timeout = 30 * time.Second

// maxOutput caps what is kept of a command's output for its error message.
const maxOutput = 4096

// Path is the absolute path of the command name: the first regular, executable file of
// that name in Dirs.
func Path(name string) (string, error) {
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%q is not a command name", name)
	}
	for _, d := range Dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is %w: no executable %s in %s", name, ErrNotInstalled, name, strings.Join(Dirs, ", "))
}

// Run runs name with args, found by Path, and waits until it ends, ctx ends, or timeout
// (Timeout when 0) has passed, whichever is first; then the command and its children are
// killed. The error says which command, why, and the start of what it printed; it wraps
// the *exec.ExitError of a command that ended with a status other than 0.
func Run(ctx context.Context, timeout time.Duration, name string, args ...string) error {
	p, err := Path(name)
	if err != nil {
		return err
	}
	if timeout <= 0 {
		timeout = Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, args...)
	// Its own process group, killed whole: a script's children would outlive it and
	// keep its output open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out capped
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = []string{"PATH=" + strings.Join(Dirs, ":"), "LC_ALL=C"}
	err = cmd.Run()
	line := strings.TrimSpace(p + " " + strings.Join(args, " "))
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return fmt.Errorf("%s did not finish within its time and was killed", line)
	case ctx.Err() != nil:
		return fmt.Errorf("%s was stopped: %w", line, ctx.Err())
	}
	if msg := strings.TrimSpace(out.String()); msg != "" {
		return fmt.Errorf("%s: %w: %s", line, err, msg)
	}
	return fmt.Errorf("%s: %w", line, err)
}

// capped keeps the first maxOutput bytes written to it.
type capped struct{ bytes.Buffer }

func (c *capped) Write(b []byte) (int, error) {
	if room := maxOutput - c.Len(); room > 0 {
		c.Buffer.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}
