package holders_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/pve"
)

// The holders read guest configs with a reader of their own (internal/pve builds on the
// inventory, which uses them). On Proxmox's example files, checked against Proxmox's own
// parsers, it must find the keys of the main section that internal/pve finds.
func TestConfigKeysAsPVE(t *testing.T) {
	files, err := filepath.Glob("../pve/testdata/*.conf.example")
	if err != nil || len(files) < 3 {
		t.Fatalf("example configs: %v, %v", files, err)
	}
	texts := map[string]string{
		// What the examples lack: raw keys written with " = ", a comment.
		"raw": "#note\ndev0: /dev/dri/card1,gid=44\nlxc.mount.entry = /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n[snap]\ndev1: /dev/nvidia1\n",
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(data)
	}
	for f, data := range texts {
		g, err := pve.ParseGuest(f, pve.LXC, 1, data)
		if err != nil {
			t.Fatal(err)
		}
		var want [][2]string
		for _, k := range g.Keys() {
			want = append(want, [2]string{k.Name, k.Value})
		}
		if got := holders.ConfigKeys(data); !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", f, got, want)
		}
	}
}
