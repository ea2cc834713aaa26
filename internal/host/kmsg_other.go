//go:build !unix

package host

import "io"

// openKernelLog reads a regular file: there is no kernel log device here.
func openKernelLog(name string, c fileCap) (io.ReadCloser, error) {
	return openRegular(name, c, true)
}
