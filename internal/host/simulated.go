package host

import (
	"fmt"
	"os"
)

// SimulationRecord is the file at the root of a directory that simulates a host: the
// demo's scratch copy of the sample host (gpusplit demo). It holds what the simulated
// kernel needs (package bind, Sim), and marks the directory as one where drivers move by
// editing its files, never through a kernel.
const SimulationRecord = "/.gpusplit-simulation.json"

// Simulated reports whether h is a directory that simulates a host: it can be written
// and holds SimulationRecord. A snapshot never is.
func (h *Host) Simulated() bool {
	if !h.Writable() {
		return false
	}
	k, _, err := h.Lstat(SimulationRecord)
	return err == nil && k == File
}

// OpenDirAs is Open of the directory dir, named name in messages and output instead of
// its path: the demo's scratch copy reads as the sample host it is a copy of.
func OpenDirAs(dir, name string) (*Host, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("root %s: not a directory", dir)
	}
	return newHost(name, newDirBackend(dir)), nil
}
