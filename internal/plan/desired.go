package plan

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/gpusplit/gpusplit/internal/drivers"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/lazyre"
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
	// SyncProxmox makes the split include Proxmox's files: apply runs pve sync after
	// the rebinding succeeded. Unset, it is on for a Proxmox node (Defaults).
	SyncProxmox *bool `toml:"sync_proxmox"`
	// Persist makes the split include the boot files that keep it (persist install).
	// Unset, it is on for a Proxmox node (Defaults).
	Persist *bool   `toml:"persist"`
	Groups  []Group `toml:"group"`
	Pools   []Pool  `toml:"pool"`

	// The file's name and text, for the line and column of what Check finds.
	name string
	data []byte
}

// Group is one [[group]] of split.toml.
type Group struct {
	Name       string   `toml:"name"`
	Select     []string `toml:"select"`
	Driver     string   `toml:"driver"`
	Mapping    string   `toml:"mapping"`
	Containers []int    `toml:"containers"`
	VMs        []int    `toml:"vms"`
	// Model is the directory of the model the group's guests serve; plan says whether
	// it fits on what they keep, at Context tokens and Concurrency sequences.
	Model       string `toml:"model"`
	Context     int    `toml:"context"`
	Concurrency int    `toml:"concurrency"`
}

// Pool is one [[pool]] of split.toml: GPUs that rest on a driver (their vendor's by
// default) for the containers, and go to vfio-pci while one of the VMs runs with them.
type Pool struct {
	Name       string   `toml:"name"`
	Select     []string `toml:"select"`
	Resting    string   `toml:"resting"`
	Mapping    string   `toml:"mapping"`
	Containers []int    `toml:"containers"`
	VMs        []int    `toml:"vms"`
}

// table is what groups and pools have in common, for the checks they share: the array
// of tables it is written in, its index there, and the key that names its driver.
type table struct {
	kind      string // "group" or "pool"
	index     int
	name      string
	sel       []string
	driverKey string
	driver    string
	mapping   string
	cts, vms  []int
}

func (t table) what() string { return fmt.Sprintf("%s %q", t.kind, t.name) }

// tables lists the groups, then the pools.
func (f *File) tables() []table {
	var out []table
	for i, g := range f.Groups {
		out = append(out, table{"group", i, g.Name, g.Select, "driver", g.Driver, g.Mapping, g.Containers, g.VMs})
	}
	for i, p := range f.Pools {
		out = append(out, table{"pool", i, p.Name, p.Select, "resting", p.Resting, p.Mapping, p.Containers, p.VMs})
	}
	return out
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

// InvalidFileError is a split.toml that could be read but breaks its rules: every
// problem (Err), and the file as far as it was read (File), on which Check can still
// look up the names it gives, so that one run shows both kinds of mistake.
type InvalidFileError struct {
	File *File
	Err  error
}

func (e *InvalidFileError) Error() string { return e.Err.Error() }
func (e *InvalidFileError) Unwrap() error { return e.Err }

// ParseFile reads a split.toml: unknown keys, wrong types and bad selectors are errors
// that name the line and column. It reports every problem of the file at once (joined,
// one a line, in an *InvalidFileError), not one a run; only a TOML syntax error, after
// which nothing can be read, comes alone.
func ParseFile(name string, data []byte) (*File, error) {
	var f File
	var errs []error
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var de *toml.DecodeError
		var sm *toml.StrictMissingError
		switch {
		case errors.As(err, &sm) && len(sm.Errors) > 0:
			// The decoder read the rest of the file: its other problems follow.
			for _, e := range sm.Errors {
				line, col := e.Position()
				errs = append(errs, &ConfigError{File: name, Line: line, Column: col,
					Msg: fmt.Sprintf("unknown key %q (known: devices, allow_shared_groups, rest, sync_proxmox, persist; in [[group]]: name, select, driver, mapping, containers, vms, model, context, concurrency; in [[pool]]: name, select, resting, mapping, containers, vms)", strings.Join(e.Key(), "."))})
			}
		case errors.As(err, &de):
			line, col := de.Position()
			return nil, &ConfigError{File: name, Line: line, Column: col, Msg: de.Error()}
		default:
			return nil, &ConfigError{File: name, Msg: err.Error()}
		}
	}
	at := func(needle, msg string) error {
		line, col := locate(data, needle)
		return &ConfigError{File: name, Line: line, Column: col, Msg: msg}
	}
	if f.Rest != "" && f.Rest != "vendor" && f.Rest != "keep" {
		errs = append(errs, at(`rest`, fmt.Sprintf("rest = %q: it is \"vendor\" (GPUs no group selects go to their vendor's driver) or \"keep\" (they stay where they are)", f.Rest)))
	}
	if f.Devices != "" {
		if _, err := pci.ParseSelectors(f.Devices); err != nil {
			errs = append(errs, at(f.Devices, "devices: "+err.Error()))
		}
	}
	if len(f.Groups) == 0 && len(f.Pools) == 0 {
		errs = append(errs, &ConfigError{File: name, Msg: "no [[group]] and no [[pool]]: say which GPUs go to which driver"})
	}
	f.name, f.data = name, data
	names := map[string]string{}
	guests := map[int]string{} // container or VM, by id
	for _, t := range f.tables() {
		if t.name == "" {
			errs = append(errs, at("[["+t.kind+"]]", fmt.Sprintf("%s %d has no name", t.kind, t.index+1)))
		} else if prev, ok := names[t.name]; ok {
			errs = append(errs, at(`"`+t.name+`"`, fmt.Sprintf("a %s and a %s are both named %q", prev, t.kind, t.name)))
		}
		names[t.name] = t.kind
		if len(t.sel) == 0 {
			errs = append(errs, at(`"`+t.name+`"`, fmt.Sprintf("%s has no select = [...]: say which GPUs it holds", t.what())))
		}
		for _, s := range t.sel {
			if _, err := pci.ParseSelectors(s); err != nil {
				errs = append(errs, at(`"`+s+`"`, fmt.Sprintf("%s: %v", t.what(), err)))
			}
		}
		if t.kind == "pool" && (t.driver == VFIO || t.driver == None) {
			errs = append(errs, f.at(t, "resting", -1, fmt.Sprintf("%s: resting = %q: a pool rests where its containers use it (its vendor's driver, or another host driver) and goes to vfio-pci only while a VM holds it; GPUs that always belong to VMs are a [[group]] with driver = \"vfio-pci\"", t.what(), t.driver)))
		} else if t.driver != Default && t.driver != None {
			if err := drivers.Valid(t.driver); err != nil {
				errs = append(errs, f.at(t, t.driverKey, -1, fmt.Sprintf("%s: %v", t.what(), err)))
			}
		}
		if t.mapping != "" && !mappingID.MatchString(t.mapping) {
			errs = append(errs, f.at(t, "mapping", -1, fmt.Sprintf("%s: mapping = %q is not a Proxmox mapping id: a letter, then at least one more letter, digit, '-' or '_' (what pvesh create /cluster/mapping/pci --id accepts)", t.what(), t.mapping)))
		}
		if t.kind == "pool" && len(t.vms) > 0 && t.mapping == "" {
			errs = append(errs, f.at(t, "vms", -1, fmt.Sprintf("%s: its VMs take the GPUs through a mapping: give it mapping = \"NAME\" (pve sync writes it, and points the VMs' hostpci entries at it)", t.what())))
		}
		if t.kind == "group" {
			g := f.Groups[t.index]
			for _, x := range []struct {
				key string
				n   int
			}{{"context", g.Context}, {"concurrency", g.Concurrency}} {
				if x.n < 0 {
					errs = append(errs, f.at(t, x.key, -1, fmt.Sprintf("%s: %s = %d: a count of tokens or sequences, not negative", t.what(), x.key, x.n)))
				}
			}
		}
		for _, list := range []struct {
			key, noun string
			ids       []int
		}{{"containers", "container", t.cts}, {"vms", "VM", t.vms}} {
			for j, id := range list.ids {
				if id < minGuestID || id > maxGuestID {
					errs = append(errs, f.at(t, list.key, j, fmt.Sprintf("%s: %d is not a Proxmox %s id: ids run from %d to %d", t.what(), id, list.noun, minGuestID, maxGuestID)))
					continue
				}
				if prev, ok := guests[id]; ok && prev != list.noun {
					errs = append(errs, f.at(t, list.key, j, fmt.Sprintf("%s: %d is named both as a container and as a VM: Proxmox gives each guest its own id; list it under containers or under vms", t.what(), id)))
				}
				guests[id] = list.noun
			}
		}
	}
	if len(errs) > 0 {
		return nil, &InvalidFileError{File: &f, Err: errors.Join(errs...)}
	}
	return &f, nil
}

// Proxmox's rules for the names split.toml gives: a mapping id is a pve-configid
// (pve-common's $CONFIGID_RE, [a-z][a-z0-9_-]+ without regard to case), a guest id a
// pve-vmid (100 to 999999999; lower ids are reserved).
var mappingID = lazyre.New(`^[a-zA-Z][a-zA-Z0-9_-]+$`)

// ValidMappingID reports whether id is a name Proxmox accepts for a mapping.
func ValidMappingID(id string) bool { return mappingID.MatchString(id) }

const (
	minGuestID = 100
	maxGuestID = 999999999
)

// Names answers, for Check, whether the names a desired state gives exist on the host
// it is planned on. The command line asks the host; plan itself reads nothing.
type Names interface {
	// Driver returns nil for a PCI driver the host has or can load, else why not.
	Driver(name string) error
	// Container and VM return nil for a guest of this node, else why not.
	Container(id int) error
	VM(id int) error
	// Mapping returns the devices of this node that a Proxmox PCI mapping holds, for
	// the mapping: selectors (a pci.MappingLookup), else why there are none.
	Mapping(name string) ([]string, error)
}

// Check verifies that every name the file gives exists: each select entry chooses a
// GPU of inv (its mapping: selectors looked up by names), each driver is one the host has or can load, each container and VM is a
// guest of this node. It reports every problem, each with its line and column, so that
// one run shows all there is to fix. What ParseFile refuses (a selector that does not
// parse, a driver name no driver could have, a guest id out of range) it leaves to
// ParseFile's error, so that the file of an InvalidFileError can be checked too.
func (f *File) Check(inv *inventory.Inventory, names Names) error {
	var gpus []*pci.Device
	for i := range inv.GPUs {
		gpus = append(gpus, inv.GPUs[i].Device)
	}
	var errs []error
	for _, t := range f.tables() {
		for j, s := range t.sel {
			if len(gpus) == 0 {
				break // Make says there is nothing to split, better than each selector could
			}
			sels, err := pci.ParseSelectors(s)
			if err != nil {
				continue
			}
			sels, err = pci.ResolveMappings(sels, names.Mapping)
			if err == nil {
				_, err = pci.Choose(gpus, gpus, sels, "GPU", "GPU")
			}
			if err != nil {
				errs = append(errs, f.at(t, "select", j, fmt.Sprintf("%s: %v", t.what(), err)))
			}
		}
		if t.driver != Default && t.driver != None && drivers.Valid(t.driver) == nil {
			if err := names.Driver(t.driver); err != nil {
				errs = append(errs, f.at(t, t.driverKey, -1, fmt.Sprintf("%s: %v", t.what(), err)))
			}
		}
		for j, id := range t.cts {
			if id < minGuestID || id > maxGuestID {
				continue
			}
			if err := names.Container(id); err != nil {
				errs = append(errs, f.at(t, "containers", j, fmt.Sprintf("%s: %v", t.what(), err)))
			}
		}
		for j, id := range t.vms {
			if id < minGuestID || id > maxGuestID {
				continue
			}
			if err := names.VM(id); err != nil {
				errs = append(errs, f.at(t, "vms", j, fmt.Sprintf("%s: %v", t.what(), err)))
			}
		}
	}
	return errors.Join(errs...)
}

// at is a ConfigError at the value of key in the table (its elem'th element when
// elem >= 0 and the value is an array), as the TOML parser saw it.
func (f *File) at(t table, key string, elem int, msg string) error {
	line, col := position(f.data, t.kind, t.index, key, elem)
	return &ConfigError{File: f.name, Line: line, Column: col, Msg: msg}
}

// position finds where a value of the index'th [[kind]] lies; 0, 0 when it cannot (a
// file not parsed from text, or tables written as an inline array).
func position(data []byte, kind string, index int, key string, elem int) (int, int) {
	if data == nil {
		return 0, 0
	}
	var p unstable.Parser
	p.Reset(data)
	n, inKind := -1, false
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			inKind = e.Kind == unstable.ArrayTable && keyOf(e) == kind
			if inKind {
				n++
			}
		case unstable.KeyValue:
			if !inKind || n != index || keyOf(e) != key {
				continue
			}
			// An array has no range of its own: point at its element, or else its key.
			k := e.Key()
			k.Next()
			at := k.Node().Raw
			if v := e.Value(); v.Kind != unstable.Array {
				at = v.Raw
			} else if elem >= 0 {
				it, n := v.Children(), 0
				for it.Next() {
					if it.Node().Kind == unstable.Comment {
						continue
					}
					if n == elem {
						at = it.Node().Raw
						break
					}
					n++
				}
			}
			pos := p.Shape(at).Start
			return pos.Line, pos.Column
		}
	}
	return 0, 0
}

// keyOf is a key as written, its parts joined with dots.
func keyOf(e *unstable.Node) string {
	var parts []string
	for it := e.Key(); it.Next(); {
		parts = append(parts, string(it.Node().Data))
	}
	return strings.Join(parts, ".")
}

// Desired turns the file into the planner's desired state: the groups, then the pools.
func (f *File) Desired() (Desired, error) {
	d := Desired{KeepRest: f.Rest == "keep", AllowSharedGroups: f.AllowSharedGroups, SyncProxmox: f.SyncProxmox != nil && *f.SyncProxmox, Persist: f.Persist != nil && *f.Persist}
	for _, tb := range f.tables() {
		t := Target{Name: tb.name, Driver: tb.driver, Mapping: tb.mapping, Containers: tb.cts, VMs: tb.vms, Pool: tb.kind == "pool"}
		for _, s := range tb.sel {
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
	return Desired{Targets: []Target{{Name: "vfio", Input: "vfio", Choices: choices, Driver: VFIO}}}
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
