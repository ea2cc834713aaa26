package bind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// A crashed apply is one whose process died: nothing it meant to do after that runs,
// not its own rollback, not a journal written late, and the kernel drops its lock. The
// crash tests run the apply in a child process (this test binary run again) that kills
// itself with SIGKILL after the n-th kernel write, the fake kernel's state saved to a
// file at that moment; the test then rolls back from what is on disk.
const (
	crashRootEnv  = "GPUSPLIT_BIND_CRASH_ROOT"  // the host's root directory
	crashStateEnv = "GPUSPLIT_BIND_CRASH_STATE" // where the child saves the fake kernel
	crashAfterEnv = "GPUSPLIT_BIND_CRASH_AFTER" // the kernel write the child dies after
)

func TestMain(m *testing.M) {
	if root := os.Getenv(crashRootEnv); root != "" {
		crashChild(root, os.Getenv(crashStateEnv), os.Getenv(crashAfterEnv))
	}
	os.Exit(m.Run())
}

// crashChild applies fourGPUs' plan on the host at root, one group at a time, and dies
// after the n-th kernel write. It exits 3 (not killed) when the apply ends before that.
func crashChild(root, state, after string) {
	n, err := strconv.Atoi(after)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", crashAfterEnv, err)
		os.Exit(2)
	}
	h, err := host.Open(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	f, p := fourGPUs()
	f.onWrite = func(i int, _ string) {
		if i != n {
			return
		}
		if err := saveKernel(f, state); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	opts := fast
	opts.Parallel = 1
	l, err := TakeLock(h, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	_, err = Apply(context.Background(), l, f, p, opts)
	fmt.Fprintf(os.Stderr, "the apply ended before write %d: %v\n", n, err)
	os.Exit(3)
}

// savedDev is a device of the fake kernel as saveKernel writes it.
type savedDev struct {
	Driver, Override, Natural string
	Group                     int
}

// saveKernel writes the fake's devices to a file; callers hold its lock.
func saveKernel(f *fakeKernel, path string) error {
	out := map[string]savedDev{}
	for a, d := range f.devs {
		out[a.String()] = savedDev{d.driver, d.override, d.natural, d.group}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// loadKernel is a fake kernel with the devices saveKernel wrote, and fourGPUs' drivers.
func loadKernel(t *testing.T, path string) *fakeKernel {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the crashed apply saved no kernel state: %v", err)
	}
	var in map[string]savedDev
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	f := newFake()
	for a, d := range in {
		f.devs[mustAddr(a)] = &fakeDev{driver: d.Driver, override: d.Override, natural: d.Natural, group: d.Group}
	}
	return f
}

// The journal is on disk, complete, before the kernel sees the first write of a run:
// a run that dies at any write leaves a journal to roll back from. A module load
// counts: it comes after the journal too.
func TestApplyJournalsBeforeFirstWrite(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(f *fakeKernel)
		first string // the first write
	}{
		{"vfio-pci loaded", func(f *fakeKernel) {}, `override 0000:81:00.0 "vfio-pci"`},
		{"vfio-pci loaded by the run", func(f *fakeKernel) { delete(f.loaded, plan.VFIO); f.modules[plan.VFIO] = true }, "load vfio-pci"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, p := fourGPUs()
			c.setup(f)
			h, dir := gpuHost(t, f)
			var first string
			var seen *Journal
			var problem error
			f.onWrite = func(n int, w string) {
				if n != 1 {
					return
				}
				first = w
				if _, err := os.Stat(filepath.Join(dir, "var/lib/gpusplit/journal.json")); err != nil {
					problem = fmt.Errorf("no journal on disk at the first write: %w", err)
					return
				}
				seen, problem = ReadJournal(h)
			}
			opts := fast
			opts.Parallel = 1
			if _, err := Apply(context.Background(), lockOf(t, h), f, p, opts); err != nil {
				t.Fatal(err)
			}
			if first != c.first {
				t.Errorf("first write %q, want %q", first, c.first)
			}
			if problem != nil {
				t.Fatal(problem)
			}
			if len(seen.Devices) != len(p.Moves) {
				t.Fatalf("the journal at the first write lists %d devices, want %d", len(seen.Devices), len(p.Moves))
			}
			for i, m := range p.Moves {
				d := seen.Devices[i]
				if d.Device != m.Device || d.Driver != m.From || d.Override != "" || d.To != plan.VFIO || d.IOMMUGroup != m.IOMMUGroup {
					t.Errorf("the journal at the first write has %+v for %s, want on %s, no override, to vfio-pci", d, m.Device, m.From)
				}
			}
		})
	}
}

// An apply that dies half-way is rolled back from the journal on disk, as the rollback
// command does it: read the journal, check it against the host, restore the devices
// not yet back. With one group at a time each device takes three writes (override,
// unbind, probe), in the plan's order.
func TestRollbackAfterCrash(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 3, 4, 11, 24} {
		t.Run(fmt.Sprintf("after write %d", n), func(t *testing.T) {
			before, p := fourGPUs()
			h, dir := gpuHost(t, before)
			state := filepath.Join(t.TempDir(), "kernel.json")
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), crashRootEnv+"="+dir, crashStateEnv+"="+state, crashAfterEnv+"="+strconv.Itoa(n))
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the apply was not killed at write %d: %v\n%s", n, err, out)
			}
			f := loadKernel(t, state)

			// The crash left the devices where the n-th write took them: those before
			// device k moved, device k part-way, the rest untouched.
			k, step := (n-1)/3, (n-1)%3
			for i, m := range p.Moves {
				want := m.From + "/"
				switch {
				case i < k || i == k && step == 2:
					want = "vfio-pci/vfio-pci"
				case i == k && step == 0:
					want = m.From + "/vfio-pci"
				case i == k && step == 1:
					want = "/vfio-pci"
				}
				if got := f.state(m.Device); got != want {
					t.Errorf("after the crash %s is %s, want %s", m.Device, got, want)
				}
			}

			j, err := ReadJournal(h)
			if err != nil {
				t.Fatalf("after the crash: %v", err)
			}
			s := scopeOf(p)
			if forced, err := CheckJournal(h, f, j, s); err != nil || len(forced) != 0 {
				t.Fatalf("the journal of the crashed apply: %v (forced %v)", err, forced)
			}
			var todo []Prior
			for _, d := range j.Devices {
				drv, _ := f.Driver(d.Device)
				ov, _ := f.Override(d.Device)
				if drv != d.Driver || ov != d.Override {
					todo = append(todo, d)
				}
			}
			if want := min(k+1, len(p.Moves)); len(todo) != want {
				t.Errorf("%d devices to restore, want %d", len(todo), want)
			}
			part := *j
			part.Devices = todo
			res, err := Rollback(context.Background(), lockOf(t, h), f, &part, s, nil, fast)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Restored) != len(todo) || len(res.Unrestored) != 0 {
				t.Errorf("restored %v, unrestored %v, want the %d devices", res.Restored, res.Unrestored, len(todo))
			}
			for _, m := range p.Moves {
				if got, want := f.state(m.Device), m.From+"/"; got != want {
					t.Errorf("after rollback %s is %s, want %s", m.Device, got, want)
				}
			}
		})
	}
}
