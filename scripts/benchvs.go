//go:build ignore

// Benchvs times gpusplit against lspci -tv and lstopo --whole-io on the same trees: the
// sample host extracted as a directory and synthetic hosts of 256 to 16,384 PCI
// functions (internal/inventory's TestWriteSyntheticHost). scripts/bench-vs-lspci builds
// gpusplit and runs it; docs/performance.md has its output.
//
// Each round runs every command once, in an order that turns by one each round, so that
// a change of load falls on all of them alike; a command's ratio to lspci (or lstopo) is
// the median over the rounds of its time over lspci's time in the same round. Peak
// memory is ru_maxrss as /usr/bin/time reports it (GNU time forks a small process of its
// own; a child started from Go would count this program's memory too).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpusplit/gpusplit/internal/cpuset"
)

type command struct {
	name string
	args []string
}

func main() {
	rounds := flag.Int("rounds", 15, "timed rounds per tree")
	warm := flag.Int("warmup", 3, "untimed rounds first, to fill the page cache")
	sizes := flag.String("sizes", "sample,256,1024,4096,16384", "trees: sample, or a number of PCI functions (a multiple of 256)")
	gpusplit := flag.String("gpusplit", "gpusplit", "the gpusplit binary")
	before := flag.String("before", "", "another gpusplit binary, timed in the same rounds (an older build, to compare with)")
	work := flag.String("work", "", "where the trees are laid out (default: a temporary directory, removed at the end)")
	flag.Parse()
	for _, tool := range []string{"lspci", "lstopo"} {
		if _, err := exec.LookPath(tool); err != nil {
			fail("%s is not installed (apt-get install pciutils hwloc)", tool)
		}
	}
	dir := *work
	if dir == "" {
		d, err := os.MkdirTemp("", "benchvs")
		if err != nil {
			fail("%v", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	fmt.Printf("gpusplit: %s\n", strings.TrimSpace(output(*gpusplit, "--version")))
	if *before != "" {
		fmt.Printf("before: %s (%s)\n", strings.TrimSpace(output(*before, "--version")), *before)
	}
	fmt.Printf("lspci: %s; lstopo: %s\n", strings.TrimSpace(output("lspci", "--version")), strings.TrimSpace(output("lstopo", "--version")))
	fmt.Printf("%d rounds after %d of warm-up; ratios are medians of the rounds' ratios\n", *rounds, *warm)
	for _, size := range strings.Split(*sizes, ",") {
		root := filepath.Join(dir, size)
		devices, err := layOut(root, size)
		if err != nil {
			fail("%s: %v", size, err)
		}
		var cmds []command
		for _, b := range []struct{ label, bin string }{{"", *gpusplit}, {"before: ", *before}} {
			if b.bin == "" {
				continue
			}
			cmds = append(cmds,
				command{b.label + "gpusplit inventory", []string{b.bin, "--root", root, "inventory"}},
				command{b.label + "gpusplit topo", []string{b.bin, "--root", root, "topo"}})
			if size == "sample" {
				cmds = append(cmds, command{b.label + "gpusplit --demo topo", []string{b.bin, "--demo", "topo"}})
			}
		}
		cmds = append(cmds,
			command{"lspci -tv", []string{"lspci", "-A", "linux-sysfs", "-O", "sysfs.path=" + root + "/sys/bus/pci", "-tv"}},
			command{"lstopo --whole-io", []string{"lstopo", "--whole-io", "--input", root, "--of", "console"}},
		)
		measure(size, devices, cmds, *rounds, *warm)
	}
}

// layOut writes the tree once: the sample's archive extracted, or a synthetic host of n
// functions. lstopo needs each CPU's topology files, which neither has; they are added
// (gpusplit does not read them), one package per NUMA node and one thread per core.
func layOut(root, size string) (int, error) {
	if _, err := os.Stat(filepath.Join(root, "sys")); err != nil {
		if err := os.MkdirAll(root, 0o755); err != nil {
			return 0, err
		}
		var cmd *exec.Cmd
		if size == "sample" {
			cmd = exec.Command("tar", "-xzf", "internal/samplehost/kpro6.tar.gz", "-C", root)
		} else {
			cmd = exec.Command("go", "test", "-count=1", "-run", "^TestWriteSyntheticHost$", "./internal/inventory/")
			cmd.Env = append(os.Environ(), "GPUSPLIT_SYNTHETIC_DIR="+root, "GPUSPLIT_SYNTHETIC_FUNCTIONS="+size)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("%v: %v\n%s", cmd.Args, err, out)
		}
	}
	if err := addCPUTopology(root); err != nil {
		return 0, err
	}
	names, err := os.ReadDir(filepath.Join(root, "sys/bus/pci/devices"))
	return len(names), err
}

func addCPUTopology(root string) error {
	sys := filepath.Join(root, "sys/devices/system")
	possible, err := readCPUs(filepath.Join(sys, "cpu/possible"))
	if err != nil {
		return err
	}
	nbits := len(possible.CPUs())
	nodes, _ := filepath.Glob(filepath.Join(sys, "node/node[0-9]*"))
	for _, node := range nodes {
		cpus, err := readCPUs(filepath.Join(node, "cpulist"))
		if err != nil {
			return err
		}
		for _, c := range cpus.CPUs() {
			dir := filepath.Join(sys, "cpu", fmt.Sprintf("cpu%d", c), "topology")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			thread, _ := cpuset.Parse(strconv.Itoa(c))
			files := map[string]string{
				"physical_package_id": strings.TrimPrefix(filepath.Base(node), "node"),
				"core_id":             strconv.Itoa(c),
				"thread_siblings":     thread.Mask(nbits),
				"core_siblings":       cpus.Mask(nbits),
			}
			for name, v := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// readCPUs reads a CPU list file: "0-31,64-95".
func readCPUs(p string) (cpuset.Set, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return cpuset.Set{}, err
	}
	return cpuset.Parse(strings.TrimSpace(string(b)))
}

func measure(size string, devices int, cmds []command, rounds, warm int) {
	for _, c := range cmds {
		if out, err := exec.Command(c.args[0], c.args[1:]...).CombinedOutput(); err != nil || len(out) == 0 {
			fail("%s on %s: %v\n%s", c.name, size, err, out)
		}
	}
	times := make([][]time.Duration, len(cmds))
	for r := range warm + rounds {
		for k := range cmds {
			i := (k + r) % len(cmds)
			d := wall(cmds[i].args)
			if r >= warm {
				times[i] = append(times[i], d)
			}
		}
	}
	lspci, lstopo := len(cmds)-2, len(cmds)-1
	fmt.Printf("\n%s: %d PCI functions\n\n", size, devices)
	fmt.Println("| command | median wall | × lspci -tv | × lstopo --whole-io | peak RSS |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for i, c := range cmds {
		fmt.Printf("| `%s` | %s | %.2f | %.2f | %s |\n", c.name, ms(median(times[i])),
			ratio(times[i], times[lspci]), ratio(times[i], times[lstopo]), peakRSS(c.args))
	}
}

func wall(args []string) time.Duration {
	cmd := exec.Command(args[0], args[1:]...)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		fail("%v: %v", args, err)
	}
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ratio(a, b []time.Duration) float64 {
	rs := make([]float64, len(a))
	for i := range a {
		rs[i] = float64(a[i]) / float64(b[i])
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/1e6, 'f', int(math.Max(0, 2-math.Floor(math.Log10(float64(d)/1e6)))), 64) + " ms"
}

// peakRSS is the median of five runs' ru_maxrss.
func peakRSS(args []string) string {
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		return "(no /usr/bin/time)"
	}
	var kb []int
	for range 5 {
		var errOut bytes.Buffer
		cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M"}, args...)...)
		cmd.Stderr = &errOut
		if err := cmd.Run(); err != nil {
			fail("%v: %v\n%s", args, err, errOut.String())
		}
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		n, err := strconv.Atoi(lines[len(lines)-1])
		if err != nil {
			fail("/usr/bin/time printed %q", errOut.String())
		}
		kb = append(kb, n)
	}
	slices.Sort(kb)
	return fmt.Sprintf("%.1f MB", float64(kb[2])*1024/1e6) // GNU time counts KiB
}

func output(args ...string) string {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		fail("%v: %v\n%s", args, err, out)
	}
	return string(out)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-vs-lspci: "+format+"\n", args...)
	os.Exit(1)
}
