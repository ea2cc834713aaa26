package pve

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
)

// GuestName is a guest of this node: its id, and its name (a VM's name:, a container's
// hostname:; "" when it has none or its config cannot be read).
type GuestName struct {
	ID   int
	Name string
}

func (g GuestName) String() string {
	if g.Name == "" {
		return strconv.Itoa(g.ID)
	}
	return fmt.Sprintf("%d (%s)", g.ID, g.Name)
}

// Noun is what Proxmox calls a guest of the kind.
func Noun(kind string) string {
	if kind == LXC {
		return "container"
	}
	return "VM"
}

// Guests lists this node's guests of a kind by id: the configs in /etc/pve/KIND, which
// links to this node's directory. A node with none has an empty list.
func Guests(h *host.Host, kind string) ([]GuestName, error) {
	names, err := h.ReadDir("/etc/pve/" + kind)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []GuestName
	for _, n := range names {
		id, err := strconv.Atoi(strings.TrimSuffix(n, ".conf"))
		if err != nil || !strings.HasSuffix(n, ".conf") {
			continue
		}
		g := GuestName{ID: id}
		if data, err := h.ReadFile(GuestPath(kind, id)); err == nil && len(data) <= MaxFile {
			if c, err := ParseGuest(GuestPath(kind, id), kind, id, string(data)); err == nil {
				key := "name"
				if kind == LXC {
					key = "hostname"
				}
				g.Name, _ = c.Get(key)
			}
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b GuestName) int { return a.ID - b.ID })
	return out, nil
}

// maxListed is how many guests an error names before it says how many more there are.
const maxListed = 8

// GuestChoice says which guests of a kind this node has, for an error that needs one:
// "this node's VMs: 131 (train01)", or "this node has no VM".
func GuestChoice(h *host.Host, kind string) string {
	gs, err := Guests(h, kind)
	if err != nil {
		return fmt.Sprintf("ls /etc/pve/%s lists this node's %ss", kind, Noun(kind))
	}
	if len(gs) == 0 {
		return fmt.Sprintf("this node has no %s", Noun(kind))
	}
	var parts []string
	for i, g := range gs {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more (ls /etc/pve/%s)", len(gs)-maxListed, kind))
			break
		}
		parts = append(parts, g.String())
	}
	return fmt.Sprintf("this node's %ss: %s", Noun(kind), strings.Join(parts, ", "))
}

// NoGuestError is a guest with no config on this node. It wraps fs.ErrNotExist.
type NoGuestError struct {
	Kind string
	ID   int
	// Choice says which guests of the kind the node has (GuestChoice).
	Choice string
}

func (e *NoGuestError) Error() string {
	return fmt.Sprintf("no %s %d on this node (%s does not exist); %s", Noun(e.Kind), e.ID, GuestPath(e.Kind, e.ID), e.Choice)
}

func (e *NoGuestError) Unwrap() error { return fs.ErrNotExist }
