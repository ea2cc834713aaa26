package hfmodel

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/safetensors"
)

// modelDir is a model's directory, opened once. Every file of the model is opened
// through it, an os.Root, so that no link takes a read outside the directory, whatever
// its owner puts there, before or while gpusplit reads: gpusplit often runs as root on a
// directory a user filled. A relative link that stays inside is followed (a checkpoint
// may link a shard to another name); an absolute link, or one that leaves, is refused.
// The directory itself is the one the user named, links and all.
//
// A Hugging Face cache snapshot (…/models--ORG--NAME/snapshots/REV) keeps every file as
// a link to ../../blobs/HASH: there the directory the links must stay inside is the
// repository's, models--ORG--NAME.
type modelDir struct {
	// path is the directory as the user gave it, for messages.
	path string
	root *os.Root
	// prefix is the model's directory inside root: "" or "snapshots/REV/".
	prefix string
}

func openModelDir(dir string) (*modelDir, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: give the model's directory, the one holding config.json and the safetensors files", dir)
	}
	rootDir, prefix := dir, ""
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		snapshots := filepath.Dir(real)
		if filepath.Base(snapshots) == "snapshots" && strings.HasPrefix(filepath.Base(filepath.Dir(snapshots)), "models--") {
			rootDir, prefix = filepath.Dir(snapshots), "snapshots/"+filepath.Base(real)+"/"
		}
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, err
	}
	d := &modelDir{path: dir, root: root, prefix: prefix}
	// The cache's layout was read from the path: the directory opened must be the one
	// named, not one swapped in since.
	if inside, err := root.Stat(d.inRoot(".")); err != nil || !os.SameFile(inside, st) {
		root.Close()
		return nil, fmt.Errorf("%s changed while gpusplit opened it", dir)
	}
	return d, nil
}

func (d *modelDir) Close() error { return d.root.Close() }

func (d *modelDir) inRoot(name string) string {
	if d.prefix == "" {
		return name
	}
	return strings.TrimSuffix(d.prefix+name, "/.")
}

// show is name as messages give it: under the directory the user named.
func (d *modelDir) show(name string) string { return filepath.Join(d.path, name) }

// exists reports whether the directory holds name, a file or a link of any kind.
func (d *modelDir) exists(name string) bool {
	_, err := d.root.Lstat(d.inRoot(name))
	return err == nil
}

// list returns the names in the directory that end in suffix, sorted.
func (d *modelDir) list(suffix string) ([]string, error) {
	f, err := d.root.Open(d.inRoot("."))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ErrOutside is what opening a model's file through a link that leaves its directory
// is, for errors.Is.
var ErrOutside = errors.New("a link out of the model's directory")

// open opens the model's file name for reading: a regular file inside the directory,
// never a FIFO (which would hang the read), a device or a socket, and never through a
// link that leaves the directory. A missing file is an error that is fs.ErrNotExist.
func (d *modelDir) open(name string) (*os.File, error) {
	p := d.inRoot(name)
	shown := d.show(name)
	lst, err := d.root.Lstat(p)
	if err != nil {
		return nil, &host.PathError{Op: "open", Path: shown, Err: unwrapPath(err)}
	}
	st, err := d.root.Stat(p)
	if err != nil {
		if lst.Mode()&fs.ModeSymlink == 0 || errors.Is(err, fs.ErrNotExist) {
			return nil, &host.PathError{Op: "open", Path: shown, Err: unwrapPath(err)}
		}
		// A link Stat cannot follow inside the root: it leaves the directory, or is
		// absolute. Its target is the directory owner's doing, not a file's content.
		target, _ := d.root.Readlink(p)
		return nil, &host.PathError{Op: "open", Path: shown, Err: fmt.Errorf("%w (it points at %s): gpusplit follows only relative links that stay inside the model's directory; copy the file in", ErrOutside, safetensors.Quote(target))}
	}
	if err := regular(st); err != nil {
		return nil, &host.PathError{Op: "open", Path: shown, Err: err}
	}
	f, err := d.root.OpenFile(p, openFlags, 0)
	if err != nil {
		return nil, &host.PathError{Op: "open", Path: shown, Err: unwrapPath(err)}
	}
	// What was opened may have been swapped in since the Stat: it is checked again.
	fst, err := f.Stat()
	if err == nil {
		err = regular(fst)
		if err == nil && !os.SameFile(st, fst) {
			err = errors.New("changed while gpusplit opened it")
		}
	}
	if err != nil {
		f.Close()
		return nil, &host.PathError{Op: "open", Path: shown, Err: err}
	}
	return f, nil
}

// readFile reads the model's file name whole, at most max bytes; what says what the file
// is, for the message of one over the cap.
func (d *modelDir) readFile(name string, max int64, what string) ([]byte, error) {
	f, err := d.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, &host.PathError{Op: "read", Path: d.show(name), Err: &host.TooLargeError{Size: st.Size(), Cap: max, What: what}}
	}
	// The cap holds even for a file that grows while it is read.
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &host.PathError{Op: "read", Path: d.show(name), Err: err}
	}
	if int64(len(data)) > max {
		return nil, &host.PathError{Op: "read", Path: d.show(name), Err: &host.TooLargeError{Size: -1, Cap: max, What: what}}
	}
	return data, nil
}

// regular refuses what is not a regular file, naming what it is.
func regular(st fs.FileInfo) error {
	m := st.Mode()
	if m.IsRegular() {
		return nil
	}
	kind := "a special file"
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a FIFO"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	}
	return fmt.Errorf("%w: it is %s; gpusplit reads only regular files of a model's directory", host.ErrNotRegular, kind)
}

// unwrapPath takes the os.Root's own *PathError off err: the message gives the path as
// the user knows it.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
