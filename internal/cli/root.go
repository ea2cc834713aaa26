// Package cli is gpusplit's command line: one file per command, each turning flags into
// a call into the domain packages and rendering the result as a table or JSON.
package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/pve"
	"github.com/gpusplit/gpusplit/internal/table"
)

// Version is set at build time with -ldflags "-X github.com/gpusplit/gpusplit/internal/cli.Version=…".
var Version = ""

// ExitError ends the program with Code, after printing Err when it is set.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// globals are the flags every command shares.
type globals struct {
	root    string
	demo    bool
	output  string
	devices string
	// verbose prints the details of an error under its message (-v).
	verbose bool
	stdout  io.Writer
	stderr  io.Writer
	stdin   io.Reader
	// terminal says whether stdin is a terminal, where a question can be asked.
	terminal bool
	// rootSet: --root was given, "/" included, which --demo refuses.
	rootSet bool
	// scratch is the demo's scratch copy in use, "" while --demo reads the embedded
	// sample host (demo.go).
	scratch string
	// running: a command runs (not a completion), so notices may be printed; noticed:
	// the demo's notice was.
	running, noticed bool
}

// host opens the machine the command works on: the sample host, a snapshot or a directory.
func (g *globals) host() (*host.Host, error) {
	if g.demo {
		if g.rootSet || g.root != "/" {
			return nil, errDemoRoot
		}
		return g.demoHost()
	}
	return host.Open(g.root)
}

// selectors parses --devices, on h: see parseSelectors.
func (g *globals) selectors(h *host.Host) ([]pci.Selector, error) {
	sels, err := parseSelectors(h, g.devices)
	if err != nil {
		return nil, fmt.Errorf("--devices: %w", err)
	}
	return sels, nil
}

// parseSelectors parses a list of selectors and looks up the devices of its mapping:
// selectors in h's pci.cfg.
func parseSelectors(h *host.Host, list string) ([]pci.Selector, error) {
	sels, err := pci.ParseSelectors(list)
	if err != nil {
		return nil, err
	}
	return pci.ResolveMappings(sels, pve.MappingLookup(h))
}

// inventory opens the host and builds its inventory with --devices, printing warnings.
func (g *globals) inventory() (*host.Host, *inventory.Inventory, error) {
	return g.inventoryWith(inventory.Build)
}

// inventoryOfGPUs is inventory for the commands that show the GPUs alone, which read
// the other devices briefly (inventory.BuildGPUs).
func (g *globals) inventoryOfGPUs() (*host.Host, *inventory.Inventory, error) {
	return g.inventoryWith(inventory.BuildGPUs)
}

func (g *globals) inventoryWith(build func(*host.Host, []pci.Selector) (*inventory.Inventory, error)) (*host.Host, *inventory.Inventory, error) {
	h, err := g.host()
	if err != nil {
		return nil, nil, err
	}
	sels, err := g.selectors(h)
	if err != nil {
		return nil, nil, err
	}
	inv, err := build(h, sels)
	if err != nil {
		return nil, nil, err
	}
	g.warn(inv.Warnings)
	return h, inv, nil
}

func (g *globals) json() bool { return g.output == "json" }

// width is how wide tables may be: every column with -o wide, else the terminal's width,
// $COLUMNS or 100 (table.Width).
func (g *globals) width() int {
	if g.output == "wide" {
		return table.Wide
	}
	return table.Width(g.stdout, os.Getenv)
}

// writeJSON writes v indented, with a final newline.
func (g *globals) writeJSON(v any) error {
	b, err := jsonBytes(v)
	if err != nil {
		return err
	}
	_, err = g.stdout.Write(b)
	return err
}

// jsonBytes is v as writeJSON writes it.
func jsonBytes(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// warn prints warnings to standard error, where they do not spoil JSON or tables.
func (g *globals) warn(warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(g.stderr, "warning: %s\n", w)
	}
}

// isTerminal says whether f is a terminal, where a question can be asked: /dev/null,
// which systemd and cron give as standard input, is a character device but no terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if dirty {
				rev += "-dirty"
			}
			return "dev-" + rev
		}
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
	}
	return "dev"
}

// New returns the root command with every subcommand and help topic, writing to stdout
// and stderr.
func New(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr, stdin: os.Stdin, terminal: isTerminal(os.Stdin)}
	root := &cobra.Command{
		Use:   "gpusplit",
		Short: "See, split and integrate the GPUs of a multi-GPU Linux or Proxmox VE host",
		Long: `gpusplit sees where each GPU of a multi-GPU host sits (NUMA node, IOMMU group,
PCIe path), from sysfs alone, whatever driver the GPUs are bound to.

Every command reads the machine through --root: the live host (/), a directory holding a
copy of one, or a snapshot archive (.tar.gz). --demo uses the sample host built into the
binary: kpro6, a Proxmox VE node with 8 RTX PRO 6000 Blackwell GPUs on two NUMA nodes.
A command that changes something runs under --demo on a private scratch copy of it,
through a simulated kernel, and changes nothing on this machine (gpusplit demo --help).`,
		Example: `  gpusplit --demo topo
  gpusplit --demo inventory -o json
  gpusplit --root snapshot.tar.gz inventory
  gpusplit topo --devices 10de:2bb1`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if g.output != "table" && g.output != "wide" && g.output != "json" {
				// snapshot -o demo.tar.gz: the file is --file, as in the commands that
				// write one.
				if cmd.Flags().Lookup("file") != nil {
					return fmt.Errorf("-o %q: the output format is table, wide or json; did you mean --file %s?", g.output, g.output)
				}
				return fmt.Errorf("-o %q: the output format is table, wide or json", g.output)
			}
			g.running = true
			g.rootSet = cmd.Flags().Changed("root")
			if g.demo && g.rootSet {
				return errDemoRoot
			}
			// A dry run under --demo shows what the command would do on the scratch
			// copy, where it would run.
			if f := cmd.Flags().Lookup("dry-run"); g.demo && f != nil && f.Changed && f.Value.String() == "true" {
				return g.useScratch()
			}
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	f := root.PersistentFlags()
	f.StringVar(&g.root, "root", "/", "the machine to read: / (this host), a directory, or a snapshot .tar.gz")
	f.BoolVar(&g.demo, "demo", false, "use the built-in sample host (kpro6: 8 × RTX PRO 6000, 2 NUMA nodes); changes go to a private scratch copy (gpusplit demo --help)")
	f.StringVarP(&g.output, "output", "o", "table", "output format: table (fits the terminal, or $COLUMNS, else 100 columns), wide (every column) or json")
	f.BoolVarP(&g.verbose, "verbose", "v", false, "print the details of an error under its message (each field, device or line, and why)")
	f.StringVar(&g.devices, "devices", "", "which devices count as GPUs: comma-separated selectors, see 'gpusplit help selectors' (default: NVIDIA and AMD display controllers)")
	root.AddCommand(
		newInventory(g),
		newTopo(g),
		newPlan(g),
		newApply(g),
		newStatus(g),
		newRollback(g),
		newPersist(g),
		newPVE(g),
		newHook(g),
		newDoctor(g),
		newNCCLTopo(g),
		newP2P(g),
		newSnapshot(g),
		newFit(g),
		newMetrics(g),
		newDemo(g),
		// Help topics, reached through gpusplit help.
		selectorsTopic,
		newExitStatusTopic(),
		newSplitTOMLTopic(),
	)
	applyContract(root)
	registerCompletions(root, g)
	return root
}

// Main runs the command line and returns the process exit code.
func Main(args []string) int { return execute(New(os.Stdout, os.Stderr), args, os.Stderr) }

// execute runs cmd on args and returns the exit code, after printing to stderr the error
// that ends the run.
func execute(cmd *cobra.Command, args []string, stderr io.Writer) int {
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		var ee *ExitError
		code := 1
		if errors.As(err, &ee) {
			code, err = ee.Code, ee.Err
		}
		if err != nil {
			fmt.Fprintf(stderr, "gpusplit: %v\n", err)
			if v, _ := cmd.PersistentFlags().GetBool("verbose"); v {
				for _, d := range details(err) {
					fmt.Fprintf(stderr, "  %s\n", d)
				}
			}
		}
		return code
	}
	return 0
}

// detailer is an error whose message is the short refusal and the way out, and whose
// details (each field, device or line, and why) -v prints and the JSON documents carry.
type detailer interface{ Details() []string }

// wordedError is a domain error as the command line says it: the way out worded with
// the command's flags, which the domain's error carries as a typed reason.
type wordedError struct {
	err     error
	msg     string
	details []string
}

func (e *wordedError) Error() string     { return e.msg }
func (e *wordedError) Unwrap() error     { return e.err }
func (e *wordedError) Details() []string { return e.details }

// details are the details of err, or none.
func details(err error) []string {
	var d detailer
	if errors.As(err, &d) {
		return d.Details()
	}
	return nil
}
