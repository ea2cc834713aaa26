package doctor

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/samplehost"
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

// NCCLTopology writes the one thing its request asks for: a VM's manifest that a guest
// reads back, a host's topology, and a file it cannot read as an *InputError that names
// the file, so that the CLI can name its flag.
func TestNCCLTopology(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

	vm, err := NCCLTopology(h, inv, NCCLRequest{VM: 131, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if vm.Manifest == nil || vm.XML != "" || vm.P2PVerdict == nil {
		t.Fatalf("--vm 131: manifest %v, xml %d bytes, verdict %v", vm.Manifest != nil, len(vm.XML), vm.P2PVerdict)
	}
	back, err := vmlayout.ParseManifest(vm.Artifact)
	if err != nil || back.VMID != 131 || len(back.Devices) != len(vm.Manifest.Devices) {
		t.Fatalf("the manifest written does not read back: %v %+v", err, back)
	}
	if !strings.HasSuffix(string(vm.Artifact), "}\n") || !strings.Contains(string(vm.Artifact), "\n  \"") {
		t.Errorf("the manifest is not indented JSON ending in a newline:\n%.200s", vm.Artifact)
	}

	topo, err := NCCLTopology(h, inv, NCCLRequest{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if topo.Manifest != nil || !strings.HasPrefix(topo.XML, "<system") || string(topo.Artifact) != topo.XML || topo.P2PVerdict != nil {
		t.Errorf("the host's topology: %.200s", topo.XML)
	}

	missing := filepath.Join(t.TempDir(), "none.json")
	for _, req := range []NCCLRequest{{Manifest: missing}, {VM: 131, P2PFile: missing}} {
		_, err := NCCLTopology(h, inv, req)
		var input *InputError
		if !errors.As(err, &input) || input.Path != missing || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%+v: %v, want an *InputError for %s", req, err, missing)
		}
	}
}
