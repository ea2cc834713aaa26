package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/topo"
)

func newTopo(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "Show how the GPUs are connected, as nvidia-smi topo -m would",
		Long: `Show the GPU topology matrix the way nvidia-smi topo -m prints it: for every pair
of GPUs (and RDMA NICs), X, PIX, PXB, PHB, NODE or SYS, with each GPU's CPU and NUMA
affinity. It is computed from sysfs, so it works for GPUs on any driver (nvidia, vfio-pci,
none), where nvidia-smi sees nothing. NVLink (NV#) is not visible from sysfs.

--format svg draws the PCIe tree behind the matrix as a picture (NUMA nodes, host
bridges, root ports and switches, the GPUs coloured by driver); --format dot writes the
same tree as a Graphviz graph.`,
		Example: `  gpusplit --demo topo
  gpusplit --demo topo -o json
  gpusplit --demo topo --format svg > topo.svg
  gpusplit --demo topo --format dot | dot -Tpng > topo.png`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "matrix" && format != "dot" && format != "svg" {
				return fmt.Errorf("--format %q: the format is matrix, svg or dot", format)
			}
			if g.json() && cmd.Flags().Changed("format") {
				return fmt.Errorf("--format %s and -o json both say what to print: use one of them (-o json is the matrix as JSON)", format)
			}
			h, inv, err := g.topology()
			if err != nil {
				return err
			}
			m := topo.Build(inv.Devices(), topo.NICs(h, inv.Tree), topo.NUMANodes(h))
			m.ReadGPUNUMAIDs(h)
			switch {
			case g.json():
				return g.writeJSON(m.Report())
			case format == "dot":
				return m.WriteDOT(g.stdout)
			case format == "svg":
				return m.WriteSVG(g.stdout)
			}
			return m.WriteText(g.stdout)
		},
	}
	cmd.Flags().StringVar(&format, "format", "matrix", "matrix (as nvidia-smi topo -m), svg (a picture of the PCIe tree) or dot (the same for Graphviz)")
	return cmd
}
