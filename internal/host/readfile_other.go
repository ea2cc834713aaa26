//go:build !unix

package host

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
)

// readRegular reads the regular file at name, at most c.max bytes. Without the Unix
// system calls, what is at name is looked at before it is opened, and the last
// component is never read through a link: the caller resolves the path step by step.
func readRegular(name string, c fileCap, lstatFirst bool) ([]byte, error) {
	r, err := openRegular(name, c, lstatFirst)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(r)
	return buf.Bytes(), err
}

func openRegular(name string, c fileCap, _ bool) (io.ReadCloser, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return nil, unwrapOS(err)
	}
	if err := check(fi, c); err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, unwrapOS(err)
	}
	if fi, err = f.Stat(); err == nil {
		err = check(fi, c)
	}
	if err != nil {
		f.Close()
		return nil, unwrapOS(err)
	}
	return &capped{f: f, c: c}, nil
}

func check(fi fs.FileInfo, c fileCap) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return errLeafIsLink
	case fi.IsDir():
		return errors.New("is a directory")
	case !fi.Mode().IsRegular():
		return &NotRegularError{Type: "a special file"}
	case fi.Size() > c.max:
		return c.tooLarge(fi.Size())
	}
	return nil
}

// capped reads a file and fails past its cap.
type capped struct {
	f *os.File
	c fileCap
	n int64
}

func (r *capped) Read(p []byte) (int, error) {
	if left := r.c.max + 1 - r.n; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := r.f.Read(p)
	r.n += int64(n)
	if r.n > r.c.max {
		return 0, r.c.tooLarge(-1)
	}
	return n, unwrapOS(err)
}

func (r *capped) Close() error { return r.f.Close() }

func openDir(name string) (*os.File, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return nil, unwrapOS(err)
	}
	if !fi.IsDir() {
		return nil, errors.New("not a directory")
	}
	f, err := os.Open(name)
	return f, unwrapOS(err)
}

func lstatKind(name string) (Kind, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return 0, unwrapOS(err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return Link, nil
	case fi.IsDir():
		return Dir, nil
	case fi.Mode().IsRegular():
		return File, nil
	}
	return Other, nil
}

// readShort is readRegular, what is at name looked at first.
func readShort(name string, c fileCap) ([]byte, error) { return readRegular(name, c, true) }
