package cli

import (
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/plan"
)

// ExitDrift is status's exit code when the host is not in the desired state.
const ExitDrift = 3

func newStatus(g *globals) *cobra.Command {
	var d desiredFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Compare the desired split with the drivers now bound: exit 0 in sync, 3 on drift",
		Long: `Compare the desired split (` + plan.DefaultConfig + `, --config or --vfio, as for plan)
with the drivers bound now. It exits 0 when every device is where it belongs, and 3 on
drift, listing what is out of place: fit for monitoring and for the boot-time unit.

A pool's GPUs belong on their resting driver, or on vfio-pci while a running VM holds
them (qemu-server's reservations); status lists each pool's GPUs with the VM that holds
each.`,
		Example: `  gpusplit status
  gpusplit status --vfio numa:1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pl, err := d.plan(g)
			if err != nil {
				return err
			}
			inv, p := pl.inv, pl.plan
			pools := poolStates(pl)
			if g.json() {
				doc := planJSON(inv.Root, p)
				if err := g.writeJSON(struct {
					InSync bool `json:"in_sync"`
					planDoc
					Pools []poolJSON `json:"pools"`
				}{p.Empty(), doc, pools}); err != nil {
					return err
				}
			} else if p.Empty() {
				fmt.Fprintf(g.stdout, "%s: in sync, %s.\n", inv.Root, whereTheyBelong(len(p.InPlace), ""))
			} else {
				fmt.Fprintf(g.stdout, "%s: DRIFT, %s:\n", inv.Root, whereTheyBelong(len(p.Moves), "not "))
				for _, m := range p.Moves {
					role := string(m.Role)
					if m.Device != m.GPU {
						role += " of " + m.GPU.String()
					}
					fmt.Fprintf(g.stdout, "  %s (%s): on %s, should be on %s\n", m.Device, role, orNone(m.From), toText(m.To))
				}
				fmt.Fprintln(g.stdout, "gpusplit apply brings them there.")
			}
			if !g.json() {
				writePools(g.stdout, pools)
			}
			if !p.Empty() {
				return &ExitError{Code: ExitDrift}
			}
			return nil
		},
	}
	d.register(cmd)
	return cmd
}

// poolJSON is a pool of the desired state as status sees it: each GPU with the driver it
// is on and the running VM that holds it.
type poolJSON struct {
	Name    string        `json:"name"`
	Resting string        `json:"resting"` // "" is the vendor's driver
	GPUs    []poolGPUJSON `json:"gpus"`
}

type poolGPUJSON struct {
	Device string `json:"device"`
	Driver string `json:"driver"`  // "" when unbound
	HeldBy int    `json:"held_by"` // 0 when no VM holds it
	// InPlace: on the resting driver, or on vfio-pci while held.
	InPlace bool `json:"in_place"`
}

// poolStates lists the desired state's pools, in the file's order.
func poolStates(pl *planned) []poolJSON {
	out := []poolJSON{}
	moves := append(slices.Clone(pl.plan.Moves), pl.plan.InPlace...)
	slices.SortFunc(moves, func(a, b plan.Move) int { return a.Device.Compare(b.Device) })
	for _, t := range pl.desired.Targets {
		if !t.Pool {
			continue
		}
		pj := poolJSON{Name: t.Name, Resting: t.Driver, GPUs: []poolGPUJSON{}}
		for _, m := range moves {
			if m.Role == plan.RoleGPU && m.Target == t.Name {
				pj.GPUs = append(pj.GPUs, poolGPUJSON{Device: m.Device.String(), Driver: m.From, HeldBy: m.HeldBy, InPlace: m.Done()})
			}
		}
		out = append(out, pj)
	}
	return out
}

func writePools(w io.Writer, pools []poolJSON) {
	for _, pj := range pools {
		resting := pj.Resting
		if resting == "" {
			resting = "its vendor's driver"
		}
		fmt.Fprintf(w, "pool %s (rests on %s):\n", pj.Name, resting)
		for _, gp := range pj.GPUs {
			var state string
			switch {
			case gp.HeldBy != 0:
				state = fmt.Sprintf("held by VM %d", gp.HeldBy)
			case gp.InPlace:
				state = "at rest"
			default:
				state = "no VM holds it: it belongs on " + resting
			}
			fmt.Fprintf(w, "  %s  on %s, %s\n", gp.Device, orNone(gp.Driver), state)
		}
	}
}
