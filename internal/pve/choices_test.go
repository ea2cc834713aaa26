package pve

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A shell completion offers this node's guests by id with their names (a VM's name, a
// container's hostname), only the config names Proxmox writes, and a config it cannot
// read by its id alone.
func TestGuestChoices(t *testing.T) {
	rc := newRefCase(t)
	dir := filepath.Join(rc.root, "etc/pve/nodes/kpro6/qemu-server")
	for name, body := range map[string]string{
		"0132.conf":     "name: padded\n",  // not a name Proxmox writes
		"+133.conf":     "name: signed\n",  // nor this
		"134.conf.tmp":  "name: partial\n", // pmxcfs's temporary file
		"135.conf":      strings.Repeat("x", MaxFile+1),
		"1310.conf":     "name: second\n",
		"qemu-server.x": "",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		kind, prefix string
		want         []Choice
	}{
		{QEMU, "", []Choice{{"131", "train01"}, {"135", ""}, {"1310", "second"}}},
		{QEMU, "131", []Choice{{"131", "train01"}, {"1310", "second"}}},
		{QEMU, "2", nil},
		{LXC, "", []Choice{{"129", "infer01"}}}, // kpro5's container 150 is not this node's
	} {
		got, err := GuestChoices(rc.h, tc.kind, tc.prefix)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("GuestChoices(%s, %q) = %q, %v; want %q", tc.kind, tc.prefix, got, err, tc.want)
		}
	}
	if err := os.RemoveAll(filepath.Join(rc.root, "etc/pve/nodes/kpro6/lxc")); err != nil {
		t.Fatal(err)
	}
	if got, err := GuestChoices(rc.h, LXC, ""); err == nil {
		t.Errorf("no lxc directory: %q, no error", got)
	}
}

// The mappings are offered in the file's order with their descriptions; a backup with
// its file, time and the command that replaced it.
func TestMappingAndBackupChoices(t *testing.T) {
	rc := newRefCase(t)
	got, err := MappingChoices(rc.h)
	if err != nil || len(got) != 2 || got[0].Value != "a6000-ws" || got[1] != (Choice{"pro6000", "RTX PRO 6000 Blackwell, whole cards with HDMI audio"}) {
		t.Errorf("MappingChoices: %q, %v", got, err)
	}
	if got, err := BackupChoices(rc.h); err != nil || len(got) != 0 {
		t.Fatalf("before any write: %q, %v", got, err)
	}
	when := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w := rc.writer()
	w.Command = "pve sync --apply"
	w.Now = func() time.Time { return when }
	if _, err := w.Commit(rc.edits[:1]); err != nil {
		t.Fatal(err)
	}
	got, err = BackupChoices(rc.h)
	want := fmt.Sprintf("%s, replaced %s by pve sync --apply", rc.edits[0].Path, when.Local().Format("2006-01-02 15:04:05"))
	if err != nil || len(got) != 1 || got[0].Desc != want || got[0].Value == "" {
		t.Errorf("BackupChoices: %q, %v; want one with %q", got, err, want)
	}
	// A mapping without a description says how many entries it has.
	cfg := filepath.Join(rc.root, "etc/pve/mapping/pci.cfg")
	if err := os.WriteFile(cfg, []byte("one\n\tmap node=kpro6,path=0000:01:00.0,id=10de:2bb1\n\ntwo\n\tmap node=kpro6,path=0000:11:00.0,id=10de:2bb1\n\tmap node=kpro6,path=0000:21:00.0,id=10de:2bb1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := MappingChoices(rc.h); err != nil || !slices.Equal(got, []Choice{{"one", "1 entry"}, {"two", "2 entries"}}) {
		t.Errorf("MappingChoices without descriptions: %q, %v", got, err)
	}
	// The mapping: selectors are the mappings with an entry on this node, each with
	// its devices here; one of another node only is not offered.
	if err := os.WriteFile(cfg, []byte("one\n\tmap node=kpro6,path=0000:01:00.0,id=10de:2bb1\n\ntwo\n\tmap node=kpro5,path=0000:11:00.0,id=10de:2bb1\n\nthree\n\tmap node=kpro6,path=0000:21:00.0;0000:31:00.0,id=10de:2bb1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantSel := []Choice{{"mapping:one", "PCI mapping one: 0000:01:00.0"}, {"mapping:three", "PCI mapping three: 0000:21:00.0, 0000:31:00.0"}}
	if got, err := MappingSelectorChoices(rc.h); err != nil || !slices.Equal(got, wantSel) {
		t.Errorf("MappingSelectorChoices: %q, %v; want %q", got, err, wantSel)
	}

}
