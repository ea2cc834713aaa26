package vmlayout

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// LayoutReport is pve vm-layout's change of a VM's config, as -o json gives it
// (docs/json.md), with what its write did.
type LayoutReport struct {
	VMID int    `json:"vmid"`
	Path string `json:"path"`
	// LaidOut: the VM already has gpusplit's layout, and nothing changes.
	LaidOut bool     `json:"laid_out"`
	Diff    string   `json:"diff"`
	Layout  *Layout  `json:"layout"`
	Notes   []string `json:"notes"`
	pve.GuestWrite
	// Edit is the change to write.
	Edit pve.Edit `json:"-"`
}

// PlanLayout works out the layout of VM vmid on the host of tree t (Predict, Apply) and
// the change of its config that carries it, unwritten; a VM laid out already is a
// report with LaidOut and no change.
func PlanLayout(h *host.Host, t *pci.Tree, vmid int, now time.Time) (*LayoutReport, error) {
	path := pve.GuestPath(pve.QEMU, vmid)
	m, err := Predict(h, t, vmid, now)
	if errors.Is(err, ErrLaidOut) {
		return &LayoutReport{VMID: vmid, Path: path, LaidOut: true, Notes: []string{}, GuestWrite: pve.GuestWrite{Problems: []string{}, Files: []pve.FileResult{}}}, nil
	}
	if err != nil {
		return nil, err
	}
	guest, err := pve.ReadGuest(h, pve.QEMU, vmid)
	if err != nil {
		return nil, err
	}
	old := guest.String()
	l, err := Apply(guest, t, m)
	if err != nil {
		return nil, err
	}
	notes := append([]string{}, l.Notes...)
	if pve.Running(h, pve.QEMU, vmid) {
		notes = append(notes, fmt.Sprintf("VM %d is running: the layout takes effect when it is stopped and started again", vmid))
	}
	r := &LayoutReport{VMID: vmid, Path: path, Diff: pve.Diff(path, old, guest.String()), Layout: l, Notes: notes}
	r.Edit = pve.Edit{Path: path, Old: old, New: guest.String()}
	return r, nil
}

// WriteText prints the change: the diff with its notes, or that there is none.
func (r *LayoutReport) WriteText(w io.Writer) {
	if r.LaidOut {
		fmt.Fprintf(w, "VM %d already has gpusplit's layout: nothing to change.\n", r.VMID)
		return
	}
	pve.WriteDiff(w, r.Diff, r.Notes)
}
