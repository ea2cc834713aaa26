package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Batch changes several files as one: every new version is staged (written and synced
// beside its file, as <file>.tmp.<pid>) before the first file is touched, then the files
// are replaced in order, each directory synced; when a replacement fails, the files
// already replaced are put back as they were. A failure while staging leaves every file
// as it was.
type Batch struct {
	// Fault, when set, is asked before each step: "write" for each version staged (the
	// old versions staged to put files back included), "rename" for each replacement or
	// removal. An error it returns is that step's failure: the tests' fault injection.
	Fault func(step string) error
	items []item
}

type item struct {
	path    string
	old     []byte
	existed bool
	mode    fs.FileMode
	tmp     string // the staged new version; "" for a removal
}

// State is what Commit did to one file.
type State string

const (
	Untouched   State = "untouched"
	Done        State = "done"
	Restored    State = "restored"     // done, then put back after a later step failed
	NotRestored State = "not restored" // done, and putting it back failed
)

// Result is one file's state after Commit, with the error that kept it from being put back.
type Result struct {
	Path  string
	State State
	Err   error
}

func (b *Batch) fault(step string) error {
	if b.Fault == nil {
		return nil
	}
	return b.Fault(step)
}

// Replace stages data, with permissions mode, as the new version of path; old is what
// path holds now, and existed whether it exists, to put it back if a later step fails.
// The directory must exist.
func (b *Batch) Replace(path string, old []byte, existed bool, data []byte, mode fs.FileMode) error {
	tmp, err := b.stage(path, data, mode)
	if err != nil {
		return err
	}
	b.items = append(b.items, item{path: path, old: old, existed: existed, mode: mode, tmp: tmp})
	return nil
}

// Remove stages the removal of path, which holds old.
func (b *Batch) Remove(path string, old []byte, mode fs.FileMode) {
	b.items = append(b.items, item{path: path, old: old, existed: true, mode: mode})
}

func (b *Batch) stage(path string, data []byte, mode fs.FileMode) (string, error) {
	if err := b.fault("write"); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.tmp.%d", path, os.Getpid())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode) // the umask must not narrow what the file had
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// Abort removes the staged versions; no file was touched.
func (b *Batch) Abort() {
	for _, it := range b.items {
		if it.tmp != "" {
			os.Remove(it.tmp)
		}
	}
	b.items = nil
}

// Commit replaces and removes the files in the order they were staged. On a failure it
// puts back, newest first, the files it had done, and returns every file's state with a
// *CommitError.
func (b *Batch) Commit() ([]Result, error) {
	res := make([]Result, len(b.items))
	for i, it := range b.items {
		res[i] = Result{Path: it.path, State: Untouched}
	}
	for i, it := range b.items {
		err := b.fault("rename")
		if err == nil {
			if it.tmp != "" {
				err = os.Rename(it.tmp, it.path)
			} else {
				err = os.Remove(it.path)
			}
		}
		if err != nil {
			for _, rest := range b.items[i:] {
				if rest.tmp != "" {
					os.Remove(rest.tmp)
				}
			}
			for j := i - 1; j >= 0; j-- {
				res[j].State = Restored
				if perr := b.putBack(b.items[j]); perr != nil {
					res[j].State, res[j].Err = NotRestored, perr
				}
			}
			b.items = nil
			return res, &CommitError{Path: it.path, Err: err, Results: res}
		}
		// A directory that cannot be synced (pmxcfs) has the rename all the same.
		syncDir(filepath.Dir(it.path))
		res[i].State = Done
	}
	b.items = nil
	return res, nil
}

// putBack makes a file what it was before Commit changed it.
func (b *Batch) putBack(it item) error {
	if !it.existed {
		if err := os.Remove(it.path); err != nil {
			return fmt.Errorf("removing the new file: %w", err)
		}
		syncDir(filepath.Dir(it.path))
		return nil
	}
	tmp, err := b.stage(it.path, it.old, it.mode)
	if err == nil {
		err = b.fault("rename")
		if err == nil {
			err = os.Rename(tmp, it.path)
		}
		if err != nil {
			os.Remove(tmp)
		}
	}
	if err != nil {
		return fmt.Errorf("writing the previous version back: %w", err)
	}
	syncDir(filepath.Dir(it.path))
	return nil
}

// CommitError is a Commit that failed at Path; Results say what became of every file.
type CommitError struct {
	Path    string
	Err     error
	Results []Result
}

func (e *CommitError) Error() string {
	var back, broken []string
	for _, r := range e.Results {
		switch r.State {
		case Restored:
			back = append(back, r.Path)
		case NotRestored:
			broken = append(broken, fmt.Sprintf("%s (%v)", r.Path, r.Err))
		}
	}
	msg := fmt.Sprintf("replacing %s: %v", e.Path, e.Err)
	if len(back) > 0 {
		msg += "; put back: " + strings.Join(back, ", ")
	}
	if len(broken) > 0 {
		msg += "; NOT put back: " + strings.Join(broken, ", ")
	}
	return msg
}

func (e *CommitError) Unwrap() error { return e.Err }

// Intact reports whether every file is as it was before the failed Commit.
func (e *CommitError) Intact() bool {
	for _, r := range e.Results {
		if r.State == NotRestored {
			return false
		}
	}
	return true
}
