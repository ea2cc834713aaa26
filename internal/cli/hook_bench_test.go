package cli

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkHookPhases measures what gpusplit itself adds to a VM's start and stop: the
// pre-start and post-stop of VM 131 of the sample host, whose four GPUs and their audio
// functions (8 devices) go to vfio-pci and back, each phase a whole command as the
// snippet runs it (flags, the host read, the plan, the lock, the journal, the checks
// of health). The kernel is simulated and binds at once, so the figures leave out the
// kernel's own waits, which on a real host are most of a phase; the CPU time is the
// process's own (getrusage), user and system together.
func BenchmarkHookPhases(b *testing.B) {
	root, _, k := mirroredHost(b)
	var pre, post cost
	for b.Loop() {
		pre.measure(func() { mustRun(b, "--root", root, "hook", "131", "pre-start") })
		if got := k.state("0000:01:00.0"); got != "vfio-pci/vfio-pci" {
			b.Fatalf("after pre-start 0000:01:00.0 is %s", got)
		}
		post.measure(func() { mustRun(b, "--root", root, "hook", "131", "post-stop") })
		if got := k.state("0000:01:00.0"); got != "nvidia/" {
			b.Fatalf("after post-stop 0000:01:00.0 is %s", got)
		}
	}
	pre.report(b, "pre-start")
	post.report(b, "post-stop")
}

// cost adds up the wall and CPU time of runs.
type cost struct {
	runs      int
	wall, cpu time.Duration
}

func (c *cost) measure(f func()) {
	before, start := cpuTime(), time.Now()
	f()
	c.wall += time.Since(start)
	c.cpu += cpuTime() - before
	c.runs++
}

func (c *cost) report(b *testing.B, phase string) {
	if c.runs == 0 {
		return
	}
	b.ReportMetric(float64(c.cpu.Microseconds())/1000/float64(c.runs), "cpu-ms/"+phase)
	b.ReportMetric(float64(c.wall.Microseconds())/1000/float64(c.runs), "wall-ms/"+phase)
}

// cpuTime is the user and system time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
