package split

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpusplit/gpusplit/internal/bind"
	"github.com/gpusplit/gpusplit/internal/demo"
	"github.com/gpusplit/gpusplit/internal/hook"
	"github.com/gpusplit/gpusplit/internal/inventory"
	"github.com/gpusplit/gpusplit/internal/persist"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// A part that fails puts back every part before it: with the boot files' directory
// taken by a file, the GPUs have moved and Proxmox's files are written when the boot
// files fail, and apply puts Proxmox's files and then the drivers back as they were.
func TestApplyPutsBackEveryPart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	if _, err := demo.Make(dir, demo.Options{}); err != nil {
		t.Fatal(err)
	}
	h, err := demo.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k, err := bind.OpenSim(h)
	if err != nil {
		t.Fatal(err)
	}
	choices, err := plan.ParseChoices([]string{"numa:1"})
	if err != nil {
		t.Fatal(err)
	}
	d := plan.ForVFIO(choices)
	d.SyncProxmox, d.Persist = true, true
	replan := func() (*inventory.Inventory, *plan.Plan, error) {
		inv, err := inventory.Build(h, nil)
		if err != nil {
			return nil, nil, err
		}
		p, err := plan.Make(inv, d)
		return inv, p, err
	}
	inv, p, err := replan()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Make(h, inv, p, d, Options{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Stops) > 0 || len(c.BootFiles) == 0 || c.Proxmox == nil || len(c.Proxmox.Changes) != 3 {
		t.Fatalf("the change: stops %v, %d boot files, proxmox %+v", c.Stops, len(c.BootFiles), c.Proxmox)
	}
	// The unit's directory is a file: the boot part fails after the others were made.
	unitDir := filepath.Join(dir, filepath.Dir(persist.Unit))
	if err := os.MkdirAll(filepath.Dir(unitDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unitDir, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pveFiles := []string{"etc/pve/mapping/pci.cfg", "etc/pve/nodes/kpro6/lxc/129.conf", "etc/pve/nodes/kpro6/qemu-server/131.conf"}
	before := map[string]string{}
	for _, f := range pveFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		before[f] = string(b)
	}
	drivers := func() string {
		var out []string
		for _, m := range p.Moves {
			d, _ := k.Driver(m.Device)
			out = append(out, m.Device.String()+"="+d)
		}
		return strings.Join(out, " ")
	}
	was := drivers()

	lock, err := bind.TakeLock(h, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	res, err := Apply(context.Background(), c, Tx{H: h, Lock: lock, Kernel: k, Inv: inv, Bind: bind.Options{UnbindTimeout: 2 * time.Second, Parallel: 2},
		Services: hook.Simulated(h, nil), Replan: replan, Command: "test"})
	if err == nil || !strings.HasPrefix(err.Error(), "writing the boot files failed, so everything done before it was put back") {
		t.Fatalf("apply: %v", err)
	}
	if res == nil || !res.Undone || len(res.UndoErrs) != 0 || res.Drivers == nil || len(res.Drivers.Moved) != 8 || !res.Proxmox.Applied {
		t.Fatalf("result: %+v", res)
	}
	if rep := res.Report(err); !rep.RolledBack || rep.Error != err.Error() || len(rep.Moved) != 8 || !rep.Proxmox.Applied {
		t.Errorf("the JSON report: %+v", rep)
	}
	if got := drivers(); got != was {
		t.Errorf("drivers after the undo:\n%s\nwere\n%s", got, was)
	}
	for _, f := range pveFiles {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != before[f] {
			t.Errorf("%s after the undo:\n%s", f, b)
		}
	}
	for _, f := range c.BootFiles {
		if _, err := os.Lstat(filepath.Join(dir, f.Path)); err == nil && f.Path != filepath.Dir(persist.Unit) {
			t.Errorf("boot file %s was left", f.Path)
		}
	}
}
