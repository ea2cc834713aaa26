package p2p

import (
	"fmt"
	"slices"
	"strings"
)

// Verdicts of a pair.
const (
	OK           = "ok"
	Corrupt      = "corrupt"        // a copy delivered other bytes than were sent
	NoPeerAccess = "no-peer-access" // the driver refuses peer access: copies go through host memory
	Slow         = "slow"           // peer copies well below what the link and the relation allow
)

// slowShares hold the share of a PCIe link's one-way rate below which peer copies
// count as slow, by the pair's relation: through switches GPUs reach most of their
// link, through the CPU's root complex less, across the socket interconnect less
// again. They are deliberately low: a pair below them is broken or misconfigured, not
// just unlucky.
var slowShares = []struct {
	relation string
	share    float64
}{{"PIX", 0.6}, {"PXB", 0.6}, {"PHB", 0.45}, {"NODE", 0.45}, {"SYS", 0.3}}

func slowShare(relation string) (float64, bool) {
	for _, s := range slowShares {
		if s.relation == relation {
			return s.share, true
		}
	}
	return 0, false
}

func verdict(p *Pair, opt Options) {
	for _, c := range p.Checks {
		if c.Bad > 0 {
			p.Verdict = Corrupt
			p.Why = fmt.Sprintf("%s copy of %s: %d of %d bytes wrong over %d passes (%.3g%%), the first at offset %#x",
				c.Path, Size(c.Size), c.Bad, c.Size*int64(opt.Passes), opt.Passes, 100*c.Fraction, c.FirstBad)
			return
		}
	}
	if p.src == p.dst {
		p.Verdict, p.Why = OK, "copies within the GPU arrive intact"
		return
	}
	if !p.PeerAccess {
		p.Verdict, p.Why = NoPeerAccess, "the driver refuses peer access (cuDeviceCanAccessPeer): copies are staged through host memory; they arrive intact"
		return
	}
	link := min(opt.LinkGBps(p.Src), opt.LinkGBps(p.Dst))
	if share, ok := slowShare(p.Relation); ok && link > 0 && p.Uni.Enabled > 0 && p.Uni.Enabled < share*link {
		p.Verdict = Slow
		p.Why = fmt.Sprintf("%.1f GB/s with peer access, under %.0f%% of the %.1f GB/s of the link, expected of a %s pair", p.Uni.Enabled, 100*share, link, p.Relation)
		return
	}
	p.Verdict, p.Why = OK, "peer and staged copies arrive intact"
}

// Summary is what a run means for NCCL.
type Summary struct {
	Verdicts map[string]int `json:"verdicts"` // pairs per verdict
	// Environment is what NCCL should be given: NCCL_P2P_DISABLE or NCCL_P2P_LEVEL.
	Environment map[string]string `json:"environment"`
	Advice      []string          `json:"advice"`
	Corrupt     bool              `json:"corrupt"`
}

// ncclTypes are NCCL's path types of the nvidia-smi relations: NCCL has no NODE, it
// calls a path between host bridges of one node PHB (src/graph/paths.cc).
var ncclTypes = []struct {
	relation string
	t        int
}{{"PIX", 4}, {"PXB", 5}, {"PHB", 8}, {"NODE", 8}, {"SYS", 9}}

// ncclType is NCCL's path type of a relation, 0 for one it does not know.
func ncclType(relation string) int {
	for _, n := range ncclTypes {
		if n.relation == relation {
			return n.t
		}
	}
	return 0
}

// ncclNames are NCCL's names of its path types.
var ncclNames = []struct {
	t    int
	name string
}{{4, "PIX"}, {5, "PXB"}, {8, "PHB"}, {9, "SYS"}}

func ncclName(t int) string {
	for _, n := range ncclNames {
		if n.t == t {
			return n.name
		}
	}
	return ""
}

func summarize(pairs []Pair, opt Options) Summary {
	s := Summary{Verdicts: map[string]int{}, Environment: map[string]string{}, Advice: []string{}}
	var staged, peer []string
	lowest := 10 // the lowest NCCL path type whose peer copies corrupt
	for _, p := range pairs {
		if p.Verdict == "" {
			continue // not judged: the run stopped
		}
		s.Verdicts[p.Verdict]++
		for _, c := range p.Checks {
			if c.Bad == 0 {
				continue
			}
			name := fmt.Sprintf("%s -> %s", p.Src, p.Dst)
			if c.Path == PathPeer {
				if !slices.Contains(peer, name) {
					peer = append(peer, name)
				}
				lowest = min(lowest, ncclType(p.Relation)) // 0 for a relation unknown: nothing is safe
			} else if !slices.Contains(staged, name) {
				staged = append(staged, name)
			}
		}
	}
	s.Corrupt = len(staged)+len(peer) > 0
	if len(staged) > 0 {
		s.Advice = append(s.Advice, fmt.Sprintf("copies that do not use peer access arrive corrupted (%s): no NCCL setting cures that; look at the IOMMU, the memory and the GPUs (gpusplit doctor)", strings.Join(staged, ", ")))
	}
	switch {
	case len(peer) == 0:
	case lowest <= ncclType("PIX"):
		s.Environment["NCCL_P2P_DISABLE"] = "1"
		s.Advice = append(s.Advice, fmt.Sprintf("peer copies arrive corrupted (%s) even between the closest GPUs: disable P2P in NCCL, which then copies through host memory", strings.Join(peer, ", ")))
	default:
		level := 0
		for _, n := range ncclNames {
			if n.t < lowest && n.t > level {
				level = n.t
			}
		}
		s.Environment["NCCL_P2P_LEVEL"] = ncclName(level)
		s.Advice = append(s.Advice, fmt.Sprintf("peer copies arrive corrupted on %s paths and beyond (%s), intact on closer ones: NCCL_P2P_LEVEL=%s keeps NCCL's P2P to those", ncclName(lowest), strings.Join(peer, ", "), ncclName(level)))
	}
	if !s.Corrupt && len(pairs) > 0 {
		s.Advice = append(s.Advice, "every copy arrived intact: NCCL needs no P2P setting")
	}
	if s.Verdicts[NoPeerAccess] > 0 {
		s.Advice = append(s.Advice, fmt.Sprintf("%d pairs have no peer access: NCCL copies between them through host memory (SHM), which is slower but correct", s.Verdicts[NoPeerAccess]))
	}
	if s.Verdicts[Slow] > 0 {
		s.Advice = append(s.Advice, fmt.Sprintf("%d pairs are slow for their link: check the links (gpusplit inventory, doctor's link-degraded) and ACS redirection on the switches (doctor's p2p-topology)", s.Verdicts[Slow]))
	}
	return s
}

// Size writes a byte count the way the report does: 4 KiB, 16 MiB.
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
