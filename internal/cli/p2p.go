package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/atomicfile"
	"github.com/gpusplit/gpusplit/internal/cuda"
	"github.com/gpusplit/gpusplit/internal/doctor"
	"github.com/gpusplit/gpusplit/internal/nccl"
	"github.com/gpusplit/gpusplit/internal/p2p"
	"github.com/gpusplit/gpusplit/internal/topo"
)

// Exit codes of p2p.
const (
	ExitCorrupt = 2 // a copy delivered wrong bytes
	ExitNoCUDA  = 4 // no CUDA driver to run on
)

// CUDABinary is the name of the CUDA build of gpusplit, which the static build hands
// p2p over to.
const CUDABinary = "gpusplit-cuda"

// handoffEnv marks a process that the static build started for p2p, so that a CUDA build
// without the binding (a wrong build) does not hand over again.
const handoffEnv = "GPUSPLIT_CUDA_HANDOFF"

// openCUDA opens the GPU driver; tests replace it.
var openCUDA = cuda.Open

func newP2P(g *globals) *cobra.Command {
	var sizes, size, save string
	var passes, runs int
	var integrityOnly bool
	cmd := &cobra.Command{
		Use:   "p2p",
		Short: "Check that GPU-to-GPU copies arrive intact, and measure them",
		Long: `For every ordered pair of GPUs, copy a pattern that depends on position and pass from one
to the other, through peer access where the driver allows it and through the driver's
staged path (host memory), read it back and compare every byte; then measure, as
p2pBandwidthLatencyTest does, unidirectional and bidirectional bandwidth (both directions
at once, their sum) with and without peer access, a GPU with itself counting the bytes
read and written, and the latency of small copies timed by the GPU with the stream held
back until all are queued, beside the host's time to queue one (median of several runs
after a warm-up), and each GPU's copies to and from host memory. The report says how
each figure is counted (in -o json, its "method"). Each pair gets a verdict: ok,
corrupt, no-peer-access, or
slow for its link and topology relation; the summary says which NCCL settings follow
(NCCL_P2P_DISABLE=1, or NCCL_P2P_LEVEL when only closer paths are safe), beside the
doctor's IOMMU fault and P2P topology findings.

It runs the CUDA driver (libcuda.so.1) of this machine: GPUs on the nvidia driver only.
The static gpusplit cannot load a shared library; it hands p2p over to gpusplit-cuda, the
CUDA build (go build -tags cuda), when that is installed beside it or on the PATH.

Exit status: 0 when every copy arrived intact, 2 when one did not, 4 without a CUDA
driver, 1 on other errors. docs/p2p.md explains each verdict.`,
		Example: `  gpusplit p2p
  gpusplit p2p --integrity-only --sizes 4K,1M,256M
  gpusplit p2p --devices 0000:81:00.0,0000:91:00.0 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if g.demo || g.root != "/" {
				return errors.New("p2p copies between this machine's GPUs through CUDA; --root and --demo name another machine")
			}
			opt := p2p.Options{Passes: passes, Runs: runs, IntegrityOnly: integrityOnly}
			if opt.Sizes, err = p2p.ParseSizes(sizes); err != nil {
				return fmt.Errorf("--sizes: %w", err)
			}
			if size != "" {
				s, err := p2p.ParseSizes(size)
				if err != nil || len(s) != 1 {
					return fmt.Errorf("--size %q: one size, such as 256M", size)
				}
				opt.BandwidthSize = s[0]
			}
			d, err := openCUDA()
			if errors.Is(err, cuda.ErrStatic) {
				return handOff(err)
			}
			if err != nil {
				return &ExitError{Code: ExitNoCUDA, Err: err}
			}
			defer func() {
				// What the driver could not release is an error of its own, after the
				// report; a run that already fails keeps its status and says it too.
				if cerr := d.Close(); cerr != nil {
					if err == nil {
						err = cerr
					} else {
						fmt.Fprintf(g.stderr, "gpusplit: %v\n", cerr)
					}
				}
			}()
			h, inv, err := g.inventory()
			if err != nil {
				return err
			}
			if g.devices != "" {
				for _, gp := range inv.GPUs {
					opt.Only = append(opt.Only, nccl.BusID(gp.Address))
				}
			}
			opt.OnHost(inv, topo.NUMANodes(h))
			if !g.json() {
				opt.Progress = func(s string) { fmt.Fprintf(g.stderr, "  %s\n", s) }
			}
			rep, runErr := p2p.Run(d, opt)
			_, findings, err := doctor.P2PAdvice(h, inv, doctor.P2PChecks...)
			if err != nil {
				return err
			}
			if rep != nil {
				doc := doctor.NewP2PReport(rep, findings, runErr)
				if save != "" {
					// What -o json prints, kept for nccl-topo --vm --p2p and pve
					// p2p-clique --p2p: the host's measured evidence for its VMs.
					data, err := jsonBytes(doc)
					if err != nil {
						return err
					}
					abs, err := filepath.Abs(save)
					if err != nil {
						return err
					}
					if err := atomicfile.Write(abs, data, 0o644); err != nil {
						return fmt.Errorf("--save: writing %s: %w (nothing was written there)", save, err)
					}
					if !g.json() {
						defer fmt.Fprintf(g.stdout, "saved the result to %s (nccl-topo --vm ID --p2p %s carries it into a VM's manifest)\n", abs, abs)
					}
				}
				if g.json() {
					if err := g.writeJSON(doc); err != nil {
						return err
					}
				} else {
					doc.WriteText(g.stdout)
				}
			}
			if runErr != nil {
				return runErr
			}
			if rep.Summary.Corrupt {
				return &ExitError{Code: ExitCorrupt}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&sizes, "sizes", "", "sizes of the integrity check (default 4K,64K,1M,16M,256M)")
	f.IntVar(&passes, "passes", 0, "patterns per size and path (default 2)")
	f.StringVar(&size, "size", "", "size of the timed copies (default 256M)")
	f.IntVar(&runs, "runs", 0, "timed runs per figure, of which the median is reported (default 5)")
	f.BoolVar(&integrityOnly, "integrity-only", false, "check the copies, measure nothing")
	f.StringVar(&save, "save", "", "also write the result, as -o json gives it, to this file (for nccl-topo --vm --p2p and pve p2p-clique --p2p)")
	return cmd
}

// handOff runs p2p in gpusplit-cuda, found beside this binary or on the PATH, in place of
// this process; without one it says how to get it.
func handOff(why error) error {
	if os.Getenv(handoffEnv) != "" {
		return &ExitError{Code: ExitNoCUDA, Err: fmt.Errorf("%w, and it was started as %s: build it with -tags cuda", why, CUDABinary)}
	}
	path := ""
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), CUDABinary); isExecutable(p) {
			path = p
		}
	}
	if path == "" {
		path, _ = exec.LookPath(CUDABinary)
	}
	if path == "" {
		return &ExitError{Code: ExitNoCUDA, Err: fmt.Errorf("%w. p2p needs %s, the CUDA build of gpusplit, beside it or on the PATH: CGO_ENABLED=0 go build -tags cuda -o %s ./cmd/gpusplit", why, CUDABinary, CUDABinary)}
	}
	args := append([]string{CUDABinary}, os.Args[1:]...)
	env := append(os.Environ(), handoffEnv+"=1")
	if err := syscall.Exec(path, args, env); err != nil {
		return &ExitError{Code: ExitNoCUDA, Err: fmt.Errorf("starting %s: %w", path, err)}
	}
	return nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
