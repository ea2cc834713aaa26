package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/doctor"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/nccl"
	"github.com/gpusplit/gpusplit/internal/vmlayout"
)

func newNCCLTopo(g *globals) *cobra.Command {
	var vmid int
	var manifest, file, check, p2pFile string
	var withGPUs bool
	cmd := &cobra.Command{
		Use:   "nccl-topo",
		Short: "Write the NCCL topology file (NCCL_TOPO_FILE) of this host, or of a VM from its manifest",
		Long: `Write the XML topology file that NCCL reads from NCCL_TOPO_FILE, so that NCCL knows which
GPUs share a PCIe switch, a host bridge or a NUMA node.

On bare metal it is what NCCL itself detects from sysfs: a <cpu> per NUMA node, a <pci>
for each GPU, RDMA NIC and switch upstream port between them, in NCCL's own format. That
file is mostly useful to look at, or to copy into a VM.

In a VM NCCL sees every GPU on one host bridge with no NUMA node. Then:
  1. on the Proxmox host, gpusplit nccl-topo --vm ID --file ID.json writes the VM's
     manifest: each passed-through device, the slot qemu-server gives it in the guest, and
     its host NUMA node and link;
  2. in the guest, gpusplit nccl-topo --manifest ID.json --file /etc/nccl-topo.xml finds
     the devices by their slots and writes the topology with the guest's bus ids and the
     host's NUMA nodes; then run NCCL with NCCL_TOPO_FILE=/etc/nccl-topo.xml.

Both say whether NCCL_P2P_DISABLE=1 is advised, from the doctor's findings (` + strings.Join(doctor.P2PChecks, ", ") + `).

Only <cpu> and <pci> elements are written: NCCL trusts a file's <gpu> attributes over its
own detection. --with-gpus adds <gpu dev= sm=> for tools that want them.

--check FILE reads a topology file the way NCCL's parser does and names the line of
anything it would refuse or misread. docs/vm-topology.md has the whole story.`,
		Example: `  gpusplit --demo nccl-topo
  gpusplit --demo nccl-topo --vm 131
  gpusplit nccl-topo --vm 131 --file /root/vm131-manifest.json    # on the Proxmox host
  gpusplit nccl-topo --manifest vm131-manifest.json --file /etc/nccl-topo.xml   # in the VM
  gpusplit nccl-topo --check /etc/nccl-topo.xml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case check != "" && (vmid != 0 || manifest != "" || file != "" || withGPUs):
				return errors.New("--check reads a file; it takes no other option")
			case vmid != 0 && manifest != "":
				return errors.New("--vm (on the Proxmox host) and --manifest (in the guest) are the two ends of one job; use one of them")
			case vmid != 0 && withGPUs:
				return errors.New("--with-gpus shapes the topology file; --vm writes a manifest")
			case p2pFile != "" && vmid == 0:
				return errors.New("--p2p carries a host's p2p result into a VM's manifest: it goes with --vm")
			case check != "":
				return checkTopology(g, check)
			}
			h, inv, err := g.inventory()
			if err != nil {
				return err
			}
			res := &doctor.NCCLReport{Notes: []string{}, Warnings: []string{}}
			if vmid != 0 {
				m, err := vmlayout.Predict(h, inv.Tree, vmid, time.Now())
				if err != nil {
					return err
				}
				if m.P2P, err = hostP2P(h, inv, m, p2pFile); err != nil {
					return err
				}
				res.Manifest, res.Notes = m, append([]string{}, m.Notes...)
				data, err := jsonBytes(m)
				if err != nil {
					return err
				}
				res.Artifact = data
			} else {
				var x *nccl.Node
				if manifest != "" {
					x, err = guestTopology(h, inv, manifest, res)
				} else {
					x, err = hostTopology(h, inv, withGPUs, res)
				}
				if err != nil {
					return err
				}
				res.Artifact = nccl.Marshal(x)
				res.XML = string(res.Artifact)
			}
			if err := res.Advise(h, inv); err != nil {
				return err
			}
			if file != "" {
				abs, err := filepath.Abs(file)
				if err != nil {
					return err
				}
				if err := atomicfile.Write(abs, res.Artifact, 0o644); err != nil {
					return fmt.Errorf("writing %s: %w (nothing was written there)", file, err)
				}
				res.File = abs
			}
			return printNCCL(g, res, vmid)
		},
	}
	f := cmd.Flags()
	f.IntVar(&vmid, "vm", 0, "on a Proxmox host: write the manifest of this VM's passed-through devices")
	f.StringVar(&manifest, "manifest", "", "in a VM: the manifest written on the host with --vm")
	f.StringVar(&file, "file", "", "write the topology (or the manifest) to this file instead of standard output")
	f.StringVar(&check, "check", "", "check a topology file against NCCL's parser rules")
	f.BoolVar(&withGPUs, "with-gpus", false, "add <gpu dev= sm=> elements (NCCL trusts them over its own detection)")
	f.StringVar(&p2pFile, "p2p", "", "with --vm: a gpusplit p2p result saved on this host (p2p --save), carried into the manifest")
	return cmd
}

func printNCCL(g *globals, r *doctor.NCCLReport, vmid int) error {
	if g.json() {
		return g.writeJSON(r)
	}
	// The file goes to standard output unless it was written to --file; the advice then
	// goes to standard error, where it does not spoil a redirect.
	msg := g.stdout
	if r.File == "" {
		if _, err := g.stdout.Write(r.Artifact); err != nil {
			return err
		}
		msg = g.stderr
	}
	g.warn(r.Warnings)
	r.WriteAdvice(msg, vmid)
	return nil
}

// hostTopology is the topology of this host's GPUs and RDMA NICs, as NCCL detects it.
func hostTopology(h *host.Host, inv *inventory.Inventory, withGPUs bool, res *doctor.NCCLReport) (*nccl.Node, error) {
	x, warnings, notes, err := nccl.HostTopology(h, inv, nccl.Options{WithGPUs: withGPUs})
	if errors.Is(err, nccl.ErrNoGPU) {
		return nil, fmt.Errorf("%w (see gpusplit inventory; --devices chooses others)", err)
	}
	res.Warnings = append(res.Warnings, warnings...)
	res.Notes = append(res.Notes, notes...)
	return x, err
}

// guestTopology is the topology of a VM's GPUs from the manifest written on its host.
func guestTopology(h *host.Host, inv *inventory.Inventory, manifest string, res *doctor.NCCLReport) (*nccl.Node, error) {
	data, err := host.ReadUserFile(manifest, maxManifest, "a VM manifest")
	if err != nil {
		return nil, fmt.Errorf("--manifest: %w", err)
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

// hostP2P is the host's evidence on peer-to-peer for a VM's manifest: the warnings and
// errors of the doctor's HostP2PChecks, and the pairs of the VM's GPUs in a saved p2p
// result (vmlayout.NewHostP2P).
func hostP2P(h *host.Host, inv *inventory.Inventory, m *vmlayout.Manifest, p2pFile string) (*vmlayout.HostP2P, error) {
	_, findings, err := doctor.P2PAdvice(h, inv, doctor.HostP2PChecks...)
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
			return nil, fmt.Errorf("--p2p: %w", err)
		}
	}
	hp, err := vmlayout.NewHostP2P(doctor.HostP2PChecks, kept, m, saved, p2pFile)
	var bad *vmlayout.NotP2PResultError
	switch {
	case errors.As(err, &bad):
		return nil, fmt.Errorf("--p2p %s: not a gpusplit p2p result (p2p --save or p2p -o json writes one): %v", p2pFile, bad.Err)
	case errors.Is(err, vmlayout.ErrNoPairs):
		return nil, fmt.Errorf("--p2p %s measured no pair of VM %d's GPUs: run gpusplit p2p on them (before the split, or with --devices) and save it", p2pFile, m.VMID)
	}
	return hp, err
}

// maxManifest caps a manifest: 16 entries of 8 functions with their notes are ~30 KB.
const maxManifest = 4 << 20

// maxP2PResult caps a saved p2p result: 16 GPUs' pairs with their checks are ~200 KB.
const maxP2PResult = 8 << 20

// checkTopology reads a topology file as NCCL's parser does.
func checkTopology(g *globals, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	r, err := nccl.Check(file, data)
	if err != nil {
		// A file NCCL would refuse is the check's result, not a failure to check.
		if g.json() {
			if jerr := g.writeJSON(nccl.CheckError{Error: err.Error(), File: file}); jerr != nil {
				return jerr
			}
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", file, err)}
	}
	if g.json() {
		return g.writeJSON(r)
	}
	fmt.Fprintf(g.stdout, "%s: NCCL reads it: %d elements (of at most %d): %d <cpu>, %d <pci>, %d <gpu>\n", file, r.Elements, nccl.MaxNodes, r.CPUs, r.PCIs, r.GPUs)
	if r.GPUs > 0 {
		fmt.Fprintf(g.stdout, "note: NCCL takes the file's <gpu> attributes (dev, sm) over what it detects: they must match the machine that reads it\n")
	}
	return nil
}
