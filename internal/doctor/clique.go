package doctor

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

// CliqueReport is pve p2p-clique's change of a VM's config, as -o json gives it
// (docs/json.md), with what its write did.
type CliqueReport struct {
	VMID    int                 `json:"vmid"`
	Path    string              `json:"path"`
	Clique  int                 `json:"clique"`
	Verdict vmlayout.P2PVerdict `json:"verdict"`
	Diff    string              `json:"diff"`
	Notes   []string            `json:"notes"`
	pve.GuestWrite
	// Edit is the change to write.
	Edit pve.Edit `json:"-"`
}

// PlanClique works out the change that puts VM vmid's GPUs in gpudirect clique, on
// Proxmox's hostpci devices or on those of gpusplit's layout, unwritten. The host's
// evidence on peer-to-peer (VMHostP2P, with the p2p result saved in p2pFile, if any)
// refuses it for a layout whose copies are unsafe (vmlayout.UnsafeError).
func PlanClique(h *host.Host, inv *inventory.Inventory, vmid, clique int, p2pFile string, now time.Time) (*CliqueReport, error) {
	guest, err := pve.ReadGuest(h, pve.QEMU, vmid)
	if err != nil {
		return nil, err
	}
	old := guest.String()
	r := &CliqueReport{VMID: vmid, Path: pve.GuestPath(pve.QEMU, vmid), Clique: clique, Notes: []string{}}
	m, err := vmlayout.Predict(h, inv.Tree, vmid, now)
	switch {
	case errors.Is(err, vmlayout.ErrLaidOut):
		m = vmlayout.LaidOut(guest)
		if m.P2P, err = VMHostP2P(h, inv, m, p2pFile); err != nil {
			return nil, err
		}
		if r.Verdict = m.Verdict(); r.Verdict.Unsafe {
			return nil, vmlayout.UnsafeError{VMID: vmid, Verdict: r.Verdict}
		}
		r.Notes, err = vmlayout.SetLayoutClique(guest, clique)
	case err != nil:
		return nil, err
	default:
		if m.P2P, err = VMHostP2P(h, inv, m, p2pFile); err != nil {
			return nil, err
		}
		r.Verdict = m.Verdict()
		r.Notes, err = vmlayout.SetClique(guest, m, clique)
	}
	if err != nil {
		return nil, err
	}
	if pve.Running(h, pve.QEMU, vmid) {
		r.Notes = append(r.Notes, fmt.Sprintf("VM %d is running: the clique takes effect when it is stopped and started again", vmid))
	}
	r.Diff = pve.Diff(r.Path, old, guest.String())
	r.Edit = pve.Edit{Path: r.Path, Old: old, New: guest.String()}
	return r, nil
}

// WriteText prints the change: the diff with its notes, and how to check it in the guest.
func (r *CliqueReport) WriteText(w io.Writer) {
	pve.WriteDiff(w, r.Diff, r.Notes)
	fmt.Fprintln(w, "# in the guest, after its next start: nvidia-smi topo -p2p r shows OK between these GPUs, and gpusplit p2p measures them")
}
