package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/demo"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

var errDemoRoot = errors.New("--demo and --root both name a host; use one of them")

// demoHost is the host of --demo: the scratch copy once a command made one, else the
// sample host embedded in the binary, read-only.
func (g *globals) demoHost() (*host.Host, error) {
	if g.scratch == "" {
		dir, err := demo.Dir()
		if err != nil {
			return samplehost.Open() // no cache directory: no copy either
		}
		h, err := demo.Open(dir)
		if err != nil || h == nil {
			if err == nil {
				return samplehost.Open()
			}
			return nil, err
		}
		g.scratch = dir
	}
	g.demoNotice()
	return demo.Open(g.scratch)
}

// useScratch makes --demo work on the scratch copy from now on, making the copy when
// there is none: a command that changes something (or shows, with --dry-run, what it
// would change) runs there.
func (g *globals) useScratch() error {
	if g.scratch != "" {
		return nil
	}
	dir, err := demo.Dir()
	if err != nil {
		return err
	}
	h, err := demo.Open(dir)
	if err != nil {
		return err
	}
	if h == nil {
		made, err := demo.Make(dir, demo.Options{})
		if err != nil {
			return fmt.Errorf("making the demo's scratch copy in %s: %w", dir, err)
		}
		if g.running {
			fmt.Fprintf(g.stderr, "demo: made a scratch copy of the sample host in %s, as if nothing held its GPUs (left out: %s)\n", dir, strings.Join(made.Removed, ", "))
		}
	}
	g.scratch = dir
	g.demoNotice()
	return nil
}

// demoNotice says once, on standard error, where the demo runs and that it changes
// nothing of this machine. Completions, which print candidates, say nothing.
func (g *globals) demoNotice() {
	if g.noticed || !g.running {
		return
	}
	g.noticed = true
	fmt.Fprintf(g.stderr, "demo: a simulation on the scratch copy %s; nothing on this machine changes (gpusplit demo reset starts over)\n", g.scratch)
}

func newDemo(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "The scratch copy --demo writes to: where it is, and starting over",
		Long: `gpusplit --demo reads the sample host built into the binary (kpro6). The first command
under --demo that changes something (apply, rollback, hook, pve sync, pve hook
install, persist install, ...) or shows with --dry-run what it would change makes
a private scratch copy of it in the user's cache directory (` + "`gpusplit demo path`" + `; mode 0700),
and from then on every --demo command, reading ones too, works on that copy, so that
plan, apply, status and the hooks tell one story. The copy is made as if nothing held
the GPUs: nvidia-persistenced and container 129's python3 are left out (reset --held
keeps them, and apply then refuses as it would on the host).

On the copy, drivers move through a simulated kernel that edits its files as the kernel
would show the move (the driver links, driver_override, /dev/vfio/GROUP, the nvidia
minor), systemctl only says what it would run, and nvidia-modprobe makes a plain file:
nothing on this machine is read or changed but the copy, and no root is needed. Each
--demo command says so once on standard error. A copy that is a link, another user's, or
open to others is never used.`,
		Example: `  gpusplit --demo apply --vfio numa:1 --yes
  gpusplit --demo status --vfio numa:1
  gpusplit demo path
  gpusplit demo reset
  gpusplit demo reset --held`,
	}
	var held bool
	reset := &cobra.Command{
		Use:   "reset",
		Short: "Throw the scratch copy away and make a fresh one from the sample host",
		Long: `Throw the demo's scratch copy away and make a fresh one: the sample host as
built into the binary, less the processes that hold its GPUs, unless --held keeps them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := demo.Dir()
			if err != nil {
				return err
			}
			made, err := demo.Make(dir, demo.Options{Held: held})
			if err != nil {
				return err
			}
			if g.json() {
				return g.writeJSON(made)
			}
			fmt.Fprintf(g.stdout, "a fresh scratch copy of the sample host is in %s", dir)
			if len(made.Removed) > 0 {
				fmt.Fprintf(g.stdout, ", as if nothing held its GPUs (left out: %s)", strings.Join(made.Removed, ", "))
			} else {
				fmt.Fprint(g.stdout, ", with the processes that hold its GPUs")
			}
			fmt.Fprintln(g.stdout, ".")
			return nil
		},
	}
	reset.Flags().BoolVar(&held, "held", false, "keep the processes that hold the GPUs (nvidia-persistenced, container 129's python3)")
	path := &cobra.Command{
		Use:   "path",
		Short: "Print where the scratch copy is, and whether it exists",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := demo.Dir()
			if err != nil {
				return err
			}
			h, err := demo.Open(dir)
			if err != nil {
				return err
			}
			if g.json() {
				return g.writeJSON(struct {
					Dir    string `json:"dir"`
					Exists bool   `json:"exists"`
				}{dir, h != nil})
			}
			fmt.Fprintln(g.stdout, dir)
			if h == nil {
				fmt.Fprintln(g.stderr, "(not made yet: the first --demo command that changes something makes it)")
			}
			return nil
		},
	}
	cmd.AddCommand(reset, path)
	return cmd
}
