//go:build !unix

package safetensors

import "os"

// openNonBlocking opens name; elsewhere than on Unix there are no FIFOs to hang on.
func openNonBlocking(name string) (*os.File, error) {
	return os.Open(name)
}
