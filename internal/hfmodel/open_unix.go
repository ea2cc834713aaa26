//go:build unix

package hfmodel

import (
	"os"
	"syscall"
)

// openFlags open a model's file so that a FIFO put in place of a checked file cannot
// hang the open, nor a terminal become the controlling one; the caller checks what was
// opened.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
