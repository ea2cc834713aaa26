package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpusplit/gpusplit/internal/plan"
	"github.com/gpusplit/gpusplit/internal/proc"
)

func newPlan(g *globals) *cobra.Command {
	var d desiredFlags
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show the driver moves that reach the desired split, changing nothing",
		Long: `Show the driver moves that reach the desired split, changing nothing.

The split comes from --vfio (the selected GPUs go to vfio-pci, the others to, or stay on,
their vendor's driver) or from the desired state file (` + plan.DefaultConfig + `, or --config;
docs/split.toml describes it). Devices move by whole IOMMU groups: the companion functions
of a GPU (HDMI audio, USB-C) go with it, a plan that would split a group is refused, and so
is one that would pass through a device nobody selected unless --allow-shared-groups.
When everything is in place the plan is empty and says so.`,
		Example: `  gpusplit --demo plan --vfio numa:1
  gpusplit plan --vfio 0000:81:00.0 --vfio 0000:91:00.0
  gpusplit plan --config split.toml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pl, err := d.plan(g)
			if err != nil {
				return err
			}
			inv, p := pl.inv, pl.plan
			if g.json() {
				return g.writeJSON(planJSON(inv.Root, p))
			}
			return writePlan(g.stdout, inv.Root, p)
		},
	}
	d.register(cmd)
	return cmd
}

// The JSON form of a plan: actions[] with device, from, to (see docs/json.md).
type planDoc struct {
	Host     string       `json:"host"`
	Empty    bool         `json:"empty"`
	Actions  []actionJSON `json:"actions"`
	InPlace  []actionJSON `json:"in_place"`
	Warnings []string     `json:"warnings"`
}

type actionJSON struct {
	Device     string       `json:"device"`
	Name       string       `json:"name"`
	Role       string       `json:"role"`
	GPU        string       `json:"gpu"`
	Group      string       `json:"group"`
	IOMMUGroup int          `json:"iommu_group"`
	NUMANode   int          `json:"numa_node"`
	From       string       `json:"from"`
	To         string       `json:"to"`
	Holders    []holderJSON `json:"holders"`
}

func planJSON(root string, p *plan.Plan) planDoc {
	doc := planDoc{Host: root, Empty: p.Empty(), Actions: []actionJSON{}, InPlace: []actionJSON{}, Warnings: append([]string{}, p.Warnings...)}
	conv := func(m plan.Move) actionJSON {
		a := actionJSON{
			Device: m.Device.String(), Name: m.Name, Role: string(m.Role), GPU: m.GPU.String(), Group: m.Target,
			IOMMUGroup: m.IOMMUGroup, NUMANode: m.NUMANode, From: m.From, To: m.To, Holders: []holderJSON{},
		}
		for _, h := range m.Holders {
			a.Holders = append(a.Holders, holderDoc(h))
		}
		return a
	}
	for _, m := range p.Moves {
		doc.Actions = append(doc.Actions, conv(m))
	}
	for _, m := range p.InPlace {
		doc.InPlace = append(doc.InPlace, conv(m))
	}
	return doc
}

func writePlan(w io.Writer, root string, p *plan.Plan) error {
	if p.Empty() {
		fmt.Fprintf(w, "%s: nothing to do, all %d devices are where they belong.\n", root, len(p.InPlace))
		for _, warn := range p.Warnings {
			fmt.Fprintf(w, "warning: %s\n", warn)
		}
		return nil
	}
	fmt.Fprintf(w, "%s: %d moves in %d IOMMU groups; %d devices already in place.\n\n", root, len(p.Moves), len(p.Groups()), len(p.InPlace))
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IOMMU\tDEVICE\tROLE\tNAME\tNUMA\tFROM\tTO\tHELD BY")
	for _, m := range p.Moves {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", group(m.IOMMUGroup), m.Device, m.Role, shortName(m.Name),
			m.NUMANode, orNone(m.From), toText(m.To), holders(m.Holders))
	}
	tw.Flush()
	for _, line := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "\nwarning: %s\n", warn)
	}
	if blockers := heldText(p); blockers != "" {
		fmt.Fprintf(w, "\n%s", blockers)
	}
	return nil
}

// heldText says what holds the GPUs of a plan, and how to release each, since apply
// refuses to move a held device.
func heldText(p *plan.Plan) string {
	seen := map[int]bool{}
	var lines []string
	for _, m := range p.Moves {
		for _, h := range m.Holders {
			if seen[h.PID] {
				continue
			}
			seen[h.PID] = true
			lines = append(lines, fmt.Sprintf("  %s: %s", holderText(h), release(h)))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "apply will refuse until these processes let go of the GPUs:\n" + strings.Join(lines, "\n") + "\n"
}

// release says how to make a holder let go of a GPU.
func release(p proc.Process) string {
	name := commandName(p)
	switch {
	case p.Container > 0:
		return fmt.Sprintf("stop container %d (pct stop %d), or the service in it", p.Container, p.Container)
	case p.VM > 0:
		return fmt.Sprintf("stop VM %d (qm stop %d)", p.VM, p.VM)
	case strings.HasPrefix(name, "nvidia-persistenced"):
		return "systemctl stop nvidia-persistenced (or nvidia-smi -pm 0 for the legacy persistence mode)"
	case strings.HasPrefix(name, "nv-fabricmanager"), strings.HasPrefix(name, "nvidia-imex"), strings.HasPrefix(name, "nv-hostengine"), strings.HasPrefix(name, "dcgm"):
		return fmt.Sprintf("stop the %s service", name)
	case name == "Xorg" || name == "gnome-shell" || name == "kwin_wayland" || name == "sddm" || name == "gdm":
		return "stop the display manager, or move the display to another GPU"
	}
	return fmt.Sprintf("stop it (kill %d) or the service that runs it", p.PID)
}

// shortName is the marketing name of a GPU, or the device name.
func shortName(name string) string {
	if m := chipPrefix.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return name
}

func toText(to string) string {
	if to == plan.Default {
		return "(default)"
	}
	return to
}
