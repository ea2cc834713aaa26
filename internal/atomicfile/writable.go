package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Obstacle is what keeps a file from being written as Write writes it.
type Obstacle int

const (
	// Unknown is an error not explained further.
	Unknown Obstacle = iota
	// IsDir: a directory is where the file should be.
	IsDir
	// StickyOwner: another user's file, in a sticky directory (/tmp), which only its
	// owner may replace.
	StickyOwner
	// NoPermission: the directory is not writable, or one above it may not be entered.
	NoPermission
	// ReadOnly: the directory is on a read-only file system.
	ReadOnly
	// NoDir: the directory does not exist.
	NoDir
	// NotDir: the directory, or one above it, is not a directory.
	NotDir
	// Full: the file system is full, or the user's quota.
	Full
)

// WriteError says why File cannot be written: the Obstacle, in words (Why), and the
// error it came from, not the temporary file's name.
type WriteError struct {
	File     string // absolute where it can be made so
	Obstacle Obstacle
	Why      string
	Err      error // the system's error; nil where Why says it all
}

func (e *WriteError) Error() string {
	switch {
	case e.Obstacle == Unknown:
		return fmt.Sprintf("cannot write %s: %v", e.File, e.Err)
	case e.Err == nil:
		return fmt.Sprintf("cannot write %s: %s", e.File, e.Why)
	}
	return fmt.Sprintf("cannot write %s: %s (%v)", e.File, e.Why, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// CheckWritable says whether file can be written as Write writes it: a new file made
// beside it, renamed over it. It makes (and removes) that file, which tells what
// permissions, ACLs, a read-only mount or a full disk allow; and names what is in the
// way and why: the directory, one above it that may not be entered, a directory where
// the file should be, or another user's file in a sticky directory (/tmp), which only
// its owner may replace. The error is a *WriteError.
func CheckWritable(file string) error {
	dir := filepath.Dir(file)
	if fi, err := os.Lstat(file); err == nil {
		if fi.IsDir() {
			return &WriteError{File: absPath(file), Obstacle: IsDir, Why: "it is a directory"}
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() != 0 && st.Uid != uint32(os.Geteuid()) {
			if di, err := os.Stat(dir); err == nil && di.Mode()&os.ModeSticky != 0 {
				if ds, ok := di.Sys().(*syscall.Stat_t); ok && ds.Uid != uint32(os.Geteuid()) {
					return &WriteError{File: absPath(file), Obstacle: StickyOwner,
						Why: fmt.Sprintf("it belongs to uid %d, and in %s, a sticky directory, only its owner may replace it", st.Uid, absPath(dir))}
				}
			}
		}
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(file)+".tmp*")
	if err != nil {
		return Explain(file, err)
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// Explain says why file cannot be written, from err, an error of writing it or its
// temporary file: a *WriteError naming the file and what is in the way.
func Explain(file string, err error) *WriteError {
	dir := absPath(filepath.Dir(file))
	cause := err
	var pe *os.PathError
	var le *os.LinkError
	if errors.As(err, &pe) {
		cause = pe.Err
	} else if errors.As(err, &le) {
		cause = le.Err
	}
	e := &WriteError{File: absPath(file), Err: cause}
	switch {
	case errors.Is(cause, fs.ErrPermission):
		e.Obstacle = NoPermission
		e.Why = fmt.Sprintf("directory %s%s is not writable by uid %d", dir, OwnerMode(dir), os.Geteuid())
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrPermission) {
			// The directory cannot even be looked at: one above it may not be entered,
			// the deepest one this user can see.
			closed := filepath.Dir(dir)
			for closed != filepath.Dir(closed) {
				if _, err := os.Stat(closed); err == nil {
					break
				}
				closed = filepath.Dir(closed)
			}
			e.Why = fmt.Sprintf("directory %s%s may not be entered by uid %d, so %s cannot be reached", closed, OwnerMode(closed), os.Geteuid(), dir)
		}
	case errors.Is(cause, syscall.EROFS):
		e.Obstacle, e.Why = ReadOnly, fmt.Sprintf("directory %s is on a read-only file system", dir)
	case errors.Is(cause, fs.ErrNotExist):
		e.Obstacle, e.Why = NoDir, fmt.Sprintf("directory %s does not exist", dir)
	case errors.Is(cause, syscall.ENOTDIR):
		e.Obstacle, e.Why = NotDir, fmt.Sprintf("%s, or a directory above it, is not a directory", dir)
	case errors.Is(cause, syscall.ENOSPC), errors.Is(cause, syscall.EDQUOT):
		e.Obstacle, e.Why = Full, fmt.Sprintf("the file system of %s is full", dir)
	default:
		e.Err = err
	}
	return e
}

// OwnerMode is " (owner uid 0, mode 0755)" for a directory, "" where it cannot be seen:
// how a message names who may write there.
func OwnerMode(dir string) string {
	fi, err := os.Stat(dir)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (owner uid %d, mode %04o)", st.Uid, fi.Mode().Perm())
}

// absPath is p made absolute, for messages; p where that fails.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
