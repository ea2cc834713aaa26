package hook

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// sampleDir lays the sample host out in a directory; simulated makes it a simulated
// host, as the demo's scratch copy is.
func sampleDir(t *testing.T, simulated bool) (string, *host.Host) {
	t.Helper()
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	if simulated {
		if err := os.WriteFile(filepath.Join(root, host.SimulationRecord), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, h
}

// Each phase that has work to do leaves the record of how it ended, how long it took,
// and how often each result came since the boot: a container's start that passed, a
// VM's start that failed, and one that ran past its deadline. A phase with nothing to
// do leaves none.
func TestHandOffRecords(t *testing.T) {
	_, h := sampleDir(t, true)
	refuse := func(*host.Host) (bind.Kernel, error) { return nil, errors.New("no kernel here\nsecond line") }
	slow := func(*host.Host) (bind.Kernel, error) {
		time.Sleep(300 * time.Millisecond)
		return nil, errors.New("too late")
	}
	run := func(c Config, guest int, phase string) {
		t.Helper()
		c.H = h
		if _, err := Run(context.Background(), c, guest, phase); err == nil && c.Kernel != nil {
			t.Fatalf("%d %s: no error", guest, phase)
		}
	}
	run(Config{}, 129, PreStart)
	run(Config{}, 129, PreStart)
	run(Config{}, 131, PostStart)
	run(Config{Kernel: refuse}, 131, PreStart)
	run(Config{Kernel: slow, Deadline: 100 * time.Millisecond}, 131, PreStart)

	recs, damaged, err := HandOffs(h)
	if err != nil || damaged != 0 || len(recs) != 2 {
		t.Fatalf("HandOffs = %+v, %d, %v; want the records of 129 and 131", recs, damaged, err)
	}
	ct, vm := recs[0], recs[1]
	if ct.Guest != 129 || ct.Kind != "container" || ct.Phase != PreStart || ct.Result != ResultOK || ct.Error != "" || ct.Counts[PreStart][ResultOK] != 2 {
		t.Errorf("container 129: %+v", ct)
	}
	if vm.Guest != 131 || vm.Kind != "vm" || vm.Phase != PreStart || vm.Result != ResultDeadline || !strings.Contains(vm.Error, "too late") {
		t.Errorf("VM 131: %+v", vm)
	}
	if got := vm.Counts; got[PreStart][ResultFailed] != 1 || got[PreStart][ResultDeadline] != 1 || got[PreStart][ResultOK] != 0 || len(got) != 1 {
		t.Errorf("VM 131's counts %v: want one failed and one past its deadline, of pre-start alone", got)
	}
	if vm.Seconds < 0.3 || vm.Seconds > 30 || time.Since(vm.Start) > time.Minute || vm.Start.After(time.Now()) {
		t.Errorf("VM 131 started %s and took %.3f s; the last start waited 300 ms for its kernel", vm.Start, vm.Seconds)
	}
	if ct.Seconds > vm.Seconds {
		t.Errorf("the container's check took %.3f s, the VM's slow start %.3f s", ct.Seconds, vm.Seconds)
	}
}

// The first line of the error is kept, the rest is in the task log.
func TestHandOffKeepsTheErrorsFirstLine(t *testing.T) {
	_, h := sampleDir(t, true)
	c := Config{H: h, Kernel: func(*host.Host) (bind.Kernel, error) { return nil, errors.New("no kernel here\nsecond line") }}
	if _, err := Run(context.Background(), c, 131, PreStart); err == nil {
		t.Fatal("no error")
	}
	recs, _, err := HandOffs(h)
	if err != nil || len(recs) != 1 || recs[0].Result != ResultFailed || !strings.HasSuffix(recs[0].Error, "no kernel here") {
		t.Errorf("%+v, %v", recs, err)
	}
}

// A copy of a host (--root) is read, never written: its hooks leave no record.
func TestHandOffNotOnACopy(t *testing.T) {
	root, h := sampleDir(t, false)
	if _, err := Run(context.Background(), Config{H: h}, 129, PreStart); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, HandOffDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a record was written to the copy: %v", err)
	}
	if recs, _, err := HandOffs(h); err != nil || len(recs) != 0 {
		t.Errorf("HandOffs = %+v, %v", recs, err)
	}
}

// A record that is not one is left out and counted; atomicfile's temporary files and
// names that are no guest are passed over.
func TestHandOffsDamaged(t *testing.T) {
	root, h := sampleDir(t, true)
	if _, err := Run(context.Background(), Config{H: h}, 129, PreStart); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, HandOffDir)
	for name, body := range map[string]string{
		"130.json":           "not json",
		"132.json":           `{"guest": 133, "result": "ok"}`,
		"134.json":           `{"guest": 134, "result": "maybe"}`,
		".129.json.tmp12345": "{}",
		"0135.json":          `{"guest": 135, "result": "ok"}`,
		"notes.txt":          "x",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	recs, damaged, err := HandOffs(h)
	if err != nil || damaged != 3 || len(recs) != 1 || recs[0].Guest != 129 {
		t.Errorf("HandOffs = %+v, %d damaged, %v; want 129's record and 3 damaged", recs, damaged, err)
	}
}
