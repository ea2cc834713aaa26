package safetensors

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Extent says how much of a file's data buffer is there.
type Extent int

const (
	// Complete: the file is as long as its header says.
	Complete Extent = iota
	// HeaderOnly: the file stops right after its header, a copy made to size a model
	// without its weights (the first 8 + N bytes of each shard, as an HTTP range
	// request fetches them). The sizes are the header's all the same.
	HeaderOnly
)

// File is a file's header and how much of its data is there.
type File struct {
	Path   string
	Header *Header
	Extent Extent
	Size   int64
}

// ReadFile reads the header of the safetensors file f, and never its tensors; name is
// the file as messages give it. The caller opens f, and so decides which files may be
// read and through which links (hfmodel opens a model's files inside its directory).
// Only a regular file is read: a FIFO would hang the read and a device could feed it
// anything. A file whose length is neither that of its header alone nor that of its
// header and data is an error that says which: a partial download, or bytes after the
// data buffer.
func ReadFile(f *os.File, name string) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("not a regular file")}
	}
	h, err := Read(bufio.NewReaderSize(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out := &File{Path: name, Header: h, Size: st.Size()}
	switch size, full := st.Size(), h.FileBytes(); {
	case size == full:
		out.Extent = Complete
	case size == 8+h.Length && h.DataBytes > 0:
		out.Extent = HeaderOnly
	case size < full:
		return nil, fmt.Errorf("%s: %d bytes long, but its header describes %d: a partial download or a truncated copy", name, size, full)
	default:
		return nil, fmt.Errorf("%s: %d bytes long, %d more than its header describes: not a file the safetensors writer made", name, size, size-full)
	}
	return out, nil
}
