// Package demo keeps the demo's scratch copy: a private, writable copy of the sample host
// (package samplehost) in the user's cache directory, where every command of gpusplit
// --demo that changes something works, through a simulated kernel (bind.Sim) and
// simulated services (hook.Simulated). Nothing of this machine is read or changed but
// the copy.
package demo

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// Dir is where the scratch copy lives: gpusplit/demo under the user's cache directory
// ($XDG_CACHE_HOME, else ~/.cache).
func Dir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("the demo's scratch copy lives in the cache directory, and there is none: %w", err)
	}
	return filepath.Join(cache, "gpusplit", "demo"), nil
}

// Open returns the scratch copy at dir, or nil and no error when there is none. It refuses
// a dir that is not this user's own private directory (a link, another's, open to
// others) or that a reset left half made, saying how to start over.
func Open(dir string) (*host.Host, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := private(dir, fi); err != nil {
		return nil, err
	}
	// Named as the sample host, so that its output reads as the embedded one's.
	h, err := host.OpenDirAs(dir, samplehost.Name)
	if err != nil {
		return nil, err
	}
	if !h.Simulated() {
		return nil, fmt.Errorf("the demo's scratch copy %s is incomplete (it has no %s); start over with gpusplit demo reset", dir, host.SimulationRecord)
	}
	return h, nil
}

// private refuses a path that is not a directory of this user's, closed to others: the
// demo writes there and reads back what it finds.
func private(dir string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link, not the demo's own directory; remove it, then run gpusplit demo reset", dir)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory; remove it, then run gpusplit demo reset", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is not this user's (uid %d): the demo uses only a copy of its own; remove it, then run gpusplit demo reset", dir, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s is open to others (%s), and the demo's copy is private (0700); remove it, then run gpusplit demo reset", dir, fi.Mode().Perm())
	}
	return nil
}

// Options say how a scratch copy is made.
type Options struct {
	// Held keeps the processes that hold the GPUs (nvidia-persistenced, and container
	// 129's python3), so that apply and the hooks refuse as they would on the host.
	Held bool
}

// Made is what Make did.
type Made struct {
	Dir string `json:"dir"`
	// Removed are the processes left out of the copy, as "comm[pid]": those that held
	// the GPUs; [] with Options.Held.
	Removed []string `json:"removed"`
	// Replaced says an earlier scratch copy was thrown away.
	Replaced bool `json:"replaced"`
}

// Make lays out a fresh scratch copy at dir, replacing the one there: the sample host,
// less the processes that hold its GPUs (unless o.Held), with what a running host has
// and the sample lacks (a boot id, gpusplit installed where the hookscript runs it), and
// the record that makes it a simulated host. It is made beside dir and renamed into
// place, so a copy is whole or absent.
func Make(dir string, o Options) (*Made, error) {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(parent); err != nil {
		return nil, err
	} else if err := ownDir(parent, fi); err != nil {
		return nil, err
	}
	made := &Made{Dir: dir, Removed: []string{}}
	old, err := os.Lstat(dir)
	switch {
	case err == nil:
		if err := private(dir, old); err != nil {
			return nil, err
		}
		made.Replaced = true
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, ".demo-new-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o700); err != nil {
		return nil, err
	}
	if err := samplehost.Unpack(tmp); err != nil {
		return nil, err
	}
	if !o.Held {
		if made.Removed, err = removeHolders(tmp); err != nil {
			return nil, err
		}
	}
	if err := addLiveFiles(tmp); err != nil {
		return nil, err
	}
	h, err := host.Open(tmp)
	if err != nil {
		return nil, err
	}
	if err := bind.RecordSim(h); err != nil {
		return nil, err
	}
	if made.Replaced {
		gone, err := os.MkdirTemp(parent, ".demo-old-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(gone)
		if err := os.Rename(dir, filepath.Join(gone, "demo")); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	return made, nil
}

// ownDir refuses a parent directory that is a link or another user's: the copy is made
// and renamed in it.
func ownDir(dir string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is not a directory of this user's (uid %d); the demo keeps its copy only in one", dir, os.Geteuid())
	}
	return nil
}

// removeHolders takes out of the copy's /proc every process with a GPU's device node
// open (/dev/nvidia*), as if each had been stopped, and returns them as comm[pid].
func removeHolders(root string) ([]string, error) {
	procDir := filepath.Join(root, "proc")
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil, err
	}
	removed := []string{}
	for _, e := range entries {
		pid := e.Name()
		if !e.IsDir() || strings.Trim(pid, "0123456789") != "" {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join(procDir, pid, "fd"))
		holds := slices.ContainsFunc(fds, func(fd fs.DirEntry) bool {
			target, err := os.Readlink(filepath.Join(procDir, pid, "fd", fd.Name()))
			return err == nil && strings.HasPrefix(target, "/dev/nvidia")
		})
		if !holds {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(procDir, pid, "comm"))
		if err := os.RemoveAll(filepath.Join(procDir, pid)); err != nil {
			return nil, err
		}
		removed = append(removed, fmt.Sprintf("%s[%s]", strings.TrimSpace(string(comm)), pid))
	}
	return removed, nil
}

// standIn is the gpusplit the copy's hookscript and boot unit name: the demo runs
// nothing of the copy, and persist install and pve hook install check the file.
const standIn = "#!/bin/sh\n# The demo's stand-in for gpusplit: nothing in the scratch copy runs.\nexit 0\n"

// addLiveFiles writes what a running host has and the sample, a snapshot, leaves out:
// the boot id that journals record, and gpusplit installed.
func addLiveFiles(root string) error {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	bootID := fmt.Sprintf("%x-%x-%x-%x-%x\n", id[0:4], id[4:6], id[6:8], id[8:10], id[10:])
	for p, f := range map[string]struct {
		body string
		mode os.FileMode
	}{
		"proc/sys/kernel/random/boot_id": {bootID, 0o444},
		persist.DefaultBinary:            {standIn, 0o755},
	} {
		full := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(p, "/")))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(f.body), f.mode); err != nil {
			return err
		}
		// Whatever the umask: persist's check refuses a binary, or a directory on its
		// way, that others may write.
		for q := full; q != root; q = filepath.Dir(q) {
			mode := os.FileMode(0o755)
			if q == full {
				mode = f.mode
			}
			if err := os.Chmod(q, mode); err != nil {
				return err
			}
		}
	}
	return nil
}
