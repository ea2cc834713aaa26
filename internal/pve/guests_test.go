package pve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// A guest that is not on this node is named as missing, with the guests there are,
// where it was a raw read error; it still is fs.ErrNotExist for the callers that ask.
func TestNoGuestListsTheGuests(t *testing.T) {
	h, err := samplehost.Open()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind string
		id   int
		want string
	}{
		{LXC, 999, "no container 999 on this node (/etc/pve/lxc/999.conf does not exist); this node's containers: 129 (infer01)"},
		{QEMU, 998, "no VM 998 on this node (/etc/pve/qemu-server/998.conf does not exist); this node's VMs: 131 (train01)"},
	} {
		_, err := ReadGuest(h, c.kind, c.id)
		var ng *NoGuestError
		if !errors.As(err, &ng) || !errors.Is(err, fs.ErrNotExist) || err.Error() != c.want {
			t.Errorf("%s %d: %v\nwant %s", c.kind, c.id, err, c.want)
		}
	}
}

// GuestChoice names at most eight guests and says how to list the rest; a node with
// none says so.
func TestGuestChoice(t *testing.T) {
	dir := t.TempDir()
	for i := range 10 {
		p := filepath.Join(dir, "etc/pve/qemu-server", fmt.Sprintf("%d.conf", 200+i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("cores: 4\nname: vm%d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := GuestChoice(h, QEMU)
	if want := "this node's VMs: 200 (vm0), 201 (vm1), 202 (vm2), 203 (vm3), 204 (vm4), 205 (vm5), 206 (vm6), 207 (vm7), and 2 more (ls /etc/pve/qemu-server)"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := GuestChoice(h, LXC); got != "this node has no container" {
		t.Errorf("no containers: %s", got)
	}
	if _, err := ReadGuest(h, LXC, 300); err == nil || !strings.HasSuffix(err.Error(), "; this node has no container") {
		t.Errorf("no containers: %v", err)
	}
}

// Read leniently, pci.cfg gives every mapping and entry but the malformed lines (and the
// sections of bad headers), each named with its line; read strictly, it stops at the
// first, as before.
func TestParseMappingsLenient(t *testing.T) {
	const cfg = `good
	map id=10de:2bb1,node=kpro6,path=0000:01:00
	map id=10de:2bb1,node=kpro6,path=0000:C1:00
	map id=10de:2bb1,node=kpro6,path=0000:11:00
	colour blue

9bad
	map id=10de:2bb1,node=kpro6,path=0000:21:00

empty
	map node=kpro6

other
	map id=10de:2bb1,node=kpro7,path=0000:41:00
`
	f, problems, err := ParseMappingsLenient("pci.cfg", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ids, paths []string
	for _, m := range f.Mappings {
		ids = append(ids, m.ID)
		for _, e := range m.Maps {
			paths = append(paths, e.Path)
		}
	}
	if strings.Join(ids, " ") != "good other" || strings.Join(paths, " ") != "0000:01:00 0000:11:00 0000:41:00" {
		t.Errorf("mappings %v, paths %v", ids, paths)
	}
	var lines []string
	for _, p := range problems {
		lines = append(lines, fmt.Sprintf("%d", p.Line))
	}
	if got := strings.Join(lines, " "); got != "3 5 7 11 10" {
		t.Errorf("problems on lines %s, want 3 5 7 11 10: %v", got, problems)
	}
	if _, err := ParseMappings("pci.cfg", cfg); err == nil || !strings.HasPrefix(err.Error(), "pci.cfg:3: ") {
		t.Errorf("strict: %v", err)
	}
}
