package doctor

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/nccl"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// NCCLReport is what nccl-topo wrote, and its JSON form (docs/json.md): the topology
// file or a VM's manifest, and whether NCCL_P2P_DISABLE=1 is advised, which is the
// doctor's P2PAdvice or a VM's verdict.
type NCCLReport struct {
	XML        string             `json:"xml,omitempty"`
	Manifest   *vmlayout.Manifest `json:"manifest,omitempty"`
	File       string             `json:"file,omitempty"`
	P2PDisable bool               `json:"p2p_disable"`
	P2PReasons []Finding          `json:"p2p_reasons"`
	// P2PVerdict is a VM's verdict, from the host's evidence in its manifest: the same
	// on the host (--vm) and in the guest (--manifest).
	P2PVerdict *vmlayout.P2PVerdict `json:"p2p_verdict,omitempty"`
	Notes      []string             `json:"notes"`
	Warnings   []string             `json:"warnings"`
	// Artifact is the file written: the topology, or the manifest.
	Artifact []byte `json:"-"`
	// Guest is the manifest read in the guest (--manifest).
	Guest *vmlayout.Manifest `json:"-"`
}

// SetVerdict makes a VM's verdict the result's advice.
func (r *NCCLReport) SetVerdict(v vmlayout.P2PVerdict) {
	r.P2PVerdict, r.P2PDisable, r.P2PReasons = &v, v.Disable, []Finding{}
	for _, f := range v.Reasons {
		sev := Info
		switch f.Severity {
		case "warning":
			sev = Warning
		case "error":
			sev = Error
		}
		r.P2PReasons = append(r.P2PReasons, Finding{ID: f.ID, Severity: sev, Title: f.Title, Evidence: []string{}})
	}
}

// Advise decides whether NCCL_P2P_DISABLE=1 is advised: from the manifest's verdict
// on the host, from the manifest's verdict and the faults of the guest's own kernel log
// in the guest, and from the doctor's P2PChecks on a host.
func (r *NCCLReport) Advise(h *host.Host, inv *inventory.Inventory) error {
	switch {
	case r.Manifest != nil:
		r.SetVerdict(r.Manifest.Verdict())
	case r.Guest != nil:
		// The host's verdict, and faults the guest's own kernel logged.
		v := r.Guest.Verdict()
		_, faults, err := P2PAdvice(h, inv, "iommu-page-faults")
		if err != nil {
			return err
		}
		for _, f := range faults {
			v.Disable = true
			v.Reasons = append(v.Reasons, vmlayout.P2PFinding{ID: "guest " + f.ID, Severity: f.Severity.String(), Title: f.Title})
		}
		r.SetVerdict(v)
	default:
		var err error
		if r.P2PDisable, r.P2PReasons, err = P2PAdvice(h, inv, P2PChecks...); err != nil {
			return err
		}
	}
	return nil
}

// WriteAdvice tells a person, vmid being the VM of a manifest (0 for a topology file),
// the notes, where the file went and what to do with it, and the advice on
// NCCL_P2P_DISABLE=1.
func (r *NCCLReport) WriteAdvice(msg io.Writer, vmid int) {
	for _, n := range r.Notes {
		fmt.Fprintf(msg, "note: %s\n", n)
	}
	switch {
	case vmid != 0 && r.File == "":
		fmt.Fprintf(msg, "# save this manifest (or write it with --file), copy it into VM %d and there run:\n", vmid)
		fmt.Fprintf(msg, "#   gpusplit nccl-topo --manifest vm%d-manifest.json --file /etc/nccl-topo.xml\n", vmid)
	case vmid != 0:
		fmt.Fprintf(msg, "wrote the manifest of VM %d to %s; copy it into the VM and there run:\n", vmid, r.File)
		fmt.Fprintf(msg, "  gpusplit nccl-topo --manifest %s --file /etc/nccl-topo.xml\n", filepath.Base(r.File))
	case r.File == "":
		fmt.Fprintf(msg, "# save this (or write it with --file PATH) and export NCCL_TOPO_FILE=<its path>\n")
	default:
		fmt.Fprintf(msg, "wrote %s\nexport NCCL_TOPO_FILE=%s\n", r.File, r.File)
	}
	switch {
	case r.P2PVerdict != nil && r.P2PDisable:
		fmt.Fprintf(msg, "export NCCL_P2P_DISABLE=1   # advised, from the host's evidence in the manifest:\n")
		for _, f := range r.P2PReasons {
			fmt.Fprintf(msg, "#   %s: %s\n", f.ID, f.Title)
		}
	case r.P2PVerdict != nil:
		fmt.Fprintf(msg, "# NCCL_P2P_DISABLE=1 is not advised: %s\n", r.P2PReasons[len(r.P2PReasons)-1].Title)
	case r.P2PDisable:
		fmt.Fprintf(msg, "export NCCL_P2P_DISABLE=1   # advised; the doctor found:\n")
		for _, f := range r.P2PReasons {
			fmt.Fprintf(msg, "#   %s: %s\n", f.ID, f.Title)
		}
	default:
		fmt.Fprintf(msg, "# NCCL_P2P_DISABLE=1 is not advised: the doctor's %s found nothing against peer-to-peer\n", strings.Join(P2PChecks, ", "))
	}
}

// NCCLRequest says what nccl-topo writes: the manifest of VM on its Proxmox host, the
// topology of a guest from the Manifest file written on its host, or, with neither, the
// topology of this host's GPUs as NCCL detects it.
type NCCLRequest struct {
	VM       int
	Manifest string
	// P2PFile, with VM, is a p2p result saved on this host (p2p --save), carried into the
	// manifest.
	P2PFile string
	// WithGPUs adds <gpu dev= sm=> elements to a topology.
	WithGPUs bool
	Now      time.Time
}

// InputError is a file an NCCLRequest names (Manifest or P2PFile) that could not be read.
type InputError struct {
	Path string
	Err  error
}

func (e *InputError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// maxManifest caps a manifest: 16 entries of 8 functions with their notes are ~30 KB.
const maxManifest = 4 << 20

// maxP2PResult caps a saved p2p result: 16 GPUs' pairs with their checks are ~200 KB.
const maxP2PResult = 8 << 20

// NCCLTopology writes what req asks for into a report, with the advice on
// NCCL_P2P_DISABLE=1 (Advise). Its errors include nccl.ErrNoGPU on a host without GPUs,
// an *InputError, and for a P2PFile vmlayout's *NotP2PResultError and ErrNoPairs.
func NCCLTopology(h *host.Host, inv *inventory.Inventory, req NCCLRequest) (*NCCLReport, error) {
	res := &NCCLReport{Notes: []string{}, Warnings: []string{}}
	switch {
	case req.VM != 0:
		m, err := vmlayout.Predict(h, inv.Tree, req.VM, req.Now)
		if err != nil {
			return nil, err
		}
		if m.P2P, err = VMHostP2P(h, inv, m, req.P2PFile); err != nil {
			return nil, err
		}
		res.Manifest, res.Notes = m, append([]string{}, m.Notes...)
		if res.Artifact, err = m.Marshal(); err != nil {
			return nil, err
		}
	case req.Manifest != "":
		x, err := guestTopology(h, inv, req.Manifest, res)
		if err != nil {
			return nil, err
		}
		res.Artifact = nccl.Marshal(x)
		res.XML = string(res.Artifact)
	default:
		x, warnings, notes, err := nccl.HostTopology(h, inv, nccl.Options{WithGPUs: req.WithGPUs})
		if err != nil {
			return nil, err
		}
		res.Warnings = append(res.Warnings, warnings...)
		res.Notes = append(res.Notes, notes...)
		res.Artifact = nccl.Marshal(x)
		res.XML = string(res.Artifact)
	}
	return res, res.Advise(h, inv)
}

// guestTopology is the topology of a VM's GPUs from the manifest written on its host.
func guestTopology(h *host.Host, inv *inventory.Inventory, manifest string, res *NCCLReport) (*nccl.Node, error) {
	data, err := host.ReadUserFile(manifest, maxManifest, "a VM manifest")
	if err != nil {
		return nil, &InputError{manifest, err}
	}
	m, err := vmlayout.ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", manifest, err)
	}
	pairs, err := vmlayout.Match(m, inv.Tree, inv.Devices())
	if err != nil {
		return nil, err
	}
	x, notes := vmlayout.GuestTopology(h, m, pairs)
	res.Notes = append(res.Notes, notes...)
	res.Guest = m
	return x, nil
}

// VMHostP2P is the host's evidence on peer-to-peer for a VM's manifest: the warnings and
// errors of HostP2PChecks, and the pairs of the VM's GPUs in the p2p result saved in
// p2pFile ("" for none; vmlayout.NewHostP2P). Besides its own errors it returns an
// *InputError for a file it cannot read.
func VMHostP2P(h *host.Host, inv *inventory.Inventory, m *vmlayout.Manifest, p2pFile string) (*vmlayout.HostP2P, error) {
	_, findings, err := P2PAdvice(h, inv, HostP2PChecks...)
	if err != nil {
		return nil, err
	}
	var kept []vmlayout.P2PFinding
	for _, f := range findings {
		kept = append(kept, vmlayout.P2PFinding{ID: f.ID, Severity: f.Severity.String(), Title: f.Title})
	}
	var saved []byte
	if p2pFile != "" {
		if saved, err = host.ReadUserFile(p2pFile, maxP2PResult, "a p2p result"); err != nil {
			return nil, &InputError{p2pFile, err}
		}
	}
	return vmlayout.NewHostP2P(HostP2PChecks, kept, m, saved, p2pFile)
}
