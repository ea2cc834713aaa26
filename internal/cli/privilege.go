package cli

import (
	"fmt"
	"os"
)

// needRoot refuses, before anything is read or changed, a command that changes the live
// host without root: it would fail half-way on the first lock or file it may not touch.
// A --root directory is a copy that its owner may edit: there each file's own checks say
// what cannot be written.
func needRoot(g *globals, command, why string) error {
	if g.demo || g.root != "/" || os.Geteuid() == 0 {
		return nil
	}
	return fmt.Errorf("%s needs root (%s): run it with sudo; nothing was changed", command, why)
}
