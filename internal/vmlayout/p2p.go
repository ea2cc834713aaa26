package vmlayout

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// HostP2P is what the host knows of peer-to-peer between the VM's GPUs, carried in the
// manifest so that the guest's verdict is the host's: the guest sees only a flat tree.
type HostP2P struct {
	// Checks are the doctor's checks run on the host; Findings their warnings and
	// errors.
	Checks   []string     `json:"checks"`
	Findings []P2PFinding `json:"findings"`
	// Measured are the pairs of the VM's GPUs in a gpusplit p2p result saved on the host
	// (p2p --save), and MeasuredFile where it was read.
	Measured     []P2PPair `json:"measured,omitempty"`
	MeasuredFile string    `json:"measured_file,omitempty"`
}

// P2PFinding is a doctor finding, as the manifest keeps it.
type P2PFinding struct {
	ID       string `json:"id"`
	Severity string `json:"severity"`
	Title    string `json:"title"`
}

// P2PPair is one measured pair of GPUs, by host address, with gpusplit p2p's verdict.
type P2PPair struct {
	Src     string `json:"src"`
	Dst     string `json:"dst"`
	Verdict string `json:"verdict"`
	Why     string `json:"why"`
}

// P2PVerdict is whether NCCL_P2P_DISABLE=1 is advised for the VM's GPUs, and why: the
// same on the host (nccl-topo --vm) and in the guest (nccl-topo --manifest), since both
// read it from the manifest.
type P2PVerdict struct {
	Disable bool         `json:"disable"`
	Reasons []P2PFinding `json:"reasons"`
	// Unsafe says peer copies must not be enabled between these GPUs (pve p2p-clique
	// refuses): corruption was seen, or SEV-SNP forces translation.
	Unsafe bool `json:"unsafe"`
	// Clique is the x-nv-gpudirect-clique every GPU of the VM is in; -1 when they are
	// not all in one.
	Clique int `json:"clique"`
}

// Verdict works out the P2P verdict from the host's evidence in the manifest.
func (m *Manifest) Verdict() P2PVerdict {
	v := P2PVerdict{Reasons: []P2PFinding{}, Clique: m.sharedClique()}
	if m.P2P == nil {
		v.Reasons = append(v.Reasons, P2PFinding{ID: "manifest", Severity: "info",
			Title: "the manifest carries no evidence of the host's: write it again on the host with this gpusplit (nccl-topo --vm)"})
		return v
	}
	for _, f := range m.P2P.Findings {
		switch {
		case f.ID == "iommu-page-faults" && f.Severity == "error", f.ID == "sev-snp" && f.Severity != "info":
			v.Unsafe = true
			v.Reasons = append(v.Reasons, P2PFinding{ID: "host " + f.ID, Severity: f.Severity, Title: f.Title})
		}
	}
	for _, p := range m.P2P.Measured {
		if p.Verdict == "corrupt" {
			v.Unsafe = true
			v.Reasons = append(v.Reasons, P2PFinding{ID: "host p2p", Severity: "error", Title: fmt.Sprintf("%s -> %s: %s", p.Src, p.Dst, p.Why)})
		}
	}
	if v.Unsafe {
		v.Disable = true
		return v
	}
	checked := "the host's " + strings.Join(m.P2P.Checks, ", ")
	if m.P2P.MeasuredFile != "" {
		checked += fmt.Sprintf(" and its p2p run (%d pairs of these GPUs)", len(m.P2P.Measured))
	}
	if v.Clique >= 0 {
		v.Reasons = append(v.Reasons, P2PFinding{ID: "clique", Severity: "info",
			Title: fmt.Sprintf("%s found nothing against peer-to-peer, and the GPUs are in gpudirect clique %d: the guest's NVIDIA driver may give them peer access", checked, v.Clique)})
		return v
	}
	v.Reasons = append(v.Reasons, P2PFinding{ID: "clique", Severity: "info",
		Title: fmt.Sprintf("%s found nothing against peer-to-peer; without x-nv-gpudirect-clique the guest's NVIDIA driver gives these GPUs no peer access, and NCCL copies through host memory by itself (gpusplit pve p2p-clique --vm %d sets it)", checked, m.VMID)})
	return v
}

// sharedClique is the clique all GPU entries are in, or -1.
func (m *Manifest) sharedClique() int {
	c, n := -1, 0
	for _, d := range m.Devices {
		if !d.IsGPU() {
			continue
		}
		if d.Clique == nil || (n > 0 && *d.Clique != c) {
			return -1
		}
		c, n = *d.Clique, n+1
	}
	if n < 2 {
		return -1
	}
	return c
}

// cliqueSet matches the -set option that puts a qemu-server device in a clique.
var cliqueSet = lazyre.New(`-set\s+device\.(hostpci\d+)\.x-nv-gpudirect-clique=(\d+)`)

// cliqueProp matches the property on one of vm-layout's own vfio-pci devices.
var cliqueProp = lazyre.New(`,x-nv-gpudirect-clique=\d+`)

// readCliques returns the clique each hostpciN is given in the VM's args.
func readCliques(g *pve.Guest) map[string]int {
	args, _ := g.Get("args")
	out := map[string]int{}
	for _, m := range cliqueSet.FindAllStringSubmatch(args, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}

// MaxClique is the highest clique id: QEMU's property is 4 bits (0–15).
const MaxClique = 15

// UnsafeError refuses a clique that the host's evidence speaks against.
type UnsafeError struct {
	VMID    int
	Verdict P2PVerdict
}

func (e UnsafeError) Error() string {
	var why []string
	for _, r := range e.Verdict.Reasons {
		why = append(why, r.ID+": "+r.Title)
	}
	return fmt.Sprintf("the host's evidence says peer copies between VM %d's GPUs are unsafe, so they get no clique:\n  %s", e.VMID, strings.Join(why, "\n  "))
}

// SetClique puts the VM's GPUs into gpudirect clique n, which tells the NVIDIA driver in
// the guest that they may use peer access to each other: -set
// device.hostpciN.x-nv-gpudirect-clique=n in args for each single-function GPU entry
// (qemu-server names those devices hostpciN), or the property on vm-layout's own
// vfio-pci devices. A multi-function entry is refused: qemu-server names its functions
// hostpciN.0, hostpciN.1, and QEMU's -set does not reach a device id with a dot. On an
// error g is left as it was.
func SetClique(g *pve.Guest, m *Manifest, n int) ([]string, error) {
	if n < 0 || n > MaxClique {
		return nil, fmt.Errorf("clique %d: QEMU's x-nv-gpudirect-clique is 0 to %d", n, MaxClique)
	}
	if v := m.Verdict(); v.Unsafe {
		return nil, UnsafeError{VMID: g.ID, Verdict: v}
	}
	entries := map[string][]Device{}
	for _, d := range m.Devices {
		entries[d.Hostpci] = append(entries[d.Hostpci], d)
	}
	var gpus, multi []string
	first := pci.Address{}
	for _, k := range slices.SortedFunc(maps.Keys(entries), func(a, b string) int {
		x, _ := strconv.Atoi(strings.TrimPrefix(a, "hostpci"))
		y, _ := strconv.Atoi(strings.TrimPrefix(b, "hostpci"))
		return cmp.Compare(x, y)
	}) {
		fs := entries[k]
		if !slices.ContainsFunc(fs, Device.IsGPU) {
			continue
		}
		if len(fs) > 1 {
			if len(multi) == 0 {
				first = fs[0].HostAddress
			}
			multi = append(multi, k)
		}
		gpus = append(gpus, k)
	}
	if len(multi) > 0 {
		return nil, fmt.Errorf("%s pass several functions each: qemu-server names them %s.0, %s.1…, which QEMU's -set cannot reach (QEMU: there is no device \"%s\" defined); give each GPU an entry of its GPU function alone (host=%s, or a mapping of that function: CUDA needs nothing of the HDMI audio function), or lay the VM out with gpusplit pve vm-layout, whose vfio-pci devices take the property",
			strings.Join(multi, ", "), multi[0], multi[0], multi[0], first)
	}
	if len(gpus) < 2 {
		return nil, fmt.Errorf("VM %d passes %d GPU: a clique is for peer access between GPUs", g.ID, len(gpus))
	}
	args, _ := g.Get("args")
	args = strings.TrimSpace(cliqueSet.ReplaceAllString(args, ""))
	args = strings.Join(strings.Fields(args), " ")
	var sets []string
	for _, k := range gpus {
		sets = append(sets, fmt.Sprintf("-set device.%s.x-nv-gpudirect-clique=%d", k, n))
	}
	if args != "" {
		args += " "
	}
	g.Set("args", args+strings.Join(sets, " "))
	return []string{fmt.Sprintf("VM %d: %s in gpudirect clique %d; takes effect at the VM's next start", g.ID, strings.Join(gpus, ", "), n)}, nil
}

// SetLayoutClique gives vm-layout's vfio-pci GPU functions (gpusplit-hostpciN.0) the
// clique property; other functions are left alone.
func SetLayoutClique(g *pve.Guest, n int) ([]string, error) {
	if n < 0 || n > MaxClique {
		return nil, fmt.Errorf("clique %d: QEMU's x-nv-gpudirect-clique is 0 to %d", n, MaxClique)
	}
	args, _ := g.Get("args")
	fields := strings.Fields(args)
	var set []string
	for _, i := range layoutGPUs(fields) {
		fields[i] = cliqueProp.ReplaceAllString(fields[i], "") + fmt.Sprintf(",x-nv-gpudirect-clique=%d", n)
		set = append(set, propOf(fields[i], "id"))
	}
	if len(set) < 2 {
		return nil, errors.New("the layout holds fewer than two GPUs: a clique is for peer access between GPUs")
	}
	g.Set("args", strings.Join(fields, " "))
	return []string{fmt.Sprintf("VM %d: %s in gpudirect clique %d; takes effect at the VM's next start", g.ID, strings.Join(set, ", "), n)}, nil
}

// LaidOut is the manifest of a VM whose GPUs are in vm-layout's own devices, as far as
// the host's P2P evidence needs it: each GPU function (gpusplit-hostpciN.0 or
// gpusplit-hostpciN) by its host address.
func LaidOut(g *pve.Guest) *Manifest {
	m := &Manifest{VMID: g.ID, Devices: []Device{}}
	args, _ := g.Get("args")
	fields := strings.Fields(args)
	for _, i := range layoutGPUs(fields) {
		id := propOf(fields[i], "id")
		if a, err := pci.ParseAddress(propOf(fields[i], "host")); err == nil {
			m.Devices = append(m.Devices, Device{Hostpci: strings.TrimPrefix(strings.TrimSuffix(id, ".0"), IDPrefix), HostAddress: a, Class: "0x030000"})
		}
	}
	return m
}

// layoutGPUs returns the indexes, in an args line split into fields, of vm-layout's
// vfio-pci devices that are an entry's first function (gpusplit-hostpciN.0, or
// gpusplit-hostpciN of a single function): the GPUs.
func layoutGPUs(fields []string) []int {
	var out []int
	for i, f := range fields {
		if i == 0 || fields[i-1] != "-device" || !strings.HasPrefix(f, "vfio-pci,") {
			continue
		}
		id := propOf(f, "id")
		if strings.HasPrefix(id, IDPrefix+"hostpci") && (!strings.Contains(id, ".") || strings.HasSuffix(id, ".0")) {
			out = append(out, i)
		}
	}
	return out
}

// propOf returns a property of a -device value: "id" of "vfio-pci,host=…,id=x".
func propOf(dev, key string) string {
	for _, p := range strings.Split(dev, ",") {
		if v, ok := strings.CutPrefix(p, key+"="); ok {
			return v
		}
	}
	return ""
}
