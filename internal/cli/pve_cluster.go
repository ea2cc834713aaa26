package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/pve"
)

func newPVECluster(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cluster",
		Short: "The whole cluster's GPU configuration from /etc/pve: nodes, mappings, guests, problems",
		Long: `Read the cluster's configuration from /etc/pve alone, which pmxcfs replicates to every
node: the nodes (/etc/pve/.members), every PCI mapping with its entries per node, every
guest of every node that uses a mapping (hostpciN: mapping=) or passes GPUs to a container
(devN or lxc.mount.entry of /dev/nvidia*, lxc.cgroup2.devices.allow c 195:*), its HA
resource (ha/resources.cfg, with the rules of ha/rules.cfg or the groups of
ha/groups.cfg) and its replication jobs (replication.cfg). Then the problems:

  guest-node-short     a guest takes more devices of a mapping than the mapping has
                       entries on the guest's node (or none)
  entry-unknown-node   a mapping entry names a node that is not in the cluster
  target-node-short    a node HA may move a VM to, or its replication target, has fewer
                       entries of the VM's mapping than the VM takes
  gpu-in-two-mappings  a device of a node is in two mappings used by two guests of that
                       node that can run at the same time (neither is a template, and no
                       negative HA resource-affinity rule keeps them apart)

It reads other nodes' guest configs but never their sysfs: whether an entry matches its
node's hardware is checked on that node (gpusplit pve mappings). docs/proxmox.md has
each rule with its example.

Exit status: 0 without problems, 1 with problems (or an error).`,
		Example: `  gpusplit --demo pve cluster
  gpusplit pve cluster -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.host()
			if err != nil {
				return err
			}
			c, err := pve.ReadCluster(h)
			if err != nil {
				return err
			}
			doc := c.Report()
			if g.json() {
				if err := g.writeJSON(doc); err != nil {
					return err
				}
			} else {
				doc.WriteText(g.stdout, h.Root(), g.width())
			}
			if n := len(doc.Problems); n > 0 {
				where := "listed above"
				if g.json() {
					where = "in problems"
				}
				return fmt.Errorf("%s in the cluster's configuration (%s)", plural.S(n, "problem"), where)
			}
			return nil
		},
	}
}
