package nccl

import "strings"

// chips maps NVIDIA's GPU chip names, as pci.ids starts a device's name ("GH100 [H200
// SXM 141GB]"), to their compute capability in NCCL's form (major*10+minor).
var chips = []struct {
	prefix string
	sm     int
}{
	{"GP100", 60}, {"GP10", 61}, {"GV100", 70}, {"TU1", 75},
	{"GA100", 80}, {"GA10", 86}, {"AD10", 89}, {"GH100", 90},
	{"GB100", 100}, {"GB102", 100}, {"GB110", 103}, {"GB112", 103},
	{"GB20", 120}, {"GB10 ", 121},
}

// SM returns the compute capability of an NVIDIA GPU from its pci.ids name.
func SM(deviceName string) (int, bool) {
	for _, c := range chips {
		if strings.HasPrefix(deviceName+" ", c.prefix) {
			return c.sm, true
		}
	}
	return 0, false
}
