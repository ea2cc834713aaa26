package nccl

import (
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
)

// CPU is what NCCL records of the CPU in a <cpu> element.
type CPU struct {
	Arch   string // x86_64, arm64, ppc64; "" when unknown
	Vendor string // CPUID's vendor string on x86 ("AuthenticAMD")
	// Family and Model are CPUID's, combined as NCCL combines them; -1 when unknown.
	Family, Model int
}

// ReadCPU reads the CPU from /proc/cpuinfo. NCCL takes familyid as CPUID's family plus
// its extended family shifted left by four, where Linux adds the two, so an AMD Zen 3
// that Linux calls family 25 is 175 to NCCL; the model is the same number in both.
func ReadCPU(h *host.Host) CPU {
	c := CPU{Family: -1, Model: -1}
	s, err := h.ReadString("/proc/cpuinfo")
	if err != nil {
		return c
	}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			if c.Arch != "" && strings.TrimSpace(line) == "" {
				break // the first processor is enough
			}
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "vendor_id":
			c.Arch, c.Vendor = "x86_64", v
		case "cpu family":
			if f, err := strconv.Atoi(v); err == nil {
				if f >= 15 {
					f = 15 + (f-15)<<4
				}
				c.Family = f
			}
		case "model":
			if m, err := strconv.Atoi(v); err == nil {
				c.Model = m
			}
		case "CPU implementer":
			c.Arch = "arm64"
		case "cpu":
			if strings.HasPrefix(v, "POWER") {
				c.Arch = "ppc64"
			}
		}
	}
	return c
}

// Node returns the <cpu> element of a NUMA node, attributes in the order NCCL sets them;
// affinity is the node's cpumap, left out when empty (NCCL before 2.30 leaves it out for
// a node it cannot read, such as -1).
func (c CPU) Node(numa int, affinity string) *Node {
	n := Elem("cpu", "numaid", strconv.Itoa(numa))
	if a := strings.TrimSpace(affinity); a != "" {
		n.Set("affinity", a)
	}
	if c.Arch != "" {
		n.Set("arch", c.Arch)
	}
	if c.Arch == "x86_64" {
		n.Set("vendor", c.Vendor)
		if c.Family >= 0 && c.Model >= 0 {
			n.Set("familyid", strconv.Itoa(c.Family))
			n.Set("modelid", strconv.Itoa(c.Model))
		}
	}
	return n
}
