package pve

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/plural"
	"github.com/gpusplit/gpusplit/internal/table"
)

// WriteText prints the cluster view for a person, root being the host read, at most
// width columns wide where the table can: the nodes, the mappings' entries per node, the
// guests with their GPUs, HA and replication, then the problems and notes.
func (doc ClusterReport) WriteText(w io.Writer, root string, width int) {
	switch {
	case !doc.Members:
		fmt.Fprintf(w, "%s: the cluster's members are unknown (no %s); this node is %s.\n", root, MembersPath, doc.Node)
	case doc.Cluster == "":
		fmt.Fprintf(w, "%s: node %s is in no cluster.\n", root, doc.Node)
	default:
		quorate := "quorate"
		if !doc.Quorate {
			quorate = "NOT quorate: /etc/pve is read-only"
		}
		fmt.Fprintf(w, "%s: cluster %s, %s, %s; this node is %s.\n", root, doc.Cluster, plural.S(len(doc.Nodes), "node"), quorate, doc.Node)
	}
	var members []string
	if len(doc.Nodes) > 0 {
		fmt.Fprintln(w)
		t := table.New(table.Column{Header: "NODE"}, table.Column{Header: "ID"}, table.Column{Header: "ONLINE"}, table.Column{Header: "IP"})
		for _, n := range doc.Nodes {
			members = append(members, n.Name)
			online := "yes"
			if !n.Online {
				online = "NO"
			}
			t.Add(n.Name, strconv.Itoa(n.ID), online, dashIfEmpty(n.IP))
		}
		t.Write(w, width)
	}
	fmt.Fprintln(w)
	if len(doc.Mappings) == 0 {
		fmt.Fprintf(w, "No PCI mappings (%s).\n", MappingPath)
	} else {
		// A column per member, then the entries of nodes outside the cluster.
		cols := slices.Clone(members)
		if len(cols) == 0 {
			for _, m := range doc.Mappings {
				for n := range m.PerNode {
					if !slices.Contains(cols, n) {
						cols = append(cols, n)
					}
				}
			}
			slices.Sort(cols)
		}
		// Node names are shown as written: Proxmox tells them apart by case.
		other := "NOT IN CLUSTER"
		if !doc.Members {
			other = "OTHER NODES"
		}
		// A column per member, which stay; the guests that use a mapping wrap.
		heads := []table.Column{{Header: "MAPPING"}}
		for _, n := range cols {
			heads = append(heads, table.Column{Header: n})
		}
		heads = append(heads, table.Column{Header: other, Fit: table.Wrap, Sep: ", "}, table.Column{Header: "USED BY", Fit: table.Wrap, Sep: ", "})
		t := table.New(heads...)
		for _, m := range doc.Mappings {
			var row, other, users []string
			for _, n := range cols {
				row = append(row, countOrDash(m.PerNode[n]))
			}
			for _, n := range slices.Sorted(maps.Keys(m.PerNode)) {
				if !slices.Contains(cols, n) {
					other = append(other, fmt.Sprintf("%s: %d", n, m.PerNode[n]))
				}
			}
			for _, id := range m.UsedBy {
				users = append(users, guestLabel(doc, id))
			}
			t.Add(slices.Concat([]string{m.ID}, row, []string{dashIfEmpty(strings.Join(other, ", ")), dashIfEmpty(strings.Join(users, ", "))})...)
		}
		t.Write(w, width)
	}
	fmt.Fprintln(w)
	if len(doc.Guests) == 0 {
		fmt.Fprintln(w, "No guest uses a mapping or passes GPUs to a container.")
	} else {
		t := table.New(
			table.Column{Header: "GUEST"},
			table.Column{Header: "NODE"},
			table.Column{Header: "NAME", Fit: table.Shorten, Min: 10},
			table.Column{Header: "GPUS", Fit: table.Wrap, Sep: ", "},
			table.Column{Header: "HA, REPLICATION", Fit: table.Wrap, Sep: "; "},
		)
		for _, gu := range doc.Guests {
			name := dashIfEmpty(gu.Name)
			if gu.Template {
				name += " (template)"
			}
			t.Add(guestLabel(doc, gu.ID), gu.Node, name, guestGPUs(gu), dashIfEmpty(guestMoves(gu)))
		}
		t.Write(w, width)
	}
	fmt.Fprintln(w)
	if len(doc.Problems) == 0 {
		fmt.Fprintln(w, "No problems.")
	} else {
		fmt.Fprintf(w, "%s:\n", plural.S(len(doc.Problems), "problem"))
		for _, p := range doc.Problems {
			printWrapped(w, table.WrapText(p.Kind+": "+p.Message, width, "  ", "    "))
		}
	}
	for _, n := range doc.Notes {
		printWrapped(w, table.WrapText(n, width, "note: ", "  "))
	}
}

// printWrapped prints lines of table.WrapText.
func printWrapped(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func countOrDash(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// guestLabel is "VM 131" or "CT 129" for a guest of the document.
func guestLabel(doc ClusterReport, id int) string {
	for _, gu := range doc.Guests {
		if gu.ID == id && gu.Kind == "ct" {
			return fmt.Sprintf("CT %d", id)
		}
	}
	return fmt.Sprintf("VM %d", id)
}

// guestGPUs says what a guest takes: a VM its mappings and how many of each, a container
// its /dev/nvidiaN (in ranges) and how the nodes get in.
func guestGPUs(gu ClusterGuestReport) string {
	if gu.Kind == "vm" {
		var parts []string
		for _, u := range gu.Mappings {
			parts = append(parts, fmt.Sprintf("%s ×%d", u.Mapping, u.Needs))
		}
		return strings.Join(parts, ", ")
	}
	var minors []int
	others := 0
	for _, d := range gu.Devices {
		if m := gpuNode.FindStringSubmatch(d); m != nil {
			n, _ := strconv.Atoi(m[1])
			minors = append(minors, n)
		} else {
			others++
		}
	}
	slices.Sort(minors)
	var ranges []string
	for i := 0; i < len(minors); {
		j := i
		for j+1 < len(minors) && minors[j+1] == minors[j]+1 {
			j++
		}
		if j > i {
			ranges = append(ranges, fmt.Sprintf("%d-%d", minors[i], minors[j]))
		} else {
			ranges = append(ranges, strconv.Itoa(minors[i]))
		}
		i = j + 1
	}
	var out []string
	if len(ranges) > 0 {
		out = append(out, "/dev/nvidia"+strings.Join(ranges, ","))
	}
	if others > 0 {
		out = append(out, plural.S(others, "control node"))
	}
	if len(gu.CgroupAllow) > 0 {
		out = append(out, "cgroup 195")
	}
	return strings.Join(out, ", ")
}

// guestMoves says where HA and replication may take a guest.
func guestMoves(gu ClusterGuestReport) string {
	var out []string
	if gu.HA.Managed {
		s := "HA " + gu.HA.State
		if gu.HA.Rule != "" {
			strict := ""
			if gu.HA.Strict {
				strict = " (strict)"
			}
			s += fmt.Sprintf(", rule %s%s: %s", gu.HA.Rule, strict, strings.Join(gu.HA.Nodes, ", "))
		} else {
			s += ", any node"
		}
		out = append(out, s)
	}
	for _, r := range gu.Replication {
		out = append(out, fmt.Sprintf("replication %s → %s", r.Job, r.Target))
	}
	return strings.Join(out, "; ")
}

// dashIfEmpty is s, or "-" in a table cell that would be empty.
func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
