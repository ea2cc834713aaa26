package persist

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/host"
)

// Paths are every file persist writes, in order.
var Paths = []string{UdevRule, Modprobe, PinScript, Unit}

// Change is what Install or Remove did to one file.
type Change struct {
	Path   string
	Action string // "written", "unchanged", "removed", "absent"
}

// Install writes the files under h's root, each atomically (a temporary file beside it,
// then a rename); a file that is already the same is left alone.
func Install(h *host.Host, files []File) ([]Change, error) {
	var out []Change
	for _, f := range files {
		p, err := h.OSPath(f.Path)
		if err != nil {
			return out, err
		}
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, []byte(f.Content)) {
			out = append(out, Change{f.Path, "unchanged"})
			continue
		}
		if err := writeAtomic(p, []byte(f.Content), fs.FileMode(f.Mode)); err != nil {
			return out, fmt.Errorf("writing %s: %w", f.Path, err)
		}
		out = append(out, Change{f.Path, "written"})
	}
	return out, nil
}

// Remove deletes the files persist writes.
func Remove(h *host.Host) ([]Change, error) {
	var out []Change
	for _, path := range Paths {
		p, err := h.OSPath(path)
		if err != nil {
			return out, err
		}
		switch err := os.Remove(p); {
		case err == nil:
			out = append(out, Change{path, "removed"})
		case errors.Is(err, fs.ErrNotExist):
			out = append(out, Change{path, "absent"})
		default:
			return out, fmt.Errorf("removing %s: %w", path, err)
		}
	}
	return out, nil
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

func writeAtomic(path string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data, mode)
}
