package doctor

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/kmsg"
)

// libDirs are where distributions and the container toolkit put the driver's libraries.
var libDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64", "/usr/lib/aarch64-linux-gnu"}

// kernelVersion is the version of the loaded nvidia module, and where it was read.
func kernelVersion(h *host.Host) (string, string) {
	if v, err := h.ReadString("/sys/module/nvidia/version"); err == nil && v != "" {
		return v, "/sys/module/nvidia/version"
	}
	if b, err := h.ReadString("/proc/driver/nvidia/version"); err == nil {
		if v, ok := kmsg.ParseNVRMVersion(b); ok {
			return v, "/proc/driver/nvidia/version"
		}
	}
	return "", ""
}

// libVersion finds the version libnvidia-ml.so.1 resolves to in a root, through a reader
// of directory entries and link targets.
type libReader interface {
	ReadDir(p string) ([]string, error)
	Readlink(p string) (string, error)
}

type osReader struct{ root string }

func (o osReader) ReadDir(p string) ([]string, error) {
	es, err := os.ReadDir(o.root + p)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out, err
}

func (o osReader) Readlink(p string) (string, error) { return os.Readlink(o.root + p) }

// userVersions returns, for a root, the version libnvidia-ml.so.1 points to, and every
// versioned libnvidia-ml.so.<version> present.
func userVersions(r libReader) (resolved string, where string, all []string) {
	for _, dir := range libDirs {
		names, err := r.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, n := range names {
			if v, ok := strings.CutPrefix(n, "libnvidia-ml.so."); ok && strings.Count(v, ".") >= 1 {
				all = append(all, v)
			}
		}
		if t, err := r.Readlink(dir + "/libnvidia-ml.so.1"); err == nil && resolved == "" {
			if v, ok := strings.CutPrefix(path.Base(t), "libnvidia-ml.so."); ok {
				resolved, where = v, dir+"/libnvidia-ml.so.1 -> "+t
			}
		}
	}
	return resolved, where, all
}

// checkDriverMismatch compares the loaded nvidia module with the userspace library that
// NVML and CUDA load: they must be the same version, or nvidia-smi fails with
// "Driver/library version mismatch" and CUDA does not start.
func checkDriverMismatch(e *Env) []Finding {
	kv, kfrom := kernelVersion(e.H)
	var evidence []string
	// Which side is newer says what happened: newer libraries than the module are an
	// upgrade whose module is not loaded yet; older ones, stale libraries.
	newer, older := false, false
	compare := func(client, module string) {
		switch c := compareVersions(client, module); {
		case c > 0:
			newer = true
		case c < 0:
			older = true
		}
	}
	if kv != "" {
		if u, where, _ := userVersions(e.H); u != "" && u != kv {
			evidence = append(evidence, fmt.Sprintf("%s: %s", kfrom, kv), fmt.Sprintf("host: %s (%s)", where, u))
			compare(u, kv)
		}
		// Containers' own libraries, through a process of theirs (only the live host shows them).
		if e.H.Root() == "/" {
			seen := map[int]bool{}
			for _, g := range e.Inv.GPUs {
				for _, p := range g.Holders {
					if p.Kind != holders.KindProcess || p.Container == 0 || seen[p.Container] {
						continue
					}
					seen[p.Container] = true
					if u, where, _ := userVersions(osReader{root: fmt.Sprintf("/proc/%d/root", p.PID)}); u != "" && u != kv {
						evidence = append(evidence, fmt.Sprintf("container %d (pid %d): %s (%s)", p.Container, p.PID, where, u))
						compare(u, kv)
					}
				}
			}
		}
	}
	if e.Log != nil {
		for i, l := range e.Log.MismatchLines {
			evidence = append(evidence, "kernel: "+oneLine(l))
			m := e.Log.Mismatches[i]
			compare(m.ClientVersion, m.KernelVersion)
			if kv != "" && m.KernelVersion != "" && m.KernelVersion != kv {
				evidence = append(evidence, fmt.Sprintf("the log names the module %s, but %s is loaded now: the log is of an earlier boot or module", m.KernelVersion, kv))
			}
		}
	}
	if len(evidence) == 0 {
		return nil
	}
	if kv != "" && !strings.HasPrefix(evidence[0], kfrom) {
		evidence = append([]string{fmt.Sprintf("%s: %s", kfrom, kv)}, evidence...)
	}
	remedy := "NVML and CUDA only work when their libraries match the loaded module exactly. "
	if newer {
		remedy += "The libraries are newer than the loaded module: a driver upgrade whose new module is not loaded yet. Reboot, or stop " +
			"everything using the GPUs and reload the nvidia modules, so the new module is the one loaded. "
	}
	if older {
		remedy += "The libraries are older than the loaded module: stale ones, typically a container image that bundles its own driver " +
			"libraries, or a partial downgrade. In a container, do not bundle them: let the NVIDIA container toolkit (or, on Proxmox, a " +
			"bind mount of the host's libraries) provide the host's version, or install exactly the host's driver version in it. "
	}
	if !newer && !older {
		remedy += "After a driver upgrade on the host, reboot (or reload the nvidia modules) so the new module is loaded; in a container, " +
			"use the host's libraries (the NVIDIA container toolkit, or a bind mount on Proxmox) instead of bundled ones."
	}
	return []Finding{{
		Severity: Error,
		Title:    "the nvidia kernel module and the driver's userspace libraries are different versions",
		Evidence: capped(evidence, 10),
		Remedy:   strings.TrimSpace(remedy),
	}}
}

// compareVersions orders NVIDIA driver versions ("570.153.02" after "570.144") by their
// numeric parts; 0 when either is empty.
func compareVersions(a, b string) int {
	if a == "" || b == "" {
		return 0
	}
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			if x > y {
				return 1
			}
			return -1
		}
	}
	return 0
}
