package persist

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/host"
)

// Paths are every file persist writes, in order.
var Paths = []string{UdevRule, Modprobe, PinScript, Unit}

// Dirs are the directories of Paths, where install and remove create and delete files.
func Dirs() []string {
	out := make([]string, len(Paths))
	for i, p := range Paths {
		out[i] = path.Dir(p)
	}
	return out
}

// Change is what Install or Remove did to one file.
type Change struct {
	Path string `json:"path"`
	// Action: "written", "unchanged", "removed", "absent"; after a failure "untouched"
	// (not reached), "restored" (changed, then put back) or "not restored".
	Action string `json:"action"`
}

// maxFile bounds what Install reads of a file it may replace: persist's files are small.
const maxFile = 1 << 20

// Install writes the files under h's root as one change: every new version is staged
// beside its file before the first is replaced, and a failure puts back those already
// replaced, so that a boot never sees a rule without its unit. A file that is already the
// same is left alone.
func Install(h *host.Host, files []File) ([]Change, error) {
	out := make([]Change, len(files))
	b := &atomicfile.Batch{Fault: fault}
	var staged []int // indexes into files, in the batch's order
	for i, f := range files {
		out[i] = Change{f.Path, "untouched"}
		p, err := h.OSPath(f.Path)
		if err != nil {
			b.Abort()
			return out, err
		}
		old, existed, err := current(p)
		if err != nil {
			b.Abort()
			return out, fmt.Errorf("%s: %w; nothing was written", f.Path, err)
		}
		if existed && bytes.Equal(old, []byte(f.Content)) {
			out[i].Action = "unchanged"
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Abort()
			return out, fmt.Errorf("writing %s: %w; nothing was written", f.Path, err)
		}
		if err := b.Replace(p, old, existed, []byte(f.Content), fs.FileMode(f.Mode)); err != nil {
			b.Abort()
			return out, fmt.Errorf("writing %s: %w; nothing was written", f.Path, err)
		}
		staged = append(staged, i)
	}
	res, err := b.Commit()
	for j, r := range res {
		out[staged[j]].Action = map[atomicfile.State]string{atomicfile.Done: "written", atomicfile.Untouched: "untouched", atomicfile.Restored: "restored", atomicfile.NotRestored: "not restored"}[r.State]
	}
	return out, outcome(err)
}

// Remove deletes the files persist writes, all of them or none.
func Remove(h *host.Host) ([]Change, error) {
	out := make([]Change, len(Paths))
	b := &atomicfile.Batch{Fault: fault}
	var staged []int
	for i, path := range Paths {
		out[i] = Change{path, "untouched"}
		p, err := h.OSPath(path)
		if err != nil {
			return out, err
		}
		old, existed, err := current(p)
		if err != nil {
			return out, fmt.Errorf("%s: %w; nothing was removed", path, err)
		}
		if !existed {
			out[i].Action = "absent"
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return out, fmt.Errorf("%s: %w; nothing was removed", path, err)
		}
		b.Remove(p, old, fi.Mode().Perm())
		staged = append(staged, i)
	}
	res, err := b.Commit()
	for j, r := range res {
		out[staged[j]].Action = map[atomicfile.State]string{atomicfile.Done: "removed", atomicfile.Untouched: "untouched", atomicfile.Restored: "restored", atomicfile.NotRestored: "not restored"}[r.State]
	}
	return out, outcome(err)
}

// fault is the tests' fault injection into Install and Remove.
var fault func(step string) error

// current reads what a file holds now, bounded; a file that is not a regular file is an
// error (persist never replaces a FIFO or a device).
func current(p string) ([]byte, bool, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !fi.Mode().IsRegular() {
		return nil, false, fmt.Errorf("is not a regular file (%s)", fi.Mode().Type())
	}
	if fi.Size() > maxFile {
		return nil, false, fmt.Errorf("is larger than %d bytes: not persist's", maxFile)
	}
	b, err := os.ReadFile(p)
	return b, true, err
}

// outcome words a failed commit: whether every file is as it was.
func outcome(err error) error {
	var ce *atomicfile.CommitError
	if !errors.As(err, &ce) {
		return err
	}
	if ce.Intact() {
		return fmt.Errorf("%w; every file is as it was", err)
	}
	return fmt.Errorf("%w: put those files back by hand", err)
}

// Installed returns the files persist wrote that are present on h.
func Installed(h *host.Host) []File {
	var out []File
	for _, path := range Paths {
		if b, err := h.ReadFile(path); err == nil {
			out = append(out, File{Path: path, Content: string(b)})
		}
	}
	return out
}
