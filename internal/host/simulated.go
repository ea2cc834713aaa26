package host

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
