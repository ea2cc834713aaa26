//go:build unix

package safetensors

import (
	"os"
	"syscall"
)

// openNonBlocking opens name so that a FIFO put in place of a checked file cannot hang
// the open; the caller checks what was opened.
func openNonBlocking(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
}
