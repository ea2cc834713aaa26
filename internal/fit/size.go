package fit

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a memory size with its unit: decimal (96GB, 80 GB, 512MB) or binary
// (97887MiB, 80GiB). A bare number is refused: GPU memory is quoted both ways, and the
// 4% between them is the difference between fitting and not.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return 0, fmt.Errorf("%q is not a size: give a number and a unit (96GB, 97887MiB, 80GiB)", s)
	}
	n, err := strconv.ParseFloat(t[:i], 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size: give a number and a unit (96GB, 97887MiB, 80GiB)", s)
	}
	units := map[string]float64{
		"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
	}
	u, ok := units[strings.ToUpper(strings.TrimSpace(t[i:]))]
	if !ok {
		return 0, fmt.Errorf("%q: the unit is one of B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)", s)
	}
	// Compared as a float: converting one past int64 to int64 gives a wrong number.
	if b := n * u; b > float64(MaxGPUMemory) || b < 1 {
		return 0, fmt.Errorf("%q: a GPU's memory is 1 byte to 8 TiB for gpusplit (the largest GPUs have 288 GB)", s)
	}
	return int64(n * u), nil
}
