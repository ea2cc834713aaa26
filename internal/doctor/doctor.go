// Package doctor finds the known failure modes of multi-GPU hosts and VMs from a host's
// sysfs, procfs, configuration files and kernel log, and says, with the evidence it saw,
// what to do about each. Every check is a function of an Env; the registry orders them.
package doctor

import (
	"fmt"
	"slices"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// Severity orders findings: info says what is so, a warning what will likely bite, an
// error what is broken now.
type Severity int

// The severities.
const (
	Info Severity = iota
	Warning
	Error
)

func (s Severity) String() string { return [...]string{"info", "warning", "error"}[s] }

// MarshalText writes the severity's name in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Finding is one thing a check found.
type Finding struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	Evidence []string `json:"evidence"` // the exact lines, files and values seen
	Remedy   string   `json:"remedy"`   // what to do, and why
}

// Check is one diagnosis.
type Check struct {
	ID string
	// Group names the checks that --only selects together ("firmware").
	Group string
	Title string // what it looks for
	Run   func(e *Env) []Finding
}

// Env is what the checks read: the host, its inventory, the facts of its kernel log, the
// desired split when there is one.
type Env struct {
	H   *host.Host
	Inv *inventory.Inventory
	// Log holds what the kernel log said; nil when no log could be read (LogErr says why).
	Log    *LogFacts
	LogErr error
	// Desired and Plan are the configured split (from /etc/gpusplit/split.toml); nil
	// when there is none.
	Desired *plan.Desired
	Plan    *plan.Plan
	// Guest says whether the host is a VM: /sys/class/dmi/id/sys_vendor or product_name
	// names a hypervisor, or /proc/cpuinfo's flags hold "hypervisor".
	Guest bool
	// Hypervisor is what it says it is: the DMI sys_vendor or product_name it matched.
	Hypervisor string
	// Root says whether gpusplit runs as root on the live host: without it, config
	// space past 64 bytes and other users' processes cannot be read.
	Root bool
	// Partial collects the checks that could only look at part of what they need.
	Partial map[string]string

	// logHost says whether the log is the host's own (logFromHost); gpuAddrs, gpuSlots
	// and gpuGroups are the host's GPU functions, the slots of its GPUs (function 0) and
	// their IOMMU groups, for logGPU; logGPUSlots the slots where another machine's log
	// enumerates a GPU's function.
	logHost     bool
	gpuAddrs    map[string]bool
	gpuSlots    map[string]bool
	gpuGroups   map[int]bool
	logGPUSlots map[string]bool
}

// partial notes that a check saw less than it needs.
func (e *Env) partial(id, why string) {
	if e.Partial == nil {
		e.Partial = map[string]string{}
	}
	e.Partial[id] = why
}

// Checks is the registry, in the order the checks run.
var Checks = []Check{
	{ID: "bar-unassigned", Title: "GPU BARs the kernel could not place", Run: checkBARs},
	{ID: "grub-override", Title: "a GRUB drop-in that replaces the kernel parameters of /etc/default/grub", Run: checkGrubOverride},
	{ID: "boot-cmdline", Title: "the command line of the boot the log records: other than the running one, parameters the kernel did not know", Run: checkBootCmdline},
	{ID: "cmdline-not-applied", Title: "kernel parameters configured but not in /proc/cmdline", Run: checkCmdlineApplied},
	{ID: "iommu-off", Title: "no IOMMU, so no IOMMU groups and no vfio-pci", Run: checkIOMMUOff},
	{ID: "iommu-param-invalid", Title: "an IOMMU kernel parameter that the kernel rejects", Run: checkIOMMUParams},
	{ID: "iommu-translated", Title: "the IOMMU translates GPU DMA (not passthrough)", Run: checkIOMMUTranslated},
	{ID: "gpu-lost", Title: "GPUs that failed while the host ran: fell off the bus, hardware Xids, fatal PCIe errors", Run: checkGPULost},
	{ID: "gpu-quarantined", Title: "GPUs that came back broken from a VM and are kept from every driver and container", Run: checkQuarantined},
	{ID: "gpu-init-failed", Title: "GPUs that did not come up: RmInitAdapter, stuck power states, the driver's probe summary", Run: checkGPUInit},
	{ID: "vfio-reset", Title: "devices a VM could not reset: not ready after a reset, a bus QEMU does not own", Run: checkVFIOReset},
	{ID: "vfio-bar-reserve", Title: "GPU memory vfio-pci could not reserve (a framebuffer holds it)", Run: checkVFIOBar},
	{ID: "vfio-group-not-viable", Title: "IOMMU groups QEMU refused: a device of them is not on vfio-pci", Run: checkVFIONotViable},
	{ID: "aer-errors", Title: "PCIe errors that AER reported, by device", Run: checkAER},
	{ID: "iommu-page-faults", Title: "IOMMU faults naming GPUs: peer-to-peer DMA is broken", Run: checkPageFaults},
	{ID: "sev-snp", Title: "SEV-SNP enabled, and what it implies for the IOMMU and P2P", Run: checkSEVSNP},
	{ID: "p2p-topology", Title: "GPUs with no shared switch: P2P crosses the root complex", Run: checkP2PTopology},
	{ID: "vm-flat-topology", Title: "a VM whose GPUs show no NUMA or host bridge structure", Run: checkVMFlat},
	{ID: "vm-machine-type", Title: "an i440fx VM with PCIe GPUs", Run: checkVMMachine},
	{ID: "link-degraded", Title: "a GPU link narrower or slower than it can be", Run: checkLinks},
	{ID: "driver-mismatch", Title: "the nvidia kernel module and the userspace driver libraries differ", Run: checkDriverMismatch},
	{ID: "iommu-group-shared", Title: "a GPU's IOMMU group holds devices other than its own functions", Run: checkGroupShared},
	{ID: "gpu-held", Title: "processes holding GPUs that the configured split would move", Run: checkHeld},
	{ID: "split-drift", Title: "the configured split is not in effect", Run: checkDrift},
	{ID: "numa-unknown", Title: "GPUs without a NUMA node on a NUMA machine", Run: checkNUMAUnknown},
	{ID: "firmware-platform", Group: "firmware", Title: "the platform and its firmware (DMI)", Run: checkFirmwarePlatform},
	{ID: "firmware-numa", Group: "firmware", Title: "NUMA nodes per socket (NPS), and GPUs of one socket on different nodes", Run: checkFirmwareNUMA},
	{ID: "firmware-iommu", Group: "firmware", Title: "the IOMMU and its mode", Run: checkFirmwareIOMMU},
	{ID: "firmware-above-4g", Group: "firmware", Title: "64-bit BARs placed above 4 GiB (Above 4G decoding)", Run: checkFirmwareAbove4G},
	{ID: "firmware-rebar", Group: "firmware", Title: "Resizable BAR: the GPUs' BAR1 against what they offer", Run: checkFirmwareReBAR},
	{ID: "firmware-sriov", Group: "firmware", Title: "SR-IOV virtual functions of the GPUs", Run: checkFirmwareSRIOV},
	{ID: "firmware-acs", Group: "firmware", Title: "ACS on the switch ports above the GPUs", Run: checkFirmwareACS},
	{ID: "firmware-pcie", Group: "firmware", Title: "the PCIe settings of the GPUs' links: payload, read request, relaxed ordering, 10-bit tags, ASPM", Run: checkFirmwarePCIe},
}

// IDs returns every check's id, in order.
func IDs() []string {
	var out []string
	for _, c := range Checks {
		out = append(out, c.ID)
	}
	return out
}

// Groups are the names that select several checks at once.
func Groups() []string {
	var out []string
	for _, c := range Checks {
		if c.Group != "" && !slices.Contains(out, c.Group) {
			out = append(out, c.Group)
		}
	}
	return out
}

// Report is the result of a run, as doctor -o json gives it (docs/json.md).
type Report struct {
	// Host names the host the checks ran on: its root.
	Host     string    `json:"host"`
	Findings []Finding `json:"findings"`
	Ran      []string  `json:"checks"`
	// Partial names the checks that saw only part of what they need, and why.
	Partial map[string]string `json:"partial"`
}

// Worst is the highest severity found; -1 when nothing was found.
func (r *Report) Worst() Severity {
	worst := Severity(-1)
	for _, f := range r.Findings {
		worst = max(worst, f.Severity)
	}
	return worst
}

// Run runs the checks (all of them, or those in only) and returns their findings, the
// most severe first.
func Run(e *Env, only []string) (*Report, error) {
	for _, id := range only {
		if !slices.Contains(IDs(), id) && !slices.Contains(Groups(), id) {
			return nil, unknownCheck(id)
		}
	}
	r := &Report{Findings: []Finding{}, Ran: []string{}}
	if e.H != nil {
		r.Host = e.H.Root()
	}
	for _, c := range Checks {
		if len(only) > 0 && !slices.Contains(only, c.ID) && (c.Group == "" || !slices.Contains(only, c.Group)) {
			continue
		}
		r.Ran = append(r.Ran, c.ID)
		for _, f := range c.Run(e) {
			f.ID = c.ID
			if f.Evidence == nil {
				f.Evidence = []string{}
			}
			r.Findings = append(r.Findings, f)
		}
	}
	slices.SortStableFunc(r.Findings, func(a, b Finding) int { return int(b.Severity) - int(a.Severity) })
	r.Partial = map[string]string{}
	for id, why := range e.Partial {
		if slices.Contains(r.Ran, id) {
			r.Partial[id] = why
		}
	}
	return r, nil
}

// capped keeps at most n lines of evidence, saying how many more there were.
func capped(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(lines[:n:n], fmt.Sprintf("(and %d more)", len(lines)-n))
}

// tally keeps lines of evidence once each, in the order first seen, with how often each
// came: a log that repeats a line a thousand times shows it once, "(×1000)".
type tally struct {
	order []string
	n     map[string]int
}

func (t *tally) add(line string) {
	if t.n == nil {
		t.n = map[string]int{}
	}
	if t.n[line] == 0 {
		t.order = append(t.order, line)
	}
	t.n[line]++
}

func (t *tally) lines() []string {
	out := make([]string, 0, len(t.order))
	for _, l := range t.order {
		if n := t.n[l]; n > 1 {
			l = fmt.Sprintf("%s (×%d)", l, n)
		}
		out = append(out, l)
	}
	return out
}
