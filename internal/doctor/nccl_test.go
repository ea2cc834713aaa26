package doctor

import (
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

func TestNCCLReportAdvice(t *testing.T) {
	r := &NCCLReport{}
	r.SetVerdict(vmlayout.P2PVerdict{Disable: true, Reasons: []vmlayout.P2PFinding{{ID: "sev-snp", Severity: "error", Title: "SEV-SNP"}, {ID: "x", Severity: "warning", Title: "X"}}})
	if !r.P2PDisable || len(r.P2PReasons) != 2 || r.P2PReasons[0].Severity != Error || r.P2PReasons[1].Severity != Warning || r.P2PReasons[0].Evidence == nil {
		t.Fatalf("%+v", r)
	}
	var b strings.Builder
	r.WriteAdvice(&b, 131)
	want := "# save this manifest (or write it with --file), copy it into VM 131 and there run:\n" +
		"#   gpusplit nccl-topo --manifest vm131-manifest.json --file /etc/nccl-topo.xml\n" +
		"export NCCL_P2P_DISABLE=1   # advised, from the host's evidence in the manifest:\n" +
		"#   sev-snp: SEV-SNP\n#   x: X\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	(&NCCLReport{File: "/etc/nccl-topo.xml", Notes: []string{"n"}}).WriteAdvice(&b, 0)
	want = "note: n\nwrote /etc/nccl-topo.xml\nexport NCCL_TOPO_FILE=/etc/nccl-topo.xml\n" +
		"# NCCL_P2P_DISABLE=1 is not advised: the doctor's iommu-page-faults, sev-snp, p2p-topology found nothing against peer-to-peer\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
