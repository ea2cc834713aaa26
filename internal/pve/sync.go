package pve

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// Side is where a GPU ends up after the split.
type Side struct {
	GPU    *inventory.GPU
	Driver string // the driver it ends on
	Target *plan.Target
	HeldBy int // the running VM that holds a pool's GPU; 0 otherwise
}

// Change is a file sync would change: its text before and after, and what to know.
type Change struct {
	Path  string
	Old   string
	New   string
	Notes []string
	// Refusals say why the change would give a result that cannot work, or would lose
	// what the file holds: sync writes nothing while any change has one, unless forced.
	Refusals []string
	// Guest is set for a VM or container config.
	Guest *Guest
	// Mapping is set for pci.cfg.
	Mapping *MappingFile
}

// Diff is the unified diff of the change.
func (c Change) Diff() string { return Diff(c.Path, c.Old, c.New) }

// SyncOptions tune a sync.
type SyncOptions struct {
	// VMMapping names the mapping of the vfio-pci side when the desired state does not;
	// by default the host-side mapping's name plus "-vm".
	VMMapping string
}

// Sync computes the changes that make Proxmox's files match the split: the mappings of
// both sides hold exactly this node's GPUs of that side (other nodes' entries untouched),
// the containers have device entries for exactly their GPUs, and the VMs that use the
// GPUs are set up to work with them. It reads the files; it writes nothing.
func Sync(h *host.Host, inv *inventory.Inventory, p *plan.Plan, d plan.Desired, o SyncOptions) ([]Change, []string, error) {
	node, err := NodeName(h)
	if err != nil {
		return nil, nil, err
	}
	s := &syncer{h: h, inv: inv, node: node, opts: o, side: endState(inv, p, d)}
	var changes []Change
	mc, err := s.mappings(d)
	if err != nil {
		return nil, nil, err
	}
	if mc != nil {
		changes = append(changes, *mc)
	}
	cts, err := s.containers(d)
	if err != nil {
		return nil, nil, err
	}
	changes = append(changes, cts...)
	vms, err := s.vms(d)
	if err != nil {
		return nil, nil, err
	}
	changes = append(changes, vms...)
	var out []Change
	for _, c := range changes {
		if c.Old != c.New || len(c.Notes) > 0 || len(c.Refusals) > 0 {
			out = append(out, c)
		}
	}
	return out, s.notes, nil
}

// NodeName is this node's name as Proxmox uses it: the host name up to the first dot.
func NodeName(h *host.Host) (string, error) {
	for _, p := range []string{"/etc/hostname", "/proc/sys/kernel/hostname"} {
		if n, err := h.ReadString(p); err == nil && n != "" {
			n, _, _ = strings.Cut(n, ".")
			return n, nil
		}
	}
	return "", fmt.Errorf("cannot tell this node's name: neither /etc/hostname nor /proc/sys/kernel/hostname is readable under %s", h.Root())
}

// endState says, for every GPU, the driver it ends on and the target that chose it.
func endState(inv *inventory.Inventory, p *plan.Plan, d plan.Desired) map[pci.Address]Side {
	out := map[pci.Address]Side{}
	targets := map[string]*plan.Target{}
	for i := range d.Targets {
		targets[d.Targets[i].Name] = &d.Targets[i]
	}
	moves := map[pci.Address]plan.Move{}
	for _, m := range append(slices.Clone(p.Moves), p.InPlace...) {
		moves[m.Device] = m
	}
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		sd := Side{GPU: g, Driver: g.Driver}
		if m, ok := moves[g.Address]; ok {
			sd.Driver, sd.Target, sd.HeldBy = m.To, targets[m.Target], m.HeldBy
		}
		out[g.Address] = sd
	}
	return out
}

type syncer struct {
	h     *host.Host
	inv   *inventory.Inventory
	node  string
	opts  SyncOptions
	side  map[pci.Address]Side
	notes []string
	// vmMapping maps a host-side mapping to its vfio-pci side, as sync decided.
	vmMapping map[string]string
	// mappingGPUs are the GPUs each mapping holds on this node after the sync.
	mappingGPUs map[string][]pci.Address
}

// gpuOfPath finds the GPU a mapping path points to: its own address, or its slot.
func (s *syncer) gpuOfPath(path string) (pci.Address, bool) {
	first, _, _ := strings.Cut(path, ";")
	if !strings.Contains(first, ".") {
		first += ".0"
	}
	a, err := pci.ParseAddress(first)
	if err != nil {
		return pci.Address{}, false
	}
	if _, ok := s.side[a]; ok {
		return a, true
	}
	return pci.Address{}, false
}

func onVFIO(d string) bool { return d == plan.VFIO }

// mappings computes the new pci.cfg.
func (s *syncer) mappings(d plan.Desired) (*Change, error) {
	f, err := ReadMappings(s.h)
	if err != nil {
		return nil, err
	}
	old := f.String()
	// The GPUs each mapping should hold on this node.
	want := map[string][]pci.Address{}
	described := map[string]string{}
	entryOf := map[pci.Address]MapEntry{} // existing entries, to keep their form
	heldIn := map[pci.Address][]string{}  // the mappings each GPU is in on this node now
	named := false
	var refusals []string
	for _, t := range d.Targets {
		if t.Mapping != "" {
			named = true
			want[t.Mapping] = nil
		}
	}
	for _, m := range f.Mappings {
		for _, e := range m.NodeMaps(s.node) {
			if a, ok := s.gpuOfPath(e.Path); ok {
				entryOf[a] = e
				heldIn[a] = append(heldIn[a], m.ID)
			}
		}
	}
	s.vmMapping = map[string]string{}
	if named {
		for a, sd := range s.side {
			if sd.Target != nil && sd.Target.Mapping != "" {
				want[sd.Target.Mapping] = append(want[sd.Target.Mapping], a)
			}
		}
		// A host-side group's mapping leads its VMs to the vfio-pci group's; a pool's
		// mapping is its VMs' own.
		for _, t := range d.Targets {
			if t.Mapping == "" || t.Driver == plan.VFIO || t.Pool {
				continue
			}
			for _, u := range d.Targets {
				if u.Driver == plan.VFIO && u.Mapping != "" {
					s.vmMapping[t.Mapping] = u.Mapping
				}
			}
		}
	} else {
		// No names given: each mapping that holds GPUs of this node is split by side,
		// the vfio-pci side going to <name>-vm (or SyncOptions.VMMapping).
		for _, m := range f.Mappings {
			if strings.HasSuffix(m.ID, "-vm") && f.Mapping(strings.TrimSuffix(m.ID, "-vm")) != nil {
				continue // handled with its host-side mapping
			}
			vmName := m.ID + "-vm"
			if s.opts.VMMapping != "" {
				vmName = s.opts.VMMapping
			}
			var host, vm []pci.Address
			for _, id := range []string{m.ID, vmName} {
				mm := f.Mapping(id)
				if mm == nil {
					continue
				}
				for _, e := range mm.NodeMaps(s.node) {
					a, ok := s.gpuOfPath(e.Path)
					if !ok {
						continue
					}
					if onVFIO(s.side[a].Driver) {
						vm = append(vm, a)
					} else {
						host = append(host, a)
					}
				}
			}
			if len(vm) == 0 || len(host) == 0 && f.Mapping(vmName) == nil {
				continue // nothing to split: the mapping is all on one side
			}
			if mm := f.Mapping(vmName); mm != nil && s.opts.VMMapping == "" {
				if others := otherNodes(mm, s.node); len(others) > 0 {
					refusals = append(refusals, fmt.Sprintf("mapping %s exists already and holds devices of other nodes (%s): sync would add this node's vfio-pci GPUs to it; to merge into it, name it as the vfio-pci side's mapping (mapping = %q in split.toml, or on the command line), else choose another name", vmName, strings.Join(others, ", "), vmName))
				}
			}
			want[m.ID], want[vmName] = host, vm
			s.vmMapping[m.ID] = vmName
			if d := m.Props["description"]; d != "" {
				described[vmName] = d + ", on vfio-pci for VMs"
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		m := f.Mapping(id)
		if m == nil {
			continue
		}
		refusals = append(refusals, s.staleEntries(m)...)
		if others := otherNodes(m, s.node); len(others) > 0 && (named || s.opts.VMMapping == id) && len(m.NodeMaps(s.node)) == 0 {
			s.notes = append(s.notes, fmt.Sprintf("mapping %s, named to hold this node's GPUs, also holds devices of other nodes (%s): they are kept", id, strings.Join(others, ", ")))
		}
	}
	s.mappingGPUs = map[string][]pci.Address{}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		gpus := dedupe(want[id])
		s.mappingGPUs[id] = gpus
		var entries []MapEntry
		for _, a := range gpus {
			entries = append(entries, s.entry(a, entryOf[a]))
		}
		props := map[string]string{"description": described[id]}
		if f.Mapping(id) == nil && len(gpus) > 0 {
			maps.Copy(props, s.inherited(f, id, gpus, heldIn))
		}
		if err := f.SetNodeMaps(id, s.node, entries, props); err != nil {
			return nil, err
		}
	}
	return &Change{Path: MappingPath, Old: old, New: f.String(), Mapping: f, Refusals: refusals}, nil
}

// staleEntries are the refusals for this node's entries of a mapping sync rewrites that
// no longer match the host: sync would drop or rewrite them, and the user should know
// what differs before it does.
func (s *syncer) staleEntries(m *Mapping) []string {
	var out []string
	for _, e := range m.NodeMaps(s.node) {
		if _, ok := s.gpuOfPath(e.Path); !ok {
			what := "no device of this host"
			first, _, _ := strings.Cut(e.Path, ";")
			if !strings.Contains(first, ".") {
				first += ".0"
			}
			if a, err := pci.ParseAddress(first); err == nil {
				if d := s.inv.Tree.Lookup(a); d != nil {
					what = fmt.Sprintf("%s, a %s device (class %06x), not a GPU", a, d.ID(), d.Class)
				}
			}
			out = append(out, fmt.Sprintf("mapping %s: the entry of node %s with path=%s points to %s: sync would drop it; fix or remove the entry (Datacenter → Resource Mappings), or force the write", m.ID, s.node, e.Path, what))
			continue
		}
		if probs := Check(s.inv.Tree, e); len(probs) > 0 {
			out = append(out, fmt.Sprintf("mapping %s: the entry of node %s with path=%s no longer matches the host (%s): sync would rewrite it from sysfs; check the device is the one meant, then force the write", m.ID, s.node, e.Path, strings.Join(probs, "; ")))
		}
	}
	return out
}

// otherNodes lists a mapping's entries of nodes other than node, as node:path.
func otherNodes(m *Mapping, node string) []string {
	var out []string
	for _, e := range m.Maps {
		if e.Node != node {
			out = append(out, e.Node+":"+e.Path)
		}
	}
	return out
}

// ReadMappings reads and parses this cluster's pci.cfg; a file that does not exist is an
// empty one. A file larger than pmxcfs holds is refused before it is parsed.
func ReadMappings(h *host.Host) (*MappingFile, error) {
	data, err := readMappings(h)
	if err != nil {
		return nil, err
	}
	return ParseMappings(MappingPath, data)
}

// readMappings is the text of pci.cfg; "" where there is none.
func readMappings(h *host.Host) (string, error) {
	data, err := h.ReadFile(MappingPath)
	if errors.Is(err, fs.ErrNotExist) {
		data = nil
	} else if err != nil {
		return "", err
	}
	if len(data) > MaxFile {
		return "", fmt.Errorf("%s is larger than 1 MiB, the most Proxmox's file system holds: it is not Proxmox's, not reading it", MappingPath)
	}
	return string(data), nil
}

func dedupe(as []pci.Address) []pci.Address {
	slices.SortFunc(as, pci.Address.Compare)
	return slices.Compact(as)
}

// entry is the map line for a GPU, as Proxmox's own check wants it: id, iommugroup and
// subsystem-id exactly as sysfs has them, lower case, no 0x. An existing entry keeps its
// path form (a whole slot, or one function).
func (s *syncer) entry(a pci.Address, old MapEntry) MapEntry {
	g := s.side[a].GPU
	e := MapEntry{
		Node:        s.node,
		Path:        a.String(),
		ID:          g.ID(),
		SubsystemID: g.SubsystemID(),
	}
	if len(g.Functions) > 0 {
		e.Path = strings.TrimSuffix(a.String(), ".0") // the whole card, with its functions
	}
	if old.Path != "" {
		e.Path = old.Path
		e.Description = old.Description
	}
	if g.IOMMUGroup >= 0 {
		e.IOMMUGroup = strconv.Itoa(g.IOMMUGroup)
	}
	if old.raw != "" && old.ID == e.ID && old.SubsystemID == e.SubsystemID && old.IOMMUGroup == e.IOMMUGroup && old.Node == e.Node {
		e.raw = old.raw // unchanged: String shows it as written; SetNodeMaps writes every entry from its fields, in the GUI's key order
	}
	return e
}

// guests lists the configs of one kind on this node.
func (s *syncer) guests(kind string) ([]*Guest, error) {
	dir := "/etc/pve/nodes/" + s.node + "/" + kind
	names, err := s.h.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Guest
	for _, n := range names {
		id, err := strconv.Atoi(strings.TrimSuffix(n, ".conf"))
		if err != nil || !strings.HasSuffix(n, ".conf") {
			continue
		}
		g, err := ReadGuest(s.h, kind, id)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *Guest) int { return a.ID - b.ID })
	return out, nil
}

// ReadGuest reads the config of a VM or container on this node.
func ReadGuest(h *host.Host, kind string, id int) (*Guest, error) {
	p := GuestPath(kind, id)
	data, err := h.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		// A raw read error named a path; the person wants the guests there are.
		return nil, &NoGuestError{Kind: kind, ID: id, Choice: GuestChoice(h, kind)}
	}
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFile {
		return nil, fmt.Errorf("%s is larger than 1 MiB, the most Proxmox's file system holds; not touching it", p)
	}
	return ParseGuest(p, kind, id, string(data))
}
