package split

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// Tx is what Apply needs beside the change.
type Tx struct {
	H      *host.Host
	Lock   *bind.Lock // the driver lock, held by the caller from the re-check to the end
	Kernel bind.Kernel
	Inv    *inventory.Inventory // the inventory the drivers' plan was made on
	Bind   bind.Options
	// Services make the device nodes of GPUs back on nvidia, and run systemctl.
	Services hook.Services
	// Replan plans the split again once the drivers moved: Proxmox's part needs the
	// minors that GPUs back on nvidia were given.
	Replan  func() (*inventory.Inventory, *plan.Plan, error)
	Command string
	Logf    func(format string, a ...any)
}

// Result is what Apply did, part by part.
type Result struct {
	Drivers *bind.Result
	Proxmox *pve.SyncReport
	Hooks   []*pve.HookReport
	Boot    []persist.Change
	// Commands are the systemctl and udevadm runs that follow the boot files.
	Commands []persist.Command
	// Undone: a part failed, and the parts before it were put back; UndoErrs are those
	// that could not be.
	Undone   bool
	UndoErrs []error
}

// Apply makes the change as one transaction, under the driver lock the caller holds,
// after the caller checked it again under that lock: the drivers move first (journaled,
// and put back by bind.Apply itself when a device fails); then the GPUs back on nvidia
// get their device nodes; then Proxmox's files are written (one pve.Writer transaction);
// then the pools' VMs get their hookscripts; and last the boot files (one atomicfile
// batch). A part that fails puts back the parts before it, the last first, so the host
// is left as it was; the error says what was put back and what could not be.
func Apply(ctx context.Context, c *Change, t Tx) (*Result, error) {
	if t.Logf == nil {
		t.Logf = func(string, ...any) {}
	}
	res := &Result{}
	var err error
	res.Drivers, err = bind.Apply(ctx, t.Lock, t.Kernel, c.Drivers, t.Bind)
	if err != nil {
		return res, bind.ExplainFailure(bind.ExplainHeld(err), res.Drivers)
	}
	var undo []func() error
	fail := func(part string, err error) (*Result, error) {
		res.Undone = true
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](); uerr != nil {
				res.UndoErrs = append(res.UndoErrs, uerr)
			}
		}
		if len(res.UndoErrs) > 0 {
			return res, fmt.Errorf("%s failed: %w\nputting back what was done failed too: %v", part, err, errors.Join(res.UndoErrs...))
		}
		return res, fmt.Errorf("%s failed, so everything done before it was put back: %w", part, err)
	}
	if j := res.Drivers.Journal; j != nil {
		undo = append(undo, func() error {
			_, err := bind.Rollback(ctx, t.Lock, t.Kernel, j, bind.Scope{Movable: bind.Movable(t.Inv)}, nil, t.Bind)
			if err != nil {
				return fmt.Errorf("the drivers: %w (gpusplit rollback puts them back)", err)
			}
			return nil
		})
	}
	if c.Desired.SyncProxmox {
		inv, p, err := t.Replan()
		if err != nil {
			return fail("planning Proxmox's files after the move", err)
		}
		back := map[pci.Address]bool{}
		for _, m := range c.Drivers.Moves {
			back[m.Device] = m.Role == plan.RoleGPU && m.To == "nvidia"
		}
		if err := hook.MakeDeviceNodes(ctx, t.H, t.Services, inv, back, t.Logf); err != nil {
			return fail("making the device nodes", err)
		}
		res.Proxmox, err = pve.RunSync(t.H, inv, p, c.Desired, pve.SyncOptions{}, pve.SyncMode{Apply: true, Command: t.Command})
		if err != nil {
			return fail("writing Proxmox's files", err)
		}
		sync := res.Proxmox
		undo = append(undo, func() error {
			if _, err := sync.Undo(t.H); err != nil {
				return fmt.Errorf("Proxmox's files: %w (gpusplit pve backups restores them)", err)
			}
			return nil
		})
		for _, planned := range c.Hooks {
			id := planned.Guest
			rep, err := pve.InstallHook(t.H, pve.QEMU, id, pve.HookOptions{Apply: true, Command: t.Command})
			if rep != nil {
				res.Hooks = append(res.Hooks, rep)
			}
			if err != nil {
				return fail(fmt.Sprintf("installing the hookscript of VM %d", id), err)
			}
			undo = append(undo, func() error {
				if _, err := pve.RemoveHook(t.H, pve.QEMU, id, pve.HookOptions{Apply: true, Command: t.Command + " (undone)"}); err != nil {
					return fmt.Errorf("the hookscript of VM %d: %w (gpusplit pve hook remove --vm %d)", id, err, id)
				}
				return nil
			})
		}
	}
	if len(c.BootFiles) > 0 {
		res.Boot, err = persist.Install(t.H, c.BootFiles)
		if err != nil {
			return fail("writing the boot files", err)
		}
		res.Commands = persist.Run(t.H, [][]string{{"systemctl", "daemon-reload"}, {"systemctl", "enable", "gpusplit.service"}, {"udevadm", "control", "--reload"}})
	}
	return res, nil
}
