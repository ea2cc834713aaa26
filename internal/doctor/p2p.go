package doctor

import (
	"io"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
)

// P2PChecks are the doctor's checks whose findings decide whether NCCL_P2P_DISABLE=1 is
// advised: corrupted peer DMA under the IOMMU, SEV-SNP's forced translation, and GPUs
// that a VM cannot reach each other between.
var P2PChecks = []string{"iommu-page-faults", "sev-snp", "p2p-topology"}

// HostP2PChecks are the host's checks whose findings a VM's manifest carries: what the
// guest cannot see of peer-to-peer between its GPUs.
var HostP2PChecks = []string{"iommu-page-faults", "sev-snp", "iommu-translated"}

// P2PAdvice runs the doctor's peer-to-peer checks: NCCL_P2P_DISABLE=1 is advised when any
// of them warns or worse.
func P2PAdvice(h *host.Host, inv *inventory.Inventory, checks ...string) (bool, []Finding, error) {
	var log io.Reader
	r, logErr := h.OpenKernelLog()
	if logErr == nil {
		defer r.Close()
		log = r
	}
	env, err := NewEnv(h, inv, log, logErr)
	if err != nil {
		return false, nil, err
	}
	report, err := Run(env, checks)
	if err != nil {
		return false, nil, err
	}
	reasons := []Finding{}
	for _, f := range report.Findings {
		if f.Severity >= Warning {
			reasons = append(reasons, f)
		}
	}
	return len(reasons) > 0, reasons, nil
}
