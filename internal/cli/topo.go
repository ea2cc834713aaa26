package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/topo"
)

func newTopo(g *globals) *cobra.Command {
	var format string
	var vfio []string
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "Show how the GPUs are connected, as nvidia-smi topo -m would",
		Long: `Show the GPU topology matrix the way nvidia-smi topo -m prints it: for every pair
of GPUs (and RDMA NICs), X, PIX, PXB, PHB, NODE or SYS, with each GPU's CPU and NUMA
affinity. It is computed from sysfs, so it works for GPUs on any driver (nvidia, vfio-pci,
none), where nvidia-smi sees nothing. NVLink (NV#) is not visible from sysfs.

--format svg draws the PCIe tree behind the matrix as a picture: a band per NUMA node,
host bridges, root ports and switches, and each GPU with its full name, driver, IOMMU
group and holders, coloured by driver; --format dot writes the same tree as a Graphviz
graph. With --vfio (the selectors of plan --vfio) they show the planned split instead:
each GPU coloured by the driver it would end on, the GPUs that move outlined dashed.`,
		Example: `  gpusplit --demo topo
  gpusplit --demo topo -o json
  gpusplit --demo topo --format svg > topo.svg
  gpusplit --demo topo --format svg --vfio numa:1 > split.svg
  gpusplit --demo topo --format dot | dot -Tpng > topo.png`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "matrix" && format != "dot" && format != "svg" {
				return fmt.Errorf("--format %q: the format is matrix, svg or dot", format)
			}
			if g.json() && cmd.Flags().Changed("format") {
				return fmt.Errorf("--format %s and -o json both say what to print: use one of them (-o json is the matrix as JSON)", format)
			}
			picture := format == "svg" || format == "dot"
			if len(vfio) > 0 && !picture {
				return errors.New("--vfio colours the picture of the split: add --format svg (or dot); plan --vfio lists the moves")
			}
			// The pictures show what holds each GPU, which the matrix has no use for.
			build := inventory.BuildTopology
			if picture {
				build = inventory.BuildGPUs
			}
			h, inv, err := g.inventoryWith(build)
			if err != nil {
				return err
			}
			m := topo.Build(inv.Devices(), topo.NICs(h, inv.Tree), topo.NUMANodes(h))
			m.ReadGPUNUMAIDs(h)
			if picture {
				if m.Holders, m.Split, err = pictured(inv, vfio); err != nil {
					return err
				}
			}
			switch {
			case g.json():
				return g.writeJSON(m.Report())
			case format == "dot":
				return m.WriteDOT(g.stdout)
			case format == "svg":
				return m.WriteSVG(g.stdout)
			}
			return m.WriteTextWidth(g.stdout, g.width())
		},
	}
	cmd.Flags().StringVar(&format, "format", "matrix", "matrix (as nvidia-smi topo -m), svg (a picture of the PCIe tree) or dot (the same for Graphviz)")
	cmd.Flags().StringArrayVar(&vfio, "vfio", nil, "with --format svg or dot: show the split that plan --vfio would make (repeatable; see 'gpusplit help selectors')")
	return cmd
}

// pictured is what topo's pictures add to the tree: each GPU's holders, as inventory
// names them, and the split that plan --vfio would make (nil without --vfio).
func pictured(inv *inventory.Inventory, vfio []string) (map[pci.Address][]string, *topo.Split, error) {
	held := map[pci.Address][]string{}
	for _, gpu := range inv.GPUs {
		held[gpu.Address] = []string{}
		for _, h := range gpu.Holders {
			held[gpu.Address] = append(held[gpu.Address], h.Short())
		}
	}
	if len(vfio) == 0 {
		return held, nil, nil
	}
	choices, err := plan.ParseChoices(vfio)
	switch {
	case errors.Is(err, plan.ErrNoSelector):
		return nil, nil, errors.New("--vfio needs a selector")
	case err != nil:
		return nil, nil, fmt.Errorf("--vfio: %w", err)
	}
	p, err := plan.Make(inv, plan.ForVFIO(choices))
	if err != nil {
		return nil, nil, err
	}
	return held, &topo.Split{Asked: "--vfio " + strings.Join(vfio, " --vfio "), To: p.GPUDrivers()}, nil
}
