// Package proc finds the processes that hold device nodes open, from /proc/<pid>/fd, and
// the Proxmox guest each one belongs to, from its cgroup.
package proc

import (
	"errors"
	"io/fs"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/lazyre"
)

// Process is a process with matching files open.
type Process struct {
	PID     int      // the directory's name under /proc
	Command string   // the short name from /proc/<pid>/comm
	Cmdline []string // /proc/<pid>/cmdline: the arguments, when readable
	// Container is the Proxmox container (LXC) the process runs in, VM the Proxmox VM
	// whose QEMU it is, both from /proc/<pid>/cgroup; 0 when none.
	Container int
	VM        int
	Files     []string // the matching files it holds open, as its /proc/<pid>/fd links name them
}

// Scan is the result of looking through /proc.
type Scan struct {
	Processes []Process
	// Unreadable counts processes whose open files could not be listed (other users'
	// processes, without root): holders among them are not seen.
	Unreadable int
}

var (
	lxcCgroup = lazyre.New(`/lxc(?:\.payload)?[/.](\d+)(?:/|$)`)
	vmCgroup  = lazyre.New(`/qemu\.slice/(\d+)\.scope(?:/|$)`)
)

// OpenFiles lists the processes that have a file open for which match returns true.
func OpenFiles(h *host.Host, match func(path string) bool) (*Scan, error) {
	names, err := h.ReadDir("/proc")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &Scan{}, nil // a snapshot without processes
		}
		return nil, err
	}
	s := &Scan{}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		dir := "/proc/" + name
		// Listed once, each of its links read through the listing: one call a link.
		fds, err := h.List(dir + "/fd")
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				s.Unreadable++
			}
			continue // also: the process exited while we looked
		}
		var files []string
		seen := map[string]bool{}
		for _, fd := range fds.Entries() {
			target, err := fds.Readlink(fd.Name)
			if err != nil || !match(target) || seen[target] {
				continue
			}
			seen[target] = true
			files = append(files, target)
		}
		fds.Close()
		if len(files) == 0 {
			continue
		}
		p := Process{PID: pid, Files: files}
		p.Command, _ = h.ReadString(dir + "/comm")
		if b, err := h.ReadFile(dir + "/cmdline"); err == nil && strings.Trim(string(b), "\x00") != "" {
			p.Cmdline = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		}
		if cg, err := h.ReadString(dir + "/cgroup"); err == nil {
			p.Container, p.VM = Guest(cg)
		}
		s.Processes = append(s.Processes, p)
	}
	return s, nil
}

// Guest returns the Proxmox container or VM a cgroup file places a process in:
// "0::/lxc/129/ns/…" (Proxmox's LXC layout), "/lxc.payload.129/…" (plain LXC), or
// "/qemu.slice/131.scope" (a VM's QEMU). 0 means none.
func Guest(cgroup string) (container, vm int) {
	for _, line := range strings.Split(cgroup, "\n") {
		_, path, ok := strings.Cut(line, "::")
		if !ok {
			// cgroup v1 lines read "N:controllers:/path".
			if i := strings.LastIndex(line, ":"); i >= 0 {
				path = line[i+1:]
			}
		}
		if m := lxcCgroup.FindStringSubmatch(path); m != nil {
			container, _ = strconv.Atoi(m[1])
		}
		if m := vmCgroup.FindStringSubmatch(path); m != nil {
			vm, _ = strconv.Atoi(m[1])
		}
	}
	return container, vm
}
