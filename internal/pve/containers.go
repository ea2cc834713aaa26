package pve

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/lazyre"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// The nvidia driver's device nodes a CUDA container needs besides its GPUs.
var controlNodes = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}

var gpuNode = lazyre.New(`^/dev/nvidia(\d+)$`)

// isNvidiaNode reports whether a device path belongs to the nvidia driver.
func isNvidiaNode(p string) bool {
	return strings.HasPrefix(p, "/dev/nvidia")
}

// containers computes the new configs of the containers that use the GPUs: each keeps
// device entries for exactly its GPUs that stay on nvidia (or those the desired state
// gives it), through the /dev/nvidiaN minors the driver reports, never assumed ones.
func (s *syncer) containers(d plan.Desired) ([]Change, error) {
	cts, err := s.guests(LXC)
	if err != nil {
		return nil, err
	}
	byMinor := map[int]pci.Address{}
	for a, sd := range s.side {
		if sd.GPU.Minor >= 0 {
			byMinor[sd.GPU.Minor] = a
		}
	}
	// Containers the desired state names get exactly their group's GPUs.
	explicit := map[int][]pci.Address{}
	for i, t := range d.Targets {
		for _, ct := range t.Containers {
			if explicit[ct] == nil {
				explicit[ct] = []pci.Address{}
			}
			for a, sd := range s.side {
				if sd.Target == &d.Targets[i] {
					explicit[ct] = append(explicit[ct], a)
				}
			}
		}
	}
	// The containers of a pool that a running VM holds in part are left as they are: the
	// GPUs it holds have no minor until they come back, and the hook that gives them
	// back brings the containers in line (docs/handoff.md).
	waiting := map[int][]string{}
	for _, a := range slices.SortedFunc(maps.Keys(s.side), pci.Address.Compare) {
		sd := s.side[a]
		if sd.HeldBy == 0 || sd.Target == nil {
			continue
		}
		for _, ct := range sd.Target.Containers {
			waiting[ct] = append(waiting[ct], fmt.Sprintf("%s by VM %d", a, sd.HeldBy))
		}
	}
	var out []Change
	for _, g := range cts {
		if held, ok := waiting[g.ID]; ok {
			s.notes = append(s.notes, fmt.Sprintf("container %d is left as it is while a VM holds GPUs of its pool (%s): its devN entries follow when the VM stops", g.ID, strings.Join(held, ", ")))
			continue
		}
		old := g.String()
		have := s.containerGPUs(g, byMinor)
		assigned, isExplicit := explicit[g.ID]
		if len(have) == 0 && !isExplicit {
			continue
		}
		var want []pci.Address
		if isExplicit {
			want = assigned
		} else {
			want = have
		}
		var keep []pci.Address
		c := Change{Path: g.Name, Guest: g}
		for _, a := range dedupe(want) {
			sd := s.side[a]
			switch {
			case sd.Driver != "nvidia":
			case sd.GPU.Minor < 0:
				// Not on nvidia yet: its minor is the driver's choice when it binds.
				c.Notes = append(c.Notes, fmt.Sprintf("container %d: GPU %s is not on nvidia now, so its /dev/nvidiaN is not known yet: the container gets it from the sync after the GPU is bound (apply does it on a Proxmox node, or gpusplit pve sync after apply)", g.ID, a))
			default:
				keep = append(keep, a)
			}
		}
		s.setContainerGPUs(g, keep, &c)
		c.Old, c.New = old, g.String()
		if c.Old == c.New {
			c.Notes = nil // nothing to say about a container left as it was
		} else {
			c.Notes = append(c.Notes, guestState(s, g)...)
		}
		out = append(out, c)
	}
	return out, nil
}

// containerGPUs are the GPUs whose /dev/nvidiaN a container config passes through.
func (s *syncer) containerGPUs(g *Guest, byMinor map[int]pci.Address) []pci.Address {
	var out []pci.Address
	for _, k := range g.Keys() {
		var p string
		switch {
		case strings.HasPrefix(k.Name, "dev") && strings.Trim(k.Name[3:], "0123456789") == "" && k.Name != "dev":
			p = DevPath(k.Value)
		case k.Name == "lxc.mount.entry":
			p, _, _ = strings.Cut(k.Value, " ")
		}
		if m := gpuNode.FindStringSubmatch(p); m != nil {
			n, _ := strconv.Atoi(m[1])
			if a, ok := byMinor[n]; ok {
				out = append(out, a)
			}
		}
	}
	return out
}

// setContainerGPUs makes a container pass through exactly the GPUs given, in the style it
// already uses: devN entries (Proxmox 8.1 and later), or lxc.mount.entry lines.
func (s *syncer) setContainerGPUs(g *Guest, gpus []pci.Address, c *Change) {
	wantNode := map[string]bool{}
	for _, a := range gpus {
		wantNode[fmt.Sprintf("/dev/nvidia%d", s.side[a].GPU.Minor)] = true
	}
	needControl := len(gpus) > 0
	style := "dev"
	options := ",mode=0666"
	var mountOpts string
	for _, k := range g.Keys() {
		if k.Name == "lxc.mount.entry" && isNvidiaNode(firstField(k.Value)) {
			style = "mount"
			if f := strings.Fields(k.Value); len(f) > 2 && gpuNode.MatchString(f[0]) {
				mountOpts = strings.Join(f[2:], " ")
			}
		}
		if strings.HasPrefix(k.Name, "dev") && gpuNode.MatchString(DevPath(k.Value)) {
			style = "dev"
			if _, opts, ok := strings.Cut(k.Value, ","); ok {
				options = "," + opts
			}
		}
	}
	// Remove what the container should not have.
	present := map[string]bool{}
	g.DeleteWhere(func(k Key) bool {
		var p string
		switch {
		case strings.HasPrefix(k.Name, "dev") && k.Name != "dev" && strings.Trim(k.Name[3:], "0123456789") == "":
			p = DevPath(k.Value)
		case k.Name == "lxc.mount.entry":
			p = firstField(k.Value)
		default:
			return false
		}
		if !isNvidiaNode(p) {
			return false
		}
		drop := false
		switch {
		case gpuNode.MatchString(p):
			drop = !wantNode[p]
		default: // control, uvm and caps nodes
			drop = !needControl
		}
		if !drop {
			present[p] = true
		}
		return drop
	})
	// Add what it lacks.
	add := func(p, opts string) {
		if present[p] {
			return
		}
		present[p] = true
		if style == "mount" {
			mo := mountOpts
			if mo == "" {
				mo = "none bind,optional,create=file"
			}
			g.AddRaw("lxc.mount.entry", p+" "+strings.TrimPrefix(p, "/")+" "+mo)
			return
		}
		g.Set(fmt.Sprintf("dev%d", g.FreeIndex("dev")), p+opts)
	}
	for _, a := range gpus {
		add(fmt.Sprintf("/dev/nvidia%d", s.side[a].GPU.Minor), options)
	}
	if needControl {
		for _, p := range controlNodes {
			add(p, ",mode=0666")
		}
		if style == "mount" {
			s.allowMajors(g, c)
		}
	}
	sorted := slices.Sorted(maps.Keys(wantNode))
	if len(sorted) > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("container %d passes through %s", g.ID, strings.Join(sorted, ", ")))
	} else {
		c.Notes = append(c.Notes, fmt.Sprintf("container %d keeps no GPU", g.ID))
	}
}

// allowMajors makes sure a container in the raw style may use the nvidia devices: the
// fixed major 195, and the major the kernel gave nvidia-uvm at this boot, read from
// /proc/devices (it changes with driver and kernel updates; devN entries need none of this).
func (s *syncer) allowMajors(g *Guest, c *Change) {
	majors := []string{"195"}
	if b, err := s.h.ReadFile("/proc/devices"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[1] == "nvidia-uvm" {
				majors = append(majors, f[0])
			}
		}
	} else {
		c.Notes = append(c.Notes, fmt.Sprintf("container %d: /proc/devices is unreadable, so the major of nvidia-uvm is unknown: check its lxc.cgroup2.devices.allow lines", g.ID))
	}
	for _, m := range majors {
		allowed := false
		for _, k := range g.Keys() {
			if k.Name == "lxc.cgroup2.devices.allow" {
				f := strings.Fields(k.Value)
				if len(f) >= 2 && (f[1] == m+":*" || f[1] == "*:*") {
					allowed = true
				}
			}
		}
		if !allowed {
			g.AddRaw("lxc.cgroup2.devices.allow", "c "+m+":* rwm")
		}
	}
}

func firstField(s string) string {
	f, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	return f
}
