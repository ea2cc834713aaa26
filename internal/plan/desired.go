package plan

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/gpusplit/gpusplit/internal/pci"
)

// DefaultConfig is where the desired state is kept.
const DefaultConfig = "/etc/gpusplit/split.toml"

// File is the desired state as written in split.toml; docs/split.toml documents it.
type File struct {
	// Devices says which devices count as GPUs, as --devices does.
	Devices           string `toml:"devices"`
	AllowSharedGroups bool   `toml:"allow_shared_groups"`
	Rest              string `toml:"rest"` // "vendor" (the default) or "keep"
	// SyncProxmox makes apply run pve sync after the rebinding succeeded.
	SyncProxmox bool    `toml:"sync_proxmox"`
	Groups      []Group `toml:"group"`
}

// Group is one [[group]] of split.toml.
type Group struct {
	Name       string   `toml:"name"`
	Select     []string `toml:"select"`
	Driver     string   `toml:"driver"`
	Mapping    string   `toml:"mapping"`
	Containers []int    `toml:"containers"`
	VMs        []int    `toml:"vms"`
}

// ConfigError is a mistake in a configuration file, with where it is.
type ConfigError struct {
	File         string
	Line, Column int // 1-based; 0 when unknown
	Msg          string
}

func (e *ConfigError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// ParseFile reads a split.toml: unknown keys, wrong types and bad selectors are errors
// that name the line and column.
func ParseFile(name string, data []byte) (*File, error) {
	var f File
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var de *toml.DecodeError
		var sm *toml.StrictMissingError
		switch {
		case errors.As(err, &sm) && len(sm.Errors) > 0:
			e := sm.Errors[0]
			line, col := e.Position()
			return nil, &ConfigError{File: name, Line: line, Column: col,
				Msg: fmt.Sprintf("unknown key %q (known: devices, allow_shared_groups, rest, sync_proxmox, and in [[group]]: name, select, driver, mapping, containers, vms)", strings.Join(e.Key(), "."))}
		case errors.As(err, &de):
			line, col := de.Position()
			return nil, &ConfigError{File: name, Line: line, Column: col, Msg: de.Error()}
		}
		return nil, &ConfigError{File: name, Msg: err.Error()}
	}
	at := func(needle, msg string) error {
		line, col := locate(data, needle)
		return &ConfigError{File: name, Line: line, Column: col, Msg: msg}
	}
	if f.Rest != "" && f.Rest != "vendor" && f.Rest != "keep" {
		return nil, at(`rest`, fmt.Sprintf("rest = %q: it is \"vendor\" (GPUs no group selects go to their vendor's driver) or \"keep\" (they stay where they are)", f.Rest))
	}
	if f.Devices != "" {
		if _, err := pci.ParseSelectors(f.Devices); err != nil {
			return nil, at(f.Devices, "devices: "+err.Error())
		}
	}
	if len(f.Groups) == 0 {
		return nil, &ConfigError{File: name, Msg: "no [[group]]: say which GPUs go to which driver"}
	}
	names := map[string]bool{}
	for i, g := range f.Groups {
		if g.Name == "" {
			return nil, at("[[group]]", fmt.Sprintf("group %d has no name", i+1))
		}
		if names[g.Name] {
			return nil, at(`"`+g.Name+`"`, fmt.Sprintf("two groups are named %q", g.Name))
		}
		names[g.Name] = true
		if len(g.Select) == 0 {
			return nil, at(`"`+g.Name+`"`, fmt.Sprintf("group %q has no select = [...]: say which GPUs it holds", g.Name))
		}
		for _, s := range g.Select {
			if _, err := pci.ParseSelectors(s); err != nil {
				return nil, at(`"`+s+`"`, fmt.Sprintf("group %q: %v", g.Name, err))
			}
		}
		if strings.ContainsAny(g.Driver, " /\t\n") {
			return nil, at(g.Driver, fmt.Sprintf("group %q: %q is not a driver name", g.Name, g.Driver))
		}
	}
	return &f, nil
}

// Desired turns the file into the planner's desired state.
func (f *File) Desired() (Desired, error) {
	d := Desired{KeepRest: f.Rest == "keep", AllowSharedGroups: f.AllowSharedGroups, SyncProxmox: f.SyncProxmox}
	for _, g := range f.Groups {
		t := Target{Name: g.Name, Driver: g.Driver, Mapping: g.Mapping, Containers: g.Containers, VMs: g.VMs}
		for _, s := range g.Select {
			sels, err := pci.ParseSelectors(s)
			if err != nil {
				return Desired{}, err
			}
			t.Choices = append(t.Choices, sels)
		}
		d.Targets = append(d.Targets, t)
	}
	return d, nil
}

// ForVFIO is the desired state of plan --vfio: the selected GPUs go to vfio-pci, the
// others to (or stay on) their vendor's driver. Each choice is one --vfio flag.
func ForVFIO(choices [][]pci.Selector) Desired {
	return Desired{Targets: []Target{{Name: "vfio", Choices: choices, Driver: VFIO}}}
}

// locate finds the 1-based line and column of the first occurrence of needle.
func locate(data []byte, needle string) (int, int) {
	i := bytes.Index(data, []byte(needle))
	if i < 0 || needle == "" {
		return 0, 0
	}
	line := bytes.Count(data[:i], []byte("\n")) + 1
	col := i - bytes.LastIndexByte(data[:i], '\n')
	return line, col
}
