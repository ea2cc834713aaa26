package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// pveRoot is the sample host laid out in a directory, for commands that write Proxmox's
// files; reset puts its /etc/pve back and removes the backups between cases.
func pveRoot(t *testing.T) (root string, reset func()) {
	t.Helper()
	root = t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	saved := pveFiles(t, root)
	return root, func() {
		for p := range pveFiles(t, root) {
			if _, ok := saved[p]; !ok {
				os.Remove(filepath.Join(root, p))
			}
		}
		for p, b := range saved {
			os.WriteFile(filepath.Join(root, p), []byte(b), 0o640)
		}
		os.RemoveAll(filepath.Join(root, "var/lib/gpusplit"))
	}
}

// pveFiles reads the regular files under etc/pve and var/lib/gpusplit.
func pveFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, top := range []string{"etc/pve", "var/lib/gpusplit"} {
		filepath.Walk(filepath.Join(root, top), func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				rel, _ := filepath.Rel(root, p)
				b, _ := os.ReadFile(p)
				out[rel] = string(b)
			}
			return nil
		})
	}
	return out
}

func samePVEFiles(t *testing.T, root string, before map[string]string) {
	t.Helper()
	now := pveFiles(t, root)
	for p, b := range before {
		if now[p] != b {
			t.Errorf("%s changed", p)
		}
	}
	for p := range now {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was written", p)
		}
	}
}

const vm131 = "etc/pve/nodes/kpro6/qemu-server/131.conf"

func edit(t *testing.T, root, rel string, f func(string) string) {
	t.Helper()
	p := filepath.Join(root, rel)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(f(string(b))), 0o640); err != nil {
		t.Fatal(err)
	}
}

// What was seen on the sample host: a sync that cannot be written whole writes nothing
// and says so; its dry run says why and exits non-zero; a result that cannot work is
// refused unless forced.
func TestPVESyncTransaction(t *testing.T) {
	root, reset := pveRoot(t)
	sync := func(args ...string) (string, string, error) {
		return run(t, append([]string{"--root", root, "pve", "sync", "--vfio", "numa:1"}, args...)...)
	}

	t.Run("VM locked by a backup", func(t *testing.T) {
		defer reset()
		edit(t, root, vm131, func(s string) string { return "lock: backup\n" + s })
		before := pveFiles(t, root)
		out, _, err := sync("--dry-run")
		if err == nil || !strings.Contains(out, "the write would stop (1 problem):\n  /etc/pve/qemu-server/131.conf: has lock: backup") {
			t.Errorf("dry run: %v\n%s", err, out)
		}
		out, _, err = sync("--apply")
		if err == nil || !strings.Contains(err.Error(), "nothing was written; 1 problem:\n  /etc/pve/qemu-server/131.conf: has lock: backup") {
			t.Errorf("--apply: %v\n%s", err, out)
		}
		if strings.Contains(out, "wrote ") {
			t.Errorf("--apply says it wrote:\n%s", out)
		}
		samePVEFiles(t, root, before)
	})

	t.Run("one GPU missing from the mapping", func(t *testing.T) {
		defer reset()
		edit(t, root, "etc/pve/mapping/pci.cfg", func(s string) string {
			return strings.Replace(s, "\tmap id=10de:2bb1,iommugroup=117,node=kpro6,path=0000:f1:00,subsystem-id=10de:204b\n", "", 1)
		})
		before := pveFiles(t, root)
		out, _, err := sync("--dry-run")
		if err == nil || !strings.Contains(out, "# REFUSED: VM 131: 4 hostpci entries would use mapping pro6000-vm, which holds 3 GPUs on kpro6") {
			t.Errorf("dry run: %v\n%s", err, out)
		}
		if _, _, err := sync("--apply"); err == nil || !strings.Contains(err.Error(), "--force writes a refused result all the same") {
			t.Errorf("--apply: %v", err)
		}
		samePVEFiles(t, root, before)
		out, stderr, err := sync("--apply", "--force")
		if err != nil || !strings.Contains(out, "# FORCED: VM 131") || !strings.Contains(out, "wrote 3 files; the previous versions are in "+filepath.Join(root, "/var/lib/gpusplit/backup")) {
			t.Errorf("--force: %v %s\n%s", err, stderr, out)
		}
	})

	t.Run("JSON says what happened to each file", func(t *testing.T) {
		defer reset()
		out, _, err := sync("--apply", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var doc syncDoc
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if !doc.Applied || len(doc.Files) != 3 || len(doc.Problems) != 0 {
			t.Fatalf("%+v", doc)
		}
		for _, f := range doc.Files {
			if f.Outcome != "written" || f.Backup == "" {
				t.Errorf("%+v", f)
			}
		}
		// Run again: nothing to do, nothing written, lists still lists.
		out, _, err = sync("--apply", "-o", "json")
		if err != nil || !strings.Contains(out, `"changes": []`) || !strings.Contains(out, `"files": []`) {
			t.Errorf("second run: %v\n%s", err, out)
		}
	})

	t.Run("vm-layout of a locked VM", func(t *testing.T) {
		defer reset()
		edit(t, root, vm131, func(s string) string { return "lock: snapshot\n" + s })
		before := pveFiles(t, root)
		layout := func(args ...string) (string, string, error) {
			return run(t, append([]string{"--root", root, "pve", "vm-layout", "--vm", "131"}, args...)...)
		}
		out, _, err := layout("--dry-run")
		if err == nil || !strings.Contains(out, "the write would stop:\n  /etc/pve/qemu-server/131.conf: has lock: snapshot") {
			t.Errorf("dry run: %v\n%s", err, out)
		}
		out, _, err = layout("--apply", "-o", "json")
		if err == nil || !strings.Contains(err.Error(), "nothing was written; 1 problem:\n  /etc/pve/qemu-server/131.conf: has lock: snapshot") || !strings.Contains(out, `"applied": false`) {
			t.Errorf("--apply: %v\n%s", err, out)
		}
		samePVEFiles(t, root, before)
	})
}

func TestPVESyncVMMappingName(t *testing.T) {
	freshDemo(t) // a dry run under --demo makes the scratch copy
	for _, name := range []string{"9gpus", "a", "gpus vm", "gpus/vm"} {
		if _, _, err := run(t, "--demo", "pve", "sync", "--vfio", "numa:1", "--vm-mapping", name); err == nil || !strings.Contains(err.Error(), "is not a Proxmox mapping id") {
			t.Errorf("--vm-mapping %q: %v", name, err)
		}
	}
	mustRun(t, "--demo", "pve", "sync", "--dry-run", "--vfio", "numa:1", "--vm-mapping", "gpus-vm")
}

// The backups of a sync are listed with the command that wrote them, and one is put
// back through the same transaction as any write.
func TestPVEBackups(t *testing.T) {
	root, _ := pveRoot(t)
	before := pveFiles(t, root)
	out := mustRun(t, "--root", root, "pve", "backups")
	if !strings.Contains(out, "No backups in "+filepath.Join(root, "/var/lib/gpusplit/backup")) {
		t.Errorf("no backups yet:\n%s", out)
	}
	mustRun(t, "--root", root, "pve", "sync", "--vfio", "numa:1", "--apply")
	var doc struct {
		Backups []struct {
			ID, Path, Command string
			Size              int
		}
	}
	if err := json.Unmarshal([]byte(mustRun(t, "--root", root, "pve", "backups", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Backups) != 3 {
		t.Fatalf("%+v", doc)
	}
	var id string
	for _, b := range doc.Backups {
		if b.Command != "pve sync" || b.Size == 0 {
			t.Errorf("%+v", b)
		}
		if b.Path == "/etc/pve/mapping/pci.cfg" {
			id = b.ID
		}
	}
	table := mustRun(t, "--root", root, "pve", "backups", "-o", "wide")
	if !strings.Contains(table, "3 backups in ") || !regexp.MustCompile(regexp.QuoteMeta(id)+` +/etc/pve/mapping/pci.cfg +\d{4}-\d\d-\d\d [\d:]+ +\d+ +pve sync\n`).MatchString(table) {
		t.Errorf("table:\n%s", table)
	}
	// At the tests' 100 columns FILE and SIZE go: the ID names the file.
	narrow := mustRun(t, "--root", root, "pve", "backups")
	for line := range strings.Lines(narrow) {
		if n := utf8.RuneCountInString(strings.TrimSuffix(line, "\n")); n > 100 {
			t.Errorf("pve backups: %d columns: %q", n, line)
		}
	}
	if !regexp.MustCompile(regexp.QuoteMeta(id) + ` +\d{4}-\d\d-\d\d [\d:]+ +pve sync\n`).MatchString(narrow) {
		t.Errorf("pve backups at 100 columns:\n%s", narrow)
	}
	out = mustRun(t, "--root", root, "pve", "backups", "restore", id, "--dry-run")
	if !strings.Contains(out, "dry run: nothing was written") {
		t.Errorf("dry run:\n%s", out)
	}
	out = mustRun(t, "--root", root, "pve", "backups", "restore", id, "--yes")
	if !strings.Contains(out, "written       /etc/pve/mapping/pci.cfg") || !strings.Contains(out, "restored "+id) {
		t.Errorf("restore:\n%s", out)
	}
	cfg := "etc/pve/mapping/pci.cfg"
	if now := pveFiles(t, root); now[cfg] != before[cfg] {
		t.Error("pci.cfg is not as before the sync")
	}
	if _, _, err := run(t, "--root", root, "pve", "backups", "restore", "nonesuch.20260101T000000.000000000Z"); err == nil || !strings.Contains(err.Error(), "no backup") {
		t.Errorf("unknown id: %v", err)
	}
	out = mustRun(t, "--root", root, "pve", "backups", "prune", "--keep", "1", "--yes")
	if !strings.Contains(out, "removed 1 backup.") {
		t.Errorf("prune:\n%s", out)
	}
}
