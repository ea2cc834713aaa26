//go:build !unix

package hfmodel

import "os"

// openFlags: elsewhere than on Unix there are no FIFOs to hang on.
const openFlags = os.O_RDONLY
