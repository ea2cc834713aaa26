package pve

import (
	"reflect"
	"strings"
	"testing"
)

// storage.cfg shaped like a Proxmox VE 9 node's: the installer's local and local-lvm,
// with snippets added to local, an NFS share, and a disabled directory.
const storageCfg = `dir: local
	path /var/lib/vz
	content iso,vztmpl,backup,snippets

lvmthin: local-lvm
	thinpool data
	vgname pve
	content rootdir,images

nfs: shared
	export /export/pve
	server 10.0.0.5
	content images,snippets
	nodes kpro5,kpro6

dir: old
	path /srv/old
	content snippets
	disable
`

func TestParseStorage(t *testing.T) {
	got, err := ParseStorage(storageCfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []Storage{
		{Type: "dir", ID: "local", Path: "/var/lib/vz", Content: []string{"iso", "vztmpl", "backup", "snippets"}},
		{Type: "lvmthin", ID: "local-lvm", Content: []string{"rootdir", "images"}},
		{Type: "nfs", ID: "shared", Path: "/mnt/pve/shared", Content: []string{"images", "snippets"}, Nodes: []string{"kpro5", "kpro6"}},
		{Type: "dir", ID: "old", Path: "/srv/old", Content: []string{"snippets"}, Disabled: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	for _, c := range []struct {
		i    int
		node string
		dir  string
		ok   bool
	}{
		{0, "kpro6", "/var/lib/vz/snippets", true},
		{1, "kpro6", "", false}, // LVM holds no files
		{2, "kpro6", "/mnt/pve/shared/snippets", true},
		{2, "kpro7", "", false}, // not on that node
		{3, "kpro6", "", false}, // disabled
	} {
		if dir, ok := got[c.i].SnippetsDir(c.node); dir != c.dir || ok != c.ok {
			t.Errorf("%s on %s: %q %v, want %q %v", got[c.i].ID, c.node, dir, ok, c.dir, c.ok)
		}
	}
	if _, err := ParseStorage("dir local\n"); err == nil || !strings.Contains(err.Error(), "storage.cfg:1") {
		t.Errorf("err = %v", err)
	}
}
