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
			req := doctor.NCCLRequest{VM: vmid, Manifest: manifest, P2PFile: p2pFile, WithGPUs: withGPUs, Now: time.Now()}
			res, err := doctor.NCCLTopology(h, inv, req)
			if err != nil {
				return ncclAdvice(err, req)
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

// ncclAdvice words the way past an error of doctor.NCCLTopology with the flags.
func ncclAdvice(err error, req doctor.NCCLRequest) error {
	var input *doctor.InputError
	switch {
	case errors.Is(err, nccl.ErrNoGPU):
		return fmt.Errorf("%w (see gpusplit inventory; --devices chooses others)", err)
	case errors.As(err, &input) && input.Path == req.Manifest:
		return fmt.Errorf("--manifest: %w", input.Err)
	}
	return p2pFileAdvice(err, req.P2PFile, req.VM)
}

// p2pFileAdvice words the way past an error of doctor.VMHostP2P, for VM vmid's
// manifest, with the flag that named the saved result.
func p2pFileAdvice(err error, p2pFile string, vmid int) error {
	var input *doctor.InputError
	var bad *vmlayout.NotP2PResultError
	switch {
	case errors.As(err, &input):
		return fmt.Errorf("--p2p: %w", input.Err)
	case errors.As(err, &bad):
		return fmt.Errorf("--p2p %s: not a gpusplit p2p result (p2p --save or p2p -o json writes one): %v", p2pFile, bad.Err)
	case errors.Is(err, vmlayout.ErrNoPairs):
		return fmt.Errorf("--p2p %s measured no pair of VM %d's GPUs: run gpusplit p2p on them (before the split, or with --devices) and save it", p2pFile, vmid)
	}
	return err
}

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
