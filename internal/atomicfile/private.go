package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// PrivateDir makes dir, or checks the one there, as a directory only the caller (root)
// can enter: 0700, the caller's, not a link. Missing parents are made 0700 too. One of
// the caller's with a looser mode (an earlier gpusplit made its directories 0755) is
// tightened; another user's, a link or a file in its place is refused: another user
// could read, plant or hold what gpusplit keeps there.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("%s is not a directory only root can enter (%v): remove what is there", dir, err)
	}
	defer f.Close()
	return OwnedPrivate(f, 0o700)
}

// OwnedPrivate checks that the open file or directory f is the caller's, a directory
// when perm has the search bits (0700), else a regular file, and no more open than
// perm; a looser mode is tightened.
func OwnedPrivate(f *os.File, perm fs.FileMode) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	dir := perm&0o100 != 0
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case dir && !fi.IsDir():
		return fmt.Errorf("%s is not a directory (%s): remove it", f.Name(), fi.Mode().Type())
	case !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%s): remove it", f.Name(), fi.Mode().Type())
	case !ok:
		return fmt.Errorf("cannot tell who owns %s", f.Name())
	case st.Uid != uint32(os.Geteuid()):
		return fmt.Errorf("%s belongs to uid %d, not to uid %d who runs gpusplit: another user could hold or plant what is in it; see what it holds, remove it, and run again", f.Name(), st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm() != perm {
		if err := f.Chmod(perm); err != nil {
			return fmt.Errorf("%s is %s and could not be made %s: %w", f.Name(), fi.Mode().Perm(), perm, err)
		}
	}
	return nil
}
