package syscmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// script writes an executable shell script name into dir.
func script(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func withDirs(t *testing.T, dirs ...string) {
	saved := Dirs
	t.Cleanup(func() { Dirs = saved })
	Dirs = dirs
}

// A command that hangs, and its child that keeps its output open, are killed at the
// timeout: the call returns, saying so.
func TestRunKillsAHangingCommand(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "hang", "/bin/sleep 600 &\nwait")
	withDirs(t, dir)
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), 200*time.Millisecond, "hang") }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not finish within its time") {
			t.Errorf("err = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its timeout")
	}
	// The caller's deadline ends it as well.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := Run(ctx, time.Hour, "hang"); err == nil {
		t.Error("a command past the caller's deadline succeeded")
	}
}

// Commands are found in Dirs only, never through $PATH; a file there that is not
// executable is passed over.
func TestPathIgnoresPATH(t *testing.T) {
	mine, theirs := t.TempDir(), t.TempDir()
	script(t, theirs, "systemctl", "exit 0")
	t.Setenv("PATH", theirs)
	withDirs(t, mine)
	if p, err := Path("systemctl"); err == nil {
		t.Errorf("found %s through $PATH", p)
	}
	os.WriteFile(filepath.Join(mine, "systemctl"), []byte("#!/bin/sh\n"), 0o644)
	if _, err := Path("systemctl"); err == nil || !strings.Contains(err.Error(), "systemctl is not installed") {
		t.Errorf("a file that is not executable: %v", err)
	}
	second := t.TempDir()
	script(t, second, "systemctl", "exit 0")
	withDirs(t, mine, second)
	if p, err := Path("systemctl"); err != nil || p != filepath.Join(second, "systemctl") {
		t.Errorf("Path = %q, %v", p, err)
	}
	if _, err := Path("../systemctl"); err == nil {
		t.Error("a name with a slash was looked up")
	}
}

// A command that fails is named with its status and what it printed.
func TestRunReportsFailure(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "fail", `echo "unit $1 not found" >&2; exit 5`)
	withDirs(t, dir)
	err := Run(context.Background(), 0, "fail", "x.service")
	if err == nil || !strings.Contains(err.Error(), "fail x.service: exit status 5: unit x.service not found") {
		t.Errorf("err = %v", err)
	}
	if err := Run(context.Background(), 0, "fail"); err == nil {
		t.Error("no error")
	}
}
